/* A training step captured as a CUDA graph and replayed: one launch for
 * the thirty-odd kernels, cuBLAS and cuDNN calls of a step instead of one
 * each (what PyTorch's CUDA graphs do). The trainer decides when
 * (runtime/train/graph.c); this file records and runs.
 *
 * What a capture must not meet is refused where it would happen (cuda_mem.c,
 * cuda_dnn.c, the losses in cuda_ops.c) with FERRY_EAGAIN and the reason
 * kept in cap_rc/errtext, so a step that cannot be captured runs uncaptured
 * instead of failing:
 *   - allocation and free (cudaMalloc is illegal in a capture, and a graph
 *     would keep an address the allocator hands out again);
 *   - uploads, downloads and syncs (the host is not there when it replays);
 *   - a convolution whose algorithm is not chosen yet (choosing runs and
 *     times candidates): the trainer's first step at a shape runs
 *     uncaptured, which chooses them and grows the workspaces;
 *   - a loss whose host result goes anywhere but the trainer's loss: the
 *     loss is copied to pinned memory by the graph and written after each
 *     run, to the pointer the op was given during the capture, so a model
 *     that did arithmetic on it on the host would replay stale numbers.
 * A graph bakes in the addresses of the backend's buffers (the cuDNN
 * workspace, the losses' scratch, the ones of bias_grad); when one moves
 * (bufgen), running an old graph is refused and the trainer captures again.
 * cuBLAS gets a fixed workspace of its own at open (cublasSetWorkspace), so
 * it neither allocates during a capture nor picks other kernels in one. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "runtime/device/device.h"

#include "cuda_int.h"

typedef struct cuda_graph {
    cudaGraphExec_t exec;
    uint64_t bufgen; /* d->bufgen when captured */
    int nres;
    float *dst[CUDA_GRAPH_RESULTS];
    double div[CUDA_GRAPH_RESULTS];
} cuda_graph_t;

int cuda_capture_loss(cuda_dev_t *d, float *loss, int *correct, double div)
{
    if (correct)
        return cuda_capture_fail(d, "a loss with a count of correct rows");
    if (loss && loss != d->cap_loss)
        return cuda_capture_fail(d, "a loss for another host pointer than the step's");
    if (d->cap_nres == CUDA_GRAPH_RESULTS)
        return cuda_capture_fail(d, "more losses than a graph keeps");
    int i = d->cap_nres, rc = 0;
    CUDA_RT_TRY(d,
                cudaMemcpyAsync(&d->cap_host[i], d->result, sizeof(cuda_loss_t),
                                cudaMemcpyDeviceToHost, d->stream),
                out);
    d->cap_dst[i] = loss;
    d->cap_div[i] = div;
    d->cap_nres = i + 1;
    if (loss)
        *loss = NAN; /* until the graph runs */
out:
    if (rc != 0)
        cuda_capture_fail(d, "the copy of a loss");
    return rc;
}

int cuda_capture_begin(ferry_device_t *dev, float *loss)
{
    cuda_dev_t *d = cuda_dev(dev);
    int rc = cuda_enter(d);
    if (rc != 0)
        return rc;
    if (d->capturing)
        return cuda_einval(d, "capture_begin: a capture is in progress");
    /* A failure still to be reported belongs to the step before. */
    if (d->err != 0)
        return FERRY_EAGAIN;
    if (!d->cap_host)
        CUDA_RT_TRY(d,
                    cudaHostAlloc((void **)&d->cap_host,
                                  CUDA_GRAPH_RESULTS * sizeof(cuda_loss_t),
                                  cudaHostAllocDefault),
                    out);
    /* Thread-local: a call of this thread that a capture forbids (cudaMalloc
     * by a library, say) breaks it; other threads' calls do not. */
    CUDA_RT_TRY(d, cudaStreamBeginCapture(d->stream, cudaStreamCaptureModeThreadLocal),
                out);
    d->capturing = true;
    d->cap_rc = 0;
    d->cap_loss = loss;
    d->cap_nres = 0;
out:
    return rc;
}

int cuda_capture_end(ferry_device_t *dev, bool keep, void **graph, char *err,
                     size_t errlen)
{
    cuda_dev_t *d = cuda_dev(dev);
    *graph = NULL;
    if (!d->capturing)
        return cuda_einval(d, "capture_end: no capture in progress");
    cudaGraph_t g = NULL;
    cudaError_t e = cudaStreamEndCapture(d->stream, &g);
    d->capturing = false;
    int rc = 0;
    if (d->cap_rc != 0 || d->err != 0 || e != cudaSuccess) {
        /* Whatever failed was recorded, not run: the step runs again
         * uncaptured, where a real failure shows itself. */
        if (d->cap_rc == 0)
            snprintf(d->errtext, sizeof d->errtext, "%s: the capture broke: %s", d->name,
                     e != cudaSuccess ? cudaGetErrorString(e) : "an op failed");
        snprintf(err, errlen, "%s", d->errtext);
        rc = FERRY_EAGAIN;
        d->err = 0;
        cudaGetLastError(); /* the capture's error is not the next op's */
        goto out;
    }
    if (!keep)
        goto out;
    cuda_graph_t *cg = calloc(1, sizeof *cg);
    if (!cg) {
        snprintf(err, errlen, "%s: out of memory", d->name);
        rc = FERRY_ENOMEM;
        goto out;
    }
    e = cudaGraphInstantiate(&cg->exec, g, 0);
    if (e != cudaSuccess) {
        rc = cuda_rt_fail(d, "cudaGraphInstantiate", e);
        snprintf(err, errlen, "%s", d->errtext);
        free(cg);
        goto out;
    }
    cg->bufgen = d->bufgen;
    cg->nres = d->cap_nres;
    for (int i = 0; i < cg->nres; i++) {
        cg->dst[i] = d->cap_dst[i];
        cg->div[i] = d->cap_div[i];
    }
    *graph = cg;
out:
    if (g)
        cudaGraphDestroy(g);
    d->cap_loss = NULL;
    d->cap_nres = 0;
    d->cap_rc = 0;
    return rc;
}

int cuda_graph_run(ferry_device_t *dev, void *graph)
{
    cuda_dev_t *d = cuda_dev(dev);
    cuda_graph_t *cg = graph;
    int rc = cuda_enter(d);
    if (rc != 0)
        return rc;
    if (cg->bufgen != d->bufgen)
        return FERRY_EAGAIN; /* a workspace moved since the capture */
    CUDA_RT_TRY(d, cudaGraphLaunch(cg->exec, d->stream), out);
    if (cg->nres == 0)
        goto out;
    if ((rc = cuda_sync(dev)) != 0)
        goto out;
    for (int i = 0; i < cg->nres; i++) {
        const cuda_loss_t *r = &d->cap_host[i];
        if (r->bad > 0)
            return cuda_einval(d, "softmax_xent: a label outside [0, classes)");
        if (cg->dst[i])
            *cg->dst[i] = (float)(r->sum / cg->div[i]);
    }
out:
    return rc;
}

void cuda_graph_destroy(ferry_device_t *dev, void *graph)
{
    cuda_graph_t *cg = graph;
    if (!cg || cuda_enter(cuda_dev(dev)) != 0)
        return;
    cudaGraphExecDestroy(cg->exec);
    free(cg);
}
