/* The gradient loss_grad computes against the loss it reports, coordinate
 * by coordinate, for a random sample of every parameter tensor of every
 * bundled model (and its largest element, so that each tensor is checked
 * where its gradient says most).
 *
 * ReLU and max pooling make the loss piecewise smooth, and in a
 * convolution the pieces are narrow: moving one filter weight by 1e-4
 * already flips which of two near-equal values wins some pooling window.
 * A central difference at one point would need a step below that, where
 * the float loss's rounding swamps it. So the check is the fundamental
 * theorem of calculus instead: along a segment [p - h, p + h] of one
 * coordinate, the change in loss equals the integral of the gradient,
 * which the trapezoid rule takes from loss_grad at STEPS + 1 points of the
 * segment (the same calls give the losses at its ends). Jumps of the
 * gradient cost the integral only a fraction of a jump each, while a step h
 * of 1e-3 or more keeps the rounding of the two losses (a few ulp of ~2.3)
 * small beside the change they measure. The divisor is the move actually
 * made in float. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "tcommon.h"
#include "tmodels.h"

#define RTOL      2e-2
#define ATOL_FRAC 1e-2 /* of the tensor's largest gradient */
#define STEPS     8    /* trapezoids along a segment */
#define MAX_COUNT 32

typedef struct gc_opts {
    int batch;  /* samples */
    int count;  /* coordinates checked a tensor */
    float step; /* h: the segment is [p - h, p + h] */
} gc_opts;

/* A fault planted in every gradient loss_grad returns, to test the check:
 * tensor `scaled` (-1: none) multiplied by 1.1, and the coordinates
 * `swap_a` and `swap_b` (equal: none) exchanged. */
typedef struct gc_fault {
    int scaled;
    size_t swap_a, swap_b;
} gc_fault;

static const gc_fault no_fault = {.scaled = -1};

static void plant(const tmodel *t, const gc_fault *f, float *grad)
{
    if (f->scaled >= 0)
        for (size_t j = 0; j < tm_count(t, f->scaled); j++)
            grad[t->off[f->scaled] + j] *= 1.1f;
    float a = grad[f->swap_a];
    grad[f->swap_a] = grad[f->swap_b];
    grad[f->swap_b] = a;
}

typedef struct gc_result {
    int checked, failed;
    char first[256]; /* the first failure, for the message */
} gc_result;

/* The mean of loss_grad's gradient in coordinate `at` along the segment,
 * by the trapezoid rule, and the loss's mean slope there; *l0 gets the
 * loss at p. */
static void along(tmodel *t, float *p, const ferry_batch_t *b, size_t at, float h,
                  const gc_fault *f, float *grad, double *mean, double *slope, double *l0)
{
    const float keep = p[at];
    double integral = 0, x0 = 0, l_first = 0, x = 0, l = 0, g = 0;
    for (int k = 0; k <= STEPS; k++) {
        p[at] = keep + h * (2.0f * k / STEPS - 1.0f);
        double prev_x = x, prev_g = g;
        float loss;
        int rc = tm_loss_grad(t, p, b, grad, &loss);
        cr_assert_eq(rc, 0, "loss_grad: %s", ferry_strerror(rc));
        plant(t, f, grad);
        x = (double)p[at] - keep;
        g = grad[at];
        l = loss;
        if (k == 0) {
            x0 = x;
            l_first = l;
        } else {
            integral += (g + prev_g) / 2 * (x - prev_x);
        }
        if (x == 0)
            *l0 = l;
    }
    p[at] = keep;
    *mean = integral / (x - x0);
    *slope = (l - l_first) / (x - x0);
}

/* Checks coordinate `at`; `scale` is its tensor's largest |gradient|. */
static void check_coord(tmodel *t, float *p, const ferry_batch_t *b, size_t at,
                        const gc_opts *o, const gc_fault *f, float *scratch, double scale,
                        const char *name, size_t index, gc_result *r)
{
    double an, fd, l0 = 0;
    along(t, p, b, at, o->step, f, scratch, &an, &fd, &l0);
    /* The two losses' rounding, two ulp each, over the segment. */
    double noise = 4 * ldexp(1.0, ilogb(l0) - 23) / (2.0 * o->step);
    double tol = noise + ATOL_FRAC * scale + RTOL * fmax(fabs(an), fabs(fd));
    r->checked++;
    if (fabs(fd - an) > tol && !r->failed++)
        snprintf(r->first, sizeof r->first,
                 "%s[%zu]: loss_grad's gradient averages %.6g along [-%g, %g], the loss "
                 "changes by %.6g a unit (tol %.3g)",
                 name, index, an, o->step, o->step, fd, tol);
}

static bool among(const size_t *set, size_t n, size_t j)
{
    for (size_t i = 0; i < n; i++)
        if (set[i] == j)
            return true;
    return false;
}

/* Checks o->count distinct coordinates of every tensor (all of a smaller
 * one) around p: the tensor's largest in `grad` (the gradient at p) and
 * random others. Returns the set of tensors that fail (bit i: tensor i),
 * and the first failure's text in `why`. */
