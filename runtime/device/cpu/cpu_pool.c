/* Max pooling, no padding. The backward pass finds each window's first
 * maximum in x again rather than matching y, so that a tie between equal
 * values goes where the forward pass took its value from. */
#include <string.h>

#include <ferry/error.h>

#include "cpu_int.h"

static bool valid(const ferry_pool_t *p)
{
    ferry_pool_t t = *p;
    return ferry_pool_shape(&t) && t.oh == p->oh && t.ow == p->ow;
}

/* Offset within the plane of the window's first maximum. */
static size_t first_max(const ferry_pool_t *p, const float *plane, int oy, int ox)
{
    const int y0 = oy * p->stride, x0 = ox * p->stride;
    size_t best = (size_t)y0 * p->w + x0;
    for (int dy = 0; dy < p->size; dy++) {
        const float *row = plane + (size_t)(y0 + dy) * p->w + x0;
        for (int dx = 0; dx < p->size; dx++)
            if (row[dx] > plane[best])
                best = (size_t)(y0 + dy) * p->w + x0 + dx;
    }
    return best;
}

/* 2x2 windows moved by 2, the common case, with the window unrolled: the
 * index (0-3, in row order) of its first maximum. */
static inline int first_of_4(float a, float b, float c, float d)
{
    int at = 0;
    float m = a;
    if (b > m)
        m = b, at = 1;
    if (c > m)
        m = c, at = 2;
    if (d > m)
        at = 3;
    return at;
}

static void pool2_plane(const ferry_pool_t *p, const float *restrict x, float *restrict y)
{
    for (int oy = 0; oy < p->oh; oy++) {
        const float *restrict r0 = x + (size_t)2 * oy * p->w, *restrict r1 = r0 + p->w;
        float *restrict yo = y + (size_t)oy * p->ow;
        for (int ox = 0; ox < p->ow; ox++) {
            float m = r0[2 * ox];
            m = r0[2 * ox + 1] > m ? r0[2 * ox + 1] : m;
            m = r1[2 * ox] > m ? r1[2 * ox] : m;
            m = r1[2 * ox + 1] > m ? r1[2 * ox + 1] : m;
            yo[ox] = m;
        }
    }
}

/* Windows do not overlap, so every input is written once: no clearing
 * pass; only a last odd row or column that no window covers is zeroed. */
static void pool2_grad_plane(const ferry_pool_t *p, const float *restrict x,
                             const float *restrict dy, float *restrict dx)
{
    for (int oy = 0; oy < p->oh; oy++) {
        const float *r0 = x + (size_t)2 * oy * p->w, *r1 = r0 + p->w;
        float *d0 = dx + (size_t)2 * oy * p->w, *d1 = d0 + p->w;
        const float *g = dy + (size_t)oy * p->ow;
        for (int ox = 0; ox < p->ow; ox++) {
            int at = first_of_4(r0[2 * ox], r0[2 * ox + 1], r1[2 * ox], r1[2 * ox + 1]);
            d0[2 * ox] = at == 0 ? g[ox] : 0.f;
            d0[2 * ox + 1] = at == 1 ? g[ox] : 0.f;
            d1[2 * ox] = at == 2 ? g[ox] : 0.f;
            d1[2 * ox + 1] = at == 3 ? g[ox] : 0.f;
        }
        for (int ix = 2 * p->ow; ix < p->w; ix++)
            d0[ix] = d1[ix] = 0.f;
    }
    for (int iy = 2 * p->oh; iy < p->h; iy++)
        memset(dx + (size_t)iy * p->w, 0, sizeof(float) * p->w);
}

static bool is_pool2(const ferry_pool_t *p)
{
    return p->size == 2 && p->stride == 2;
}

int cpu_maxpool(ferry_device_t *dev, const ferry_pool_t *p, const float *x, float *y)
{
    (void)dev;
    if (!valid(p))
        return FERRY_EINVAL;
    const size_t in_plane = (size_t)p->h * p->w, out_plane = (size_t)p->oh * p->ow;
    for (size_t pl = 0; pl < (size_t)p->n * p->c; pl++) {
        const float *xp = x + pl * in_plane;
        float *yp = y + pl * out_plane;
        if (is_pool2(p)) {
            pool2_plane(p, xp, yp);
            continue;
        }
        for (int oy = 0; oy < p->oh; oy++)
            for (int ox = 0; ox < p->ow; ox++)
                yp[(size_t)oy * p->ow + ox] = xp[first_max(p, xp, oy, ox)];
    }
    return 0;
}

int cpu_maxpool_grad(ferry_device_t *dev, const ferry_pool_t *p, const float *x,
                     const float *y, const float *dy, float *dx)
{
    (void)dev;
    (void)y;
    if (!valid(p))
        return FERRY_EINVAL;
    const size_t in_plane = (size_t)p->h * p->w, out_plane = (size_t)p->oh * p->ow;
    if (!is_pool2(p))
        memset(dx, 0, sizeof(float) * in_plane * p->n * p->c);
    for (size_t pl = 0; pl < (size_t)p->n * p->c; pl++) {
        const float *xp = x + pl * in_plane;
        const float *dyp = dy + pl * out_plane;
        float *dxp = dx + pl * in_plane;
        if (is_pool2(p)) {
            pool2_grad_plane(p, xp, dyp, dxp);
            continue;
        }
        /* += : windows overlap when stride < size. */
        for (int oy = 0; oy < p->oh; oy++)
            for (int ox = 0; ox < p->ow; ox++)
                dxp[first_max(p, xp, oy, ox)] += dyp[(size_t)oy * p->ow + ox];
    }
    return 0;
}
