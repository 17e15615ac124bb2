/* Convolutions as matrix products, one image at a time: im2col lays out
 * the c*r*s input values under each of the oh*ow outputs as the columns of
 * a (c r s) x (oh ow) matrix, and the filters [k][c r s] times it is the
 * image's output [k][oh ow] in NCHW order with no transpose. The backward
 * pass uses the same columns for dw and scatters W^T dy back with col2im
 * for dx. A 1x1 filter with stride 1 and no padding needs no columns: the
 * image is its own. */
#include <string.h>

#include <ferry/error.h>

#include "cpu_int.h"

/* Outputs o in [*lo, *hi) read inside the input (0 <= o*stride - pad + off
 * < size); the rest read padding. */
static void inside(int off, int pad, int stride, int size, int outs, int *lo, int *hi)
{
    int first = pad - off; /* o * stride >= pad - off */
    int l = first <= 0 ? 0 : (first + stride - 1) / stride;
    int last = size + pad - off; /* o * stride < size + pad - off */
    int h = last <= 0 ? 0 : (last + stride - 1) / stride;
    *lo = l < outs ? l : outs;
    *hi = h < outs ? h : outs;
    if (*hi < *lo)
        *hi = *lo;
}

static void im2col(const ferry_conv_t *s, const float *restrict x, float *restrict col)
{
    const size_t plane = (size_t)s->oh * s->ow;
    for (int c = 0; c < s->c; c++) {
        const float *xc = x + (size_t)c * s->h * s->w;
        for (int r = 0; r < s->r; r++) {
            int ylo, yhi;
            inside(r, s->pad, s->stride, s->h, s->oh, &ylo, &yhi);
            for (int q = 0; q < s->s; q++) {
                int xlo, xhi;
                inside(q, s->pad, s->stride, s->w, s->ow, &xlo, &xhi);
                float *restrict out = col + ((size_t)(c * s->r + r) * s->s + q) * plane;
                for (int oy = 0; oy < s->oh; oy++) {
                    float *restrict o = out + (size_t)oy * s->ow;
                    if (oy < ylo || oy >= yhi) {
                        memset(o, 0, sizeof(float) * s->ow);
                        continue;
                    }
                    const float *restrict in =
                        xc + (size_t)(oy * s->stride - s->pad + r) * s->w - s->pad + q;
                    for (int ox = 0; ox < xlo; ox++)
                        o[ox] = 0.f;
                    if (s->stride == 1)
                        memcpy(o + xlo, in + xlo, sizeof(float) * (xhi - xlo));
                    else
                        for (int ox = xlo; ox < xhi; ox++)
                            o[ox] = in[(size_t)ox * s->stride];
                    for (int ox = xhi; ox < s->ow; ox++)
                        o[ox] = 0.f;
                }
            }
        }
    }
}

/* dx (one image) = the sum of each column value back onto the input it was
 * read from; padding positions drop out. */
static void col2im(const ferry_conv_t *s, const float *restrict col, float *restrict dx)
{
    const size_t plane = (size_t)s->oh * s->ow;
    memset(dx, 0, sizeof(float) * s->c * s->h * s->w);
    for (int c = 0; c < s->c; c++) {
        float *dc = dx + (size_t)c * s->h * s->w;
        for (int r = 0; r < s->r; r++) {
            int ylo, yhi;
            inside(r, s->pad, s->stride, s->h, s->oh, &ylo, &yhi);
            for (int q = 0; q < s->s; q++) {
                int xlo, xhi;
                inside(q, s->pad, s->stride, s->w, s->ow, &xlo, &xhi);
                const float *restrict src =
                    col + ((size_t)(c * s->r + r) * s->s + q) * plane;
                for (int oy = ylo; oy < yhi; oy++) {
                    const float *restrict o = src + (size_t)oy * s->ow;
                    float *restrict d =
                        dc + (size_t)(oy * s->stride - s->pad + r) * s->w - s->pad + q;
                    if (s->stride == 1)
                        for (int ox = xlo; ox < xhi; ox++)
                            d[ox] += o[ox];
                    else
                        for (int ox = xlo; ox < xhi; ox++)
                            d[(size_t)ox * s->stride] += o[ox];
                }
            }
        }
    }
}