static unsigned gradcheck(tmodel *t, float *p, const ferry_batch_t *b, const float *grad,
                          const gc_opts *o, const gc_fault *f, char *why, size_t whylen)
{
    uint64_t seed = 3;
    cr_assert_leq(o->count, MAX_COUNT);
    float *scratch = malloc(t->len * sizeof *scratch);
    cr_assert(scratch);
    unsigned bad = 0;
    why[0] = '\0';
    for (int i = 0; i < t->nparams; i++) {
        const char *name = t->m->params[i].name;
        size_t n = tm_count(t, i);
        const float *g = grad + t->off[i];
        size_t top = 0;
        double scale = 0;
        for (size_t j = 0; j < n; j++) {
            if (fabs(g[j]) > scale) {
                scale = fabs(g[j]);
                top = j;
            }
        }
        gc_result r = {0};
        size_t seen[MAX_COUNT];
        for (size_t k = 0; k < n && k < (size_t)o->count; k++) {
            size_t j = n <= (size_t)o->count ? k : top;
            while (among(seen, k, j))
                j = tm_next(&seed) % n;
            seen[k] = j;
            check_coord(t, p, b, t->off[i] + j, o, f, scratch, scale, name, j, &r);
        }
        if (r.failed) {
            if (!bad)
                snprintf(why, whylen, "%s (%d of %d wrong)", r.first, r.failed,
                         r.checked);
            bad |= 1u << i;
        }
    }
    free(scratch);
    return bad;
}

/* The model's parameters from a seed, its gradient on a random batch. */
static void setup(tmodel *t, const char *name, const gc_opts *o, uint64_t seed, float **p,
                  float **grad, ferry_batch_t *b)
{
    tm_open(t, name, o->batch, seed);
    *p = tm_init(t);
    *grad = malloc(t->len * sizeof **grad);
    cr_assert(*grad);
    tm_random_batch(t, o->batch, seed + 4, b);
    float loss;
    cr_assert_eq(tm_loss_grad(t, *p, b, *grad, &loss), 0);
}

static void check_model(const char *name, const gc_opts *o)
{
    tmodel t;
    float *p, *grad;
    ferry_batch_t b;
    setup(&t, name, o, 7, &p, &grad, &b);
    char why[512];
    unsigned bad = gradcheck(&t, p, &b, grad, o, &no_fault, why, sizeof why);
    cr_expect_eq(bad, 0, "%s: tensors %#x fail the gradient check; %s", name, bad, why);
    free(grad);
    free(p);
    tm_close(&t);
    tcom_assert_no_leaks();
}

static const gc_opts mlp_opts = {.batch = 4, .count = 12, .step = 2e-3f};
static const gc_opts cnn_opts = {.batch = 3, .count = 10, .step = 2e-3f};
static const gc_opts linreg_opts = {.batch = 5, .count = 9, .step = 1e-2f};

Test(models_gradient, mlp_matches_the_change_in_its_loss)
{
    check_model("mlp", &mlp_opts);
}

Test(models_gradient, cnn_matches_the_change_in_its_loss)
{
    check_model("cnn", &cnn_opts);
}

Test(models_gradient, linreg_matches_the_change_in_its_loss_everywhere)
{
    check_model("linreg", &linreg_opts);
}

/* The check is worth something only if it fails a wrong gradient: each
 * tensor's gradient 10% too large, in turn, and then two of its
 * coordinates swapped, must be caught, and nothing else blamed. */
Test(models_gradient, check_catches_a_wrong_gradient_in_every_tensor)
{
    tmodel t;
    float *p, *grad;
    ferry_batch_t b;
    setup(&t, "mlp", &mlp_opts, 7, &p, &grad, &b);
    gc_opts o = mlp_opts;
    o.count = 4;
    char why[512];
    for (int i = 0; i < t.nparams; i++) {
        gc_fault f = {.scaled = i};
        cr_expect_eq(gradcheck(&t, p, &b, grad, &o, &f, why, sizeof why), 1u << i,
                     "%s scaled by 1.1 was not caught alone", t.m->params[i].name);
    }
    /* The largest and the smallest element of the last tensor trade places. */
    int last = t.nparams - 1;
    const float *g = grad + t.off[last];
    size_t hi = 0, lo = 0;
    for (size_t j = 1; j < tm_count(&t, last); j++) {
        hi = g[j] > g[hi] ? j : hi;
        lo = g[j] < g[lo] ? j : lo;
    }
    gc_fault f = {.scaled = -1, .swap_a = t.off[last] + hi, .swap_b = t.off[last] + lo};
    cr_expect_eq(gradcheck(&t, p, &b, grad, &o, &f, why, sizeof why), 1u << last,
                 "two swapped coordinates of %s were not caught", t.m->params[last].name);

    free(grad);
    free(p);
    tm_close(&t);
    tcom_assert_no_leaks();
}
