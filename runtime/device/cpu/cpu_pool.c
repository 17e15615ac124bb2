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

int cpu_maxpool(ferry_device_t *dev, const ferry_pool_t *p, const float *x, float *y)
{
    (void)dev;
    if (!valid(p))
        return FERRY_EINVAL;
    const size_t in_plane = (size_t)p->h * p->w, out_plane = (size_t)p->oh * p->ow;
    for (size_t pl = 0; pl < (size_t)p->n * p->c; pl++) {
        const float *xp = x + pl * in_plane;
        float *yp = y + pl * out_plane;
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
    memset(dx, 0, sizeof(float) * in_plane * p->n * p->c);
    for (size_t pl = 0; pl < (size_t)p->n * p->c; pl++) {
        const float *xp = x + pl * in_plane;
        const float *dyp = dy + pl * out_plane;
        float *dxp = dx + pl * in_plane;
        /* += : windows overlap when stride < size. */
        for (int oy = 0; oy < p->oh; oy++)
            for (int ox = 0; ox < p->ow; ox++)
                dxp[first_max(p, xp, oy, ox)] += dyp[(size_t)oy * p->ow + ox];
    }
    return 0;
}