/* The shape must be one ferry_conv_shape() accepts, with its output size. */
static bool valid(const ferry_conv_t *s)
{
    ferry_conv_t t = *s;
    return ferry_conv_shape(&t) && t.oh == s->oh && t.ow == s->ow;
}

static bool is_pointwise(const ferry_conv_t *s)
{
    return s->r == 1 && s->s == 1 && s->stride == 1 && s->pad == 0;
}

int cpu_conv2d(ferry_device_t *dev, const ferry_conv_t *s, const float *x, const float *w,
               const float *bias, float *y)
{
    if (!valid(s))
        return FERRY_EINVAL;
    const int crs = s->c * s->r * s->s, plane = s->oh * s->ow;
    const bool direct = is_pointwise(s);
    float *col = direct ? NULL : cpu_scratch(dev, (size_t)crs * plane);
    if (!direct && !col)
        return FERRY_ENOMEM;
    for (int i = 0; i < s->n; i++) {
        const float *xi = x + (size_t)i * s->c * s->h * s->w;
        float *yi = y + (size_t)i * s->k * plane;
        if (!direct) {
            im2col(s, xi, col);
            xi = col;
        }
        /* The bias goes in first and the product is added to it: one
         * pass less over y than adding it afterwards. */
        if (bias)
            for (int k = 0; k < s->k; k++)
                cpu_fill(dev, yi + (size_t)k * plane, bias[k], plane);
        cpu_gemm(dev, false, false, s->k, plane, crs, 1.f, w, xi, bias ? 1.f : 0.f, yi);
    }
    return 0;
}

int cpu_conv2d_grad(ferry_device_t *dev, const ferry_conv_t *s, const float *x,
                    const float *w, const float *dy, float *dx, float *dw, float *dbias)
{
    if (!valid(s))
        return FERRY_EINVAL;
    const int crs = s->c * s->r * s->s, plane = s->oh * s->ow;
    const bool direct = is_pointwise(s);
    float *col = direct ? NULL : cpu_scratch(dev, (size_t)crs * plane);
    if (!direct && !col)
        return FERRY_ENOMEM;
    if (dbias) {
        for (int k = 0; k < s->k; k++)
            dbias[k] = 0.f;
        for (int i = 0; i < s->n; i++)
            for (int k = 0; k < s->k; k++) {
                const float *restrict d = dy + ((size_t)i * s->k + k) * plane;
                float sum = 0.f;
                for (int p = 0; p < plane; p++)
                    sum += d[p];
                dbias[k] += sum;
            }
    }
    for (int i = 0; i < s->n; i++) {
        const float *xi = x + (size_t)i * s->c * s->h * s->w;
        const float *dyi = dy + (size_t)i * s->k * plane;
        float *dxi = dx ? dx + (size_t)i * s->c * s->h * s->w : NULL;
        if (dw) {
            if (!direct) {
                im2col(s, xi, col);
                xi = col;
            }
            /* dw [k][crs] += dy_i [k][plane] col^T [plane][crs] */
            cpu_gemm(dev, false, true, s->k, crs, plane, 1.f, dyi, xi, i ? 1.f : 0.f, dw);
        }
        if (dxi) {
            /* dcol [crs][plane] = w^T [crs][k] dy_i [k][plane]; the columns
             * are no longer needed, so it takes their place. */
            float *dcol = direct ? dxi : col;
            cpu_gemm(dev, true, false, crs, plane, s->k, 1.f, w, dyi, 0.f, dcol);
            if (!direct)
                col2im(s, dcol, dxi);
        }
    }
    return 0;
}
