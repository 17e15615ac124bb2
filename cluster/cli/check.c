/* `ferry check MODULE.so`: the model's gradient against its loss, tensor by
 * tensor, on the cpu for a small random batch.
 *
 * For a sample of each tensor's coordinates (its largest gradient and
 * random others), the loss is taken at p - h and p + h and their central
 * difference, in double, is set against loss_grad's gradient. ReLU and max
 * pooling make the loss piecewise smooth, and in a convolution the pieces
 * are narrow, so the gradient is not read at p alone: it is averaged along
 * the segment by the trapezoid rule, from loss_grad at STEPS + 1 points (the
 * same calls give the two losses), which is what the central difference
 * measures exactly when the loss has kinks. The generator is reseeded before
 * each call, so that a layer drawing from it (dropout) draws the same, and
 * the model's buffers are put back as they started, so that one a call
 * updates (batch normalisation's running statistics, in training) is the
 * same for every call: loss_grad's gradient is the training mode's. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "runtime/data/data.h"
#include "runtime/device/device.h"
#include "runtime/runtime.h"
#include "runtime/train/train.h"

#define STEPS      8
#define MAX_COUNT  64
#define ATOL_FRAC  1e-2 /* of the tensor's largest gradient */
#define RNG_STREAM 0x636865636bull

static const char usage[] =
    "usage: ferry check MODULE.so [options]\n"
    "\n"
    "Checks the gradient the module's model computes against central finite\n"
    "differences of its loss, in double, on the cpu, for a small batch of random\n"
    "samples: each parameter tensor's largest gradient and random coordinates.\n"
    "Prints the worst relative error of each tensor; exits 1 when one is above\n"
    "the tolerance, naming the layer and the tensor.\n"
    "\n"
    "options:\n"
    "      --batch N      samples in the batch (default 4)\n"
    "      --count N      coordinates checked a tensor (default 12, at most 64)\n"
    "      --step H       half the segment each coordinate moves along (default 2e-3)\n"
    "      --tolerance T  the worst relative error allowed (default 0.02)\n"
    "      --seed N       parameters and batch (default 7)\n"
    "  -h, --help         this text\n";

typedef struct check_opts {
    int batch, count;
    double step, tol;
    uint64_t seed;
} check_opts;

typedef struct checker {
    const ferry_model_t *m;
    ferry_device_t *dev;
    rt_model_ctx mc;
    check_opts o;
    int nparams;
    size_t len, *off;
    float *host, *grad, *dparams, *dgrad; /* host p and gradient; device copies */
    float *buffers;                       /* the buffers as they start (host) */
    ferry_batch_t b;
    void *dx, *dy; /* device batch */
} checker;

static uint64_t next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double unit(uint64_t *s)
{
    return (double)(next(s) >> 11) * 0x1.0p-53;
}

/* loss_grad at the host parameters; the gradient into c->grad. */
static int loss_grad(checker *c, float *loss)
{
    ferry_device_t *d = c->dev;
    int rc = d->ops->upload(d, c->dparams, c->host, c->len * sizeof(float));
    if (!rc)
        rc = rt_model_ctx_set_buffers(&c->mc, c->buffers);
    rt_rng_seed(c->mc.rng, c->o.seed, RNG_STREAM);
    if (!rc)
        rc = c->m->loss_grad(&c->mc.pub, c->dparams, &c->b, c->dgrad, loss);
    if (!rc)
        rc = d->ops->download(d, c->grad, c->dgrad, c->len * sizeof(float));
    return rc;
}

/* A batch of random samples: standard normal inputs, labels or targets. */
static int make_batch(checker *c)
{
    const ferry_model_t *m = c->m;
    size_t n = (size_t)c->o.batch,
           feats = n * (size_t)m->input[0] * m->input[1] * (size_t)m->input[2];
    bool cls = m->kind == FERRY_MODEL_CLASSIFIER;
    size_t ybytes = cls ? n * sizeof(int32_t) : n * (size_t)m->outputs * sizeof(float);
    float *x = malloc(feats * sizeof *x);
    void *y = malloc(ybytes);
    c->dx = c->dev->ops->alloc(c->dev, feats * sizeof(float));
    c->dy = c->dev->ops->alloc(c->dev, ybytes);
    int rc = x && y && c->dx && c->dy ? 0 : FERRY_ENOMEM;
    uint64_t s = c->o.seed + 4;
    for (size_t i = 0; !rc && i < feats; i++)
        x[i] = (float)(sqrt(-2 * log(1 - unit(&s))) * cos(2 * M_PI * unit(&s)));
    for (size_t i = 0; !rc && i < ybytes / 4; i++) {
        if (cls)
            ((int32_t *)y)[i] = (int32_t)(next(&s) % (uint64_t)m->outputs);
        else
            ((float *)y)[i] = (float)(2 * unit(&s) - 1);
    }
    if (!rc)
        rc = c->dev->ops->upload(c->dev, c->dx, x, feats * sizeof(float));
    if (!rc)
        rc = c->dev->ops->upload(c->dev, c->dy, y, ybytes);
    c->b = (ferry_batch_t){.n = c->o.batch,
                           .x = c->dx,
                           .labels = cls ? c->dy : NULL,
                           .targets = cls ? NULL : c->dy};
    free(x);
    free(y);
    return rc;
}

