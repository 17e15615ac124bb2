/* Step graphs on the GPU (cuda_graph.c): a step captured and replayed
 * computes what it computes op by op, its loss included, every run, on new
 * inputs in the same buffers; what a capture cannot hold (a download, an
 * allocation, a loss for another pointer) breaks it with a reason and
 * leaves the device usable; a graph whose workspace moved is refused. The
 * cpu has no graphs (its extension table leaves them NULL), which runs
 * everywhere. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <ferry/error.h>

#include "runtime/device/device.h"
#include "tcuda.h"

enum { ROWS = 64, IN = 96, OUT = 10 };

typedef struct net {
    float *x, *w, *z, *dz;
    int32_t *labels;
} net;

static net make(uint64_t seed)
{
    double *x = tc_new(ROWS * IN), *w = tc_new(IN * OUT);
    tc_rand(x, ROWS * IN, -1, 1, &seed);
    tc_rand(w, IN * OUT, -0.3, 0.3, &seed);
    int32_t labels[ROWS];
    for (int i = 0; i < ROWS; i++)
        labels[i] = (int32_t)((i * 3) % OUT);
    net n = {.x = tc_put(G, x, ROWS * IN),
             .w = tc_put(G, w, IN * OUT),
             .z = G->ops->alloc(G, ROWS * OUT * sizeof(float)),
             .dz = G->ops->alloc(G, ROWS * OUT * sizeof(float)),
             .labels = tc_put_labels(G, labels, ROWS)};
    cr_assert(n.z && n.dz);
    free(x);
    free(w);
    return n;
}

/* z = relu(x w), the softmax loss and its gradient. */
static int step(const net *n, float *loss)
{
    G->ops->gemm(G, false, false, ROWS, OUT, IN, 1.0f, n->x, n->w, 0.0f, n->z);
    G->ops->relu(G, n->z, n->z, ROWS * OUT);
    return G->ops->softmax_xent(G, n->z, n->labels, ROWS, OUT, n->dz, loss, NULL);
}

static void drop(net *n)
{
    G->ops->free(G, n->x);
    G->ops->free(G, n->w);
    G->ops->free(G, n->z);
    G->ops->free(G, n->dz);
    G->ops->free(G, n->labels);
}

Test(cuda_graph, a_replayed_step_computes_what_the_step_computes_op_by_op)
{
    tc_gpu();
    const rt_device_ext_t *e = rt_device_ext(G);
    cr_assert(e->capture_begin && e->capture_end && e->graph_run && e->graph_destroy);
    net n = make(1);
    float want = 0, loss = -1;
    double *dz_want = tc_new(ROWS * OUT), *dz = tc_new(ROWS * OUT);
    /* Op by op first: this also sizes the losses' scratch. */
    cr_assert_eq(step(&n, &want), 0);
    tc_get(G, dz_want, n.dz, ROWS * OUT);
    G->ops->fill(G, n.dz, 0.0f, ROWS * OUT);

    cr_assert_eq(e->capture_begin(G, &loss), 0);
    cr_assert_eq(step(&n, &loss), 0);
    cr_assert(isnan(loss), "the loss is known only once the graph runs");
    void *g = NULL;
    char err[320] = "";
    cr_assert_eq(e->capture_end(G, true, &g, err, sizeof err), 0, "%s", err);
    cr_assert_not_null(g);
    for (int run = 0; run < 3; run++) {
        loss = -1;
        cr_assert_eq(e->graph_run(G, g), 0);
        cr_assert_eq(loss, want, "run %d: loss %.9g, op by op %.9g", run, loss, want);
        tc_get(G, dz, n.dz, ROWS * OUT);
        cr_assert_eq(memcmp(dz, dz_want, ROWS * OUT * sizeof(double)), 0, "run %d", run);
    }
    /* New inputs in the same buffers: the graph reads them. */
    double *x2 = tc_new(ROWS * IN);
    uint64_t seed = 77;
    tc_rand(x2, ROWS * IN, -2, 2, &seed);
    float *tmp = tc_put(G, x2, ROWS * IN);
    cr_assert_eq(G->ops->copy(G, n.x, tmp, ROWS * IN * sizeof(float)), 0);
    cr_assert_eq(step(&n, &want), 0);
    cr_assert_eq(e->graph_run(G, g), 0);
    cr_assert_eq(loss, want, "new inputs: %.9g against %.9g", loss, want);
    e->graph_destroy(G, g);
    G->ops->free(G, tmp);
    free(x2);
    free(dz);
    free(dz_want);
    drop(&n);
    tc_finish();
}