static int open_checker(checker *c, const ferry_model_t *m, char *err, size_t errlen)
{
    c->m = m;
    int rc = rt_device_open("cpu", &c->dev, err, errlen);
    if (rc)
        return rc;
    /* A model that takes its shape from the data is checked on a small
     * one: what is checked is each layer's backward, not the data. */
    static const int small[3] = {1, 6, 6};
    bool open = m->input[0] <= 0 || m->outputs <= 0; /* left to the data */
    if (open && rt_model_from_data(m) && (rc = m->reshape(small, 4))) {
        snprintf(err, errlen, "the model cannot take 1x6x6 samples of 4 classes: %s",
                 ferry_strerror(rc));
        return rc;
    }
    if ((rc = rt_model_ctx_init(&c->mc, m, c->dev, c->o.batch, c->o.seed, err, errlen)))
        return rc;
    while (m->params[c->nparams].name)
        c->nparams++;
    c->off = calloc((size_t)c->nparams, sizeof *c->off);
    if (!c->off)
        return FERRY_ENOMEM;
    c->len = ferry_model_layout(m, c->off);
    c->host = calloc(c->len, sizeof(float));
    c->grad = calloc(c->len, sizeof(float));
    c->dparams = c->dev->ops->alloc(c->dev, c->len * sizeof(float));
    c->dgrad = c->dev->ops->alloc(c->dev, c->len * sizeof(float));
    c->buffers = calloc(c->mc.blen + 1, sizeof(float));
    if (!c->host || !c->grad || !c->dparams || !c->dgrad || !c->buffers) {
        snprintf(err, errlen, "out of memory for %zu parameters", c->len);
        return FERRY_ENOMEM;
    }
    if ((rc = m->init(&c->mc.pub, c->host))) {
        snprintf(err, errlen, "the model's init failed: %s", ferry_strerror(rc));
        return rc;
    }
    if ((rc = rt_model_ctx_get_buffers(&c->mc, c->buffers))) {
        snprintf(err, errlen, "cannot read the model's buffers: %s", ferry_strerror(rc));
        return rc;
    }
    if ((rc = make_batch(c)))
        snprintf(err, errlen, "cannot make a batch: %s", ferry_strerror(rc));
    return rc;
}

static void close_checker(checker *c)
{
    if (c->dev) {
        c->dev->ops->free(c->dev, c->dparams);
        c->dev->ops->free(c->dev, c->dgrad);
        c->dev->ops->free(c->dev, c->dx);
        c->dev->ops->free(c->dev, c->dy);
        rt_model_ctx_free(&c->mc);
        rt_device_close(c->dev);
    }
    free(c->host);
    free(c->grad);
    free(c->buffers);
    free(c->off);
}

/* One coordinate: the gradient's mean along [p - h, p + h] (*an) and the
 * loss's central difference (*fd); *l0 the loss at p. */
static int along(checker *c, size_t at, double *an, double *fd, double *l0)
{
    const float keep = c->host[at];
    const float h = (float)c->o.step;
    double integral = 0, x0 = 0, l_first = 0, x = 0, l = 0, g = 0;
    for (int k = 0; k <= STEPS; k++) {
        c->host[at] = keep + h * (2.0f * k / STEPS - 1.0f);
        double prev_x = x, prev_g = g;
        float loss;
        int rc = loss_grad(c, &loss);
        if (rc) {
            c->host[at] = keep;
            return rc;
        }
        x = (double)c->host[at] - keep; /* the move made in float */
        g = c->grad[at];
        l = loss;
        if (k == 0)
            x0 = x, l_first = l;
        else
            integral += (g + prev_g) / 2 * (x - prev_x);
        if (x == 0)
            *l0 = l;
    }
    c->host[at] = keep;
    *an = integral / (x - x0);
    *fd = (l - l_first) / (x - x0);
    return 0;
}

typedef struct tensor_result {
    double worst;
    size_t at;
    double an, fd;
} tensor_result;

/* Tensor i's worst relative error over its sampled coordinates: the
 * difference over the larger of the two, with a floor of the loss's
 * rounding and a hundredth of the tensor's largest gradient. */
static int check_tensor(checker *c, int i, const float *g0, tensor_result *r)
{
    size_t n = ferry_param_count(&c->m->params[i]), top = 0;
    const float *g = g0 + c->off[i];
    double scale = 0;
    for (size_t j = 0; j < n; j++)
        if (fabs(g[j]) > scale)
            scale = fabs(g[j]), top = j;
    size_t seen[MAX_COUNT];
    uint64_t s = c->o.seed + (uint64_t)i;
    *r = (tensor_result){0};
    for (size_t k = 0; k < n && k < (size_t)c->o.count; k++) {
        size_t j = n <= (size_t)c->o.count ? k : top;
        for (size_t q = 0; q < k; q++)
            if (seen[q] == j)
                j = next(&s) % n, q = (size_t)-1;
        seen[k] = j;
        double an, fd, l0 = 0;
        int rc = along(c, c->off[i] + j, &an, &fd, &l0);
        if (rc)
            return rc;
        double noise = 4 * ldexp(1.0, ilogb(l0) - 23) / (2.0 * c->o.step);
        double floor = (noise + ATOL_FRAC * scale) / c->o.tol;
        double e = fabs(fd - an) / (fmax(fabs(an), fabs(fd)) + floor);
        if (e >= r->worst)
            *r = (tensor_result){.worst = e, .at = j, .an = an, .fd = fd};
    }
    return 0;
}