static void broken(const char *what, int (*body)(const net *n, float *loss))
{
    const rt_device_ext_t *e = rt_device_ext(G);
    net n = make(2);
    float loss = 0, want = 0;
    cr_assert_eq(step(&n, &want), 0);
    cr_assert_eq(e->capture_begin(G, &loss), 0);
    int rc = body(&n, &loss);
    cr_assert_eq(rc, FERRY_EAGAIN, "%s: %d", what, rc);
    void *g = (void *)1;
    char err[320] = "";
    cr_assert_eq(e->capture_end(G, true, &g, err, sizeof err), FERRY_EAGAIN, "%s", what);
    cr_assert_null(g);
    cr_assert(strstr(err, "cannot be captured"), "%s: no reason: '%s'", what, err);
    /* Nothing of it ran, nothing is pending, and the step runs as before. */
    cr_assert_eq(G->ops->sync(G), 0, "%s left a failure", what);
    float again = 0;
    cr_assert_eq(step(&n, &again), 0);
    cr_assert_eq(again, want);
    drop(&n);
}

static int with_download(const net *n, float *loss)
{
    float host[4];
    int rc = step(n, loss);
    return rc ? rc : G->ops->download(G, host, n->z, sizeof host);
}

static int with_alloc(const net *n, float *loss)
{
    (void)n;
    (void)loss;
    return G->ops->alloc(G, 256) ? 0 : FERRY_EAGAIN;
}

static int with_other_loss(const net *n, float *loss)
{
    (void)loss;
    float mine = 0;
    return step(n, &mine);
}

static int with_correct_count(const net *n, float *loss)
{
    int correct = 0;
    G->ops->gemm(G, false, false, ROWS, OUT, IN, 1.0f, n->x, n->w, 0.0f, n->z);
    return G->ops->softmax_xent(G, n->z, n->labels, ROWS, OUT, NULL, loss, &correct);
}

Test(cuda_graph, what_a_capture_cannot_hold_breaks_it_with_a_reason)
{
    tc_gpu();
    broken("a download", with_download);
    broken("an allocation", with_alloc);
    broken("a loss for another pointer", with_other_loss);
    broken("a loss with a count of correct rows", with_correct_count);
    tc_finish();
}

Test(cuda_graph, a_graph_whose_workspace_moved_is_refused)
{
    tc_gpu();
    const rt_device_ext_t *e = rt_device_ext(G);
    net n = make(3);
    float loss = 0;
    cr_assert_eq(step(&n, &loss), 0);
    cr_assert_eq(e->capture_begin(G, &loss), 0);
    cr_assert_eq(step(&n, &loss), 0);
    void *g = NULL;
    char err[320] = "";
    cr_assert_eq(e->capture_end(G, true, &g, err, sizeof err), 0, "%s", err);
    cr_assert_eq(e->graph_run(G, g), 0);
    /* A loss over 64x the rows grows the scratch the graph writes. */
    size_t rows = ROWS * 64;
    float *z = G->ops->alloc(G, rows * OUT * sizeof(float));
    int32_t *labels = G->ops->alloc(G, rows * sizeof(int32_t));
    cr_assert(z && labels);
    G->ops->fill(G, z, 0.5f, rows * OUT);
    cr_assert_eq(G->ops->copy(G, labels, n.labels, ROWS * sizeof(int32_t)), 0);
    for (size_t i = 1; i < 64; i++)
        cr_assert_eq(G->ops->copy(G, labels + i * ROWS, n.labels, ROWS * sizeof(int32_t)),
                     0);
    float big = 0;
    cr_assert_eq(G->ops->softmax_xent(G, z, labels, (int)rows, OUT, NULL, &big, NULL), 0);
    cr_assert_eq(e->graph_run(G, g), FERRY_EAGAIN, "a stale graph ran");
    e->graph_destroy(G, g);
    /* Captured again, it runs. */
    cr_assert_eq(e->capture_begin(G, &loss), 0);
    cr_assert_eq(step(&n, &loss), 0);
    cr_assert_eq(e->capture_end(G, true, &g, err, sizeof err), 0, "%s", err);
    cr_assert_eq(e->graph_run(G, g), 0);
    e->graph_destroy(G, g);
    G->ops->free(G, z);
    G->ops->free(G, labels);
    drop(&n);
    tc_finish();
}

Test(cuda_graph, a_capture_inside_a_capture_and_an_end_without_a_begin_are_refused)
{
    tc_gpu();
    const rt_device_ext_t *e = rt_device_ext(G);
    float loss = 0;
    void *g = NULL;
    char err[320] = "";
    cr_assert_eq(e->capture_end(G, true, &g, err, sizeof err), FERRY_EINVAL);
    cr_assert_eq(e->capture_begin(G, &loss), 0);
    cr_assert_eq(e->capture_begin(G, &loss), FERRY_EINVAL);
    cr_assert_eq(e->capture_end(G, false, &g, err, sizeof err), 0, "%s", err);
    cr_assert_null(g, "keep false keeps nothing");
    tc_finish();
}

Test(cuda_graph, the_cpu_has_no_graphs)
{
    tc_cpu();
    const rt_device_ext_t *e = rt_device_ext(C);
    cr_assert_null(e->capture_begin);
    cr_assert_null(e->graph_run);
    cr_assert_null(e->upload_async);
    tc_finish();
}