/* Every tensor, a line each; the number that fail. */
static int check_all(checker *c, const char *shown, int *failed)
{
    float loss;
    int rc = loss_grad(c, &loss);
    float *g0 = rc ? NULL : malloc(c->len * sizeof *g0);
    if (rc || !g0) {
        cli_err("check", "%s: loss_grad failed: %s", shown,
                ferry_strerror(rc ? rc : FERRY_ENOMEM));
        return rc ? rc : FERRY_ENOMEM;
    }
    memcpy(g0, c->grad, c->len * sizeof *g0);
    printf("%s: loss %.6g on %d random samples\n", shown, (double)loss, c->o.batch);
    for (int i = 0; i < c->nparams && !rc; i++) {
        const ferry_param_t *p = &c->m->params[i];
        tensor_result r;
        if ((rc = check_tensor(c, i, g0, &r))) {
            cli_err("check", "%s: loss_grad failed: %s", shown, ferry_strerror(rc));
            break;
        }
        bool bad = r.worst > c->o.tol;
        printf("  %-24s worst relative error %.2e%s\n", p->name, r.worst,
               bad ? "  WRONG" : "");
        if (bad) {
            const char *dot = strrchr(p->name, '.');
            int layer = dot ? (int)(dot - p->name) : (int)strlen(p->name);
            printf("    layer %.*s, tensor %s, element %zu: the gradient says %.6g, the "
                   "loss changes by %.6g a unit\n",
                   layer, p->name, p->name, r.at, r.an, r.fd);
            (*failed)++;
        }
    }
    free(g0);
    return rc;
}

static int parse(int argc, char **argv, check_opts *o)
{
    static const struct option longs[] = {{"batch", required_argument, NULL, 'b'},
                                          {"count", required_argument, NULL, 'c'},
                                          {"step", required_argument, NULL, 's'},
                                          {"tolerance", required_argument, NULL, 't'},
                                          {"seed", required_argument, NULL, 'S'},
                                          {"help", no_argument, NULL, 'h'},
                                          {NULL, 0, NULL, 0}};
    *o = (check_opts){.batch = 4, .count = 12, .step = 2e-3, .tol = 0.02, .seed = 7};
    optind = 1;
    int ch;
    while ((ch = getopt_long(argc, argv, "h", longs, NULL)) != -1) {
        char *end = NULL;
        if (ch == 'h') {
            fputs(usage, stdout);
            return -1;
        }
        if (ch == '?')
            goto bad;
        double v = strtod(optarg, &end);
        if (!end || *end || !(v > 0))
            goto bad;
        if (ch == 'b')
            o->batch = (int)v;
        else if (ch == 'c')
            o->count = (int)v;
        else if (ch == 's')
            o->step = v;
        else if (ch == 't')
            o->tol = v;
        else
            o->seed = (uint64_t)v;
    }
    if (optind + 1 == argc && o->batch >= 1 && o->count >= 1 && o->count <= MAX_COUNT)
        return 0;
bad:
    fputs(usage, stderr);
    return CLI_USAGE;
}

int cli_check(int argc, char **argv)
{
    check_opts o;
    int rc = parse(argc, argv, &o);
    if (rc)
        return rc < 0 ? CLI_OK : rc;
    const char *shown = cli_base_name(argv[optind]);
    char err[512] = "", path[PATH_MAX];
    /* dlopen reads a name without a slash as a library to search for. */
    if (!realpath(argv[optind], path)) {
        cli_err("check", "%s: %s", argv[optind], strerror(errno));
        return CLI_FAIL;
    }
    rt_module mod;
    if ((rc = rt_module_open(&mod, path, shown, err, sizeof err))) {
        cli_err("check", "%s", err);
        return CLI_FAIL;
    }
    if (!mod.task->model) {
        cli_err("check", "%s: task '%s' has no model to check", shown, mod.task->name);
        rt_module_close(&mod);
        return CLI_FAIL;
    }
    checker c = {.o = o};
    int failed = 0;
    if ((rc = open_checker(&c, mod.task->model, err, sizeof err)))
        cli_err("check", "%s: %s", shown, err);
    else
        rc = check_all(&c, shown, &failed);
    close_checker(&c);
    rt_module_close(&mod);
    if (rc)
        return CLI_FAIL;
    if (failed) {
        printf("%s: %d tensor(s) above the tolerance %g\n", shown, failed, o.tol);
        return CLI_FAIL;
    }
    printf("%s: every gradient within %g\n", shown, o.tol);
    return CLI_OK;
}
