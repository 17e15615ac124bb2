// runtime/device/cuda — kernels for the ops that no cuBLAS or cuDNN call
// fits. Elementwise kernels use grid-stride loops over size_t indices, so any
// n runs with a bounded grid. Reductions are deterministic: a fixed grid for a
// given size, fixed-order tree sums, no atomics, so the same inputs give the
// same bits run after run.
#include <math.h>

#include "cuda_bf16_round.h"
#include "cuda_kernels.h"
#include "../device_hash.h"

namespace {

constexpr int kThreads = 256;
constexpr unsigned kMaxBlocks = 8192;

unsigned blocks_for(size_t n)
{
    size_t b = (n + kThreads - 1) / kThreads;
    return b > kMaxBlocks ? kMaxBlocks : (unsigned)b;
}

__global__ void fill_kernel(float *x, float value, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        x[i] = value;
}

__global__ void relu_kernel(float *y, const float *x, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        y[i] = x[i] <= 0.0f ? 0.0f : x[i];
}

__global__ void relu_grad_kernel(float *dx, const float *dy, const float *y, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

__global__ void bias_add_kernel(float *y, const float *bias, size_t total, int cols)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x)
        y[i] += bias[i % (size_t)cols];
}

// bias_add_kernel then relu_kernel in one pass: the sum rounded to float,
// then the same comparison, so the same bits.
__global__ void bias_relu_kernel(float *y, const float *bias, size_t total, int cols)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        float v = y[i] + bias[i % (size_t)cols];
        y[i] = v <= 0.0f ? 0.0f : v;
    }
}

// Labels first, before anything is written: a batch with a bad label leaves
// dlogits as it was (the cpu backend checks the same way).
__global__ void softmax_xent_labels(const int32_t *labels, int rows, int classes,
                                    cuda_loss_t *out)
{
    __shared__ int s_bad[kThreads];
    int bad = 0;
    for (int i = threadIdx.x; i < rows; i += kThreads)
        bad += labels[i] < 0 || labels[i] >= classes;
    s_bad[threadIdx.x] = bad;
    __syncthreads();
    for (int half = kThreads / 2; half > 0; half >>= 1) {
        if ((int)threadIdx.x < half)
            s_bad[threadIdx.x] += s_bad[threadIdx.x + half];
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        out->sum = 0.0;
        out->correct = 0;
        out->bad = s_bad[0];
    }
}

// One warp per row: the models' rows are short (10 classes), so a block per
// row would leave most of its threads idle. dlogits may be the logits: each
// lane reads and writes only its own columns, and the label's logit is read
// before anything is written.
constexpr int kRowsPerBlock = 4;

__global__ void softmax_xent_rows(const float *logits, const int32_t *labels, int rows,
                                  int classes, float inv_rows, float *dlogits,
                                  double *row_loss, int *row_correct, const cuda_loss_t *out)
{
    int lane = threadIdx.x & 31;
    int r = blockIdx.x * kRowsPerBlock + (threadIdx.x >> 5);
    if (r >= rows || out->bad) // the whole warp leaves together
        return;
    const float *l = logits + (size_t)r * classes;

    // The first largest logit: within a lane indices ascend, so a strict >
    // keeps the first; across lanes ties go to the smaller index.
    float mx = 0.0f;
    int arg = -1;
    for (int j = lane; j < classes; j += 32) {
        float v = l[j];
        if (arg < 0 || v > mx) {
            mx = v;
            arg = j;
        }
    }
    for (int off = 16; off > 0; off >>= 1) {
        float omx = __shfl_xor_sync(0xffffffffu, mx, off);
        int oarg = __shfl_xor_sync(0xffffffffu, arg, off);
        if (oarg >= 0 && (arg < 0 || omx > mx || (omx == mx && oarg < arg))) {
            mx = omx;
            arg = oarg;
        }
    }

    float sum = 0.0f;
    for (int j = lane; j < classes; j += 32)
        sum += expf(l[j] - mx);
    for (int off = 16; off > 0; off >>= 1)
        sum += __shfl_xor_sync(0xffffffffu, sum, off);

    int label = labels[r];
    float xl = l[label];
    __syncwarp();
    if (dlogits) {
        float *d = dlogits + (size_t)r * classes;
        float scale = inv_rows / sum;
        for (int j = lane; j < classes; j += 32)
            d[j] = expf(l[j] - mx) * scale - (j == label ? inv_rows : 0.0f);
    }
    if (lane == 0) {
        // -log softmax[label] = log sum exp(x - max) - (x[label] - max)
        row_loss[r] = log((double)sum) - (double)(xl - mx);
        row_correct[r] = arg == label;
    }
}

// One block: sums the per-row results in a fixed order.
__global__ void softmax_xent_finish(const double *row_loss, const int *row_correct, int rows,
                                    cuda_loss_t *out)
{
    __shared__ double s_sum[kThreads];
    __shared__ int s_correct[kThreads];
    if (out->bad) // the block leaves together
        return;
    double sum = 0.0;
    int correct = 0;
    for (int i = threadIdx.x; i < rows; i += kThreads) {
        sum += row_loss[i];
        correct += row_correct[i];
    }
    s_sum[threadIdx.x] = sum;
    s_correct[threadIdx.x] = correct;
    __syncthreads();
    for (int half = kThreads / 2; half > 0; half >>= 1) {
        if ((int)threadIdx.x < half) {
            s_sum[threadIdx.x] += s_sum[threadIdx.x + half];
            s_correct[threadIdx.x] += s_correct[threadIdx.x + half];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        out->sum = s_sum[0];
        out->correct = s_correct[0];
    }
}

__device__ void block_sum_to(double v, double *dst)
{
    __shared__ double s[kThreads];
    s[threadIdx.x] = v;
    __syncthreads();
    for (int half = kThreads / 2; half > 0; half >>= 1) {
        if ((int)threadIdx.x < half)
            s[threadIdx.x] += s[threadIdx.x + half];
        __syncthreads();
    }
    if (threadIdx.x == 0)
        *dst = s[0];
}

__global__ void mse_parts(const float *pred, const float *target, size_t n,
                          float inv_rows, float *dpred, double *parts)
{
    double acc = 0.0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float d = pred[i] - target[i];
        acc += (double)d * d;
        if (dpred)
            dpred[i] = d * inv_rows;
    }
    block_sum_to(acc, &parts[blockIdx.x]);
}

__global__ void mse_finish(const double *parts, int nparts, cuda_loss_t *out)
{
    double acc = 0.0;
    for (int i = threadIdx.x; i < nparts; i += kThreads)
        acc += parts[i];
    block_sum_to(acc, &out->sum);
    if (threadIdx.x == 0) {
        out->correct = 0;
        out->bad = 0;
    }
}

// A thread per input element gathers from the windows that hold it, in
// ascending window order: the sum is the one a loop over windows scattering
// into its first maximum would make, without atomics.
__global__ void maxpool_grad_kernel(int planes, int h, int w, int size, int stride,
                                    int oh, int ow, const float *x, const float *y,
                                    const float *dy, float *dx)
{
    size_t total = (size_t)planes * h * w;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        int ix = (int)(i % w);
        int iy = (int)((i / w) % h);
        size_t plane = i / ((size_t)w * h);
        const float *xp = x + plane * h * w;
        const float *yp = y + plane * oh * ow;
        const float *dyp = dy + plane * oh * ow;

        int y_lo = iy < size ? 0 : (iy - size) / stride + 1;
        int y_hi = min(iy / stride, oh - 1);
        int x_lo = ix < size ? 0 : (ix - size) / stride + 1;
        int x_hi = min(ix / stride, ow - 1);
        float g = 0.0f;
        for (int py = y_lo; py <= y_hi; py++) {
            for (int px = x_lo; px <= x_hi; px++) {
                float m = yp[py * ow + px];
                // Is (iy, ix) the first element of this window equal to m?
                bool first = false;
                for (int r = 0; r < size; r++) {
                    int yy = py * stride + r;
                    int s = 0;
                    for (; s < size; s++) {
                        int xx = px * stride + s;
                        if (xp[yy * w + xx] == m) {
                            first = yy == iy && xx == ix;
                            break;
                        }
                    }
                    if (s < size)
                        break;
                }
                if (first)
                    g += dyp[py * ow + px];
            }
        }
        dx[i] = g;
    }
}

__global__ void sgd_kernel(float *p, const float *g, float *v, size_t n, float lr,
                           float mu, float wd)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float gi = g[i] + wd * p[i];
        if (v) { // v is NULL when mu is 0
            gi = mu * v[i] + gi;
            v[i] = gi;
        }
        p[i] -= lr * gi;
    }
}

__global__ void adam_kernel(float *p, const float *g, float *m, float *v, size_t n,
                            float b1, float b2, float eps, float wd, float step,
                            float bc2_sqrt)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float gi = g[i] + wd * p[i];
        float mi = b1 * m[i] + (1.0f - b1) * gi;
        float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
        m[i] = mi;
        v[i] = vi;
        // PyTorch's order of operations, as the cpu backend's.
        p[i] -= step * mi / (sqrtf(vi) / bc2_sqrt + eps);
    }
}

// One thread a word: consecutive threads copy consecutive words of a row,
// so both the reads (within a source row) and the writes coalesce.
__global__ void gather_kernel(uint32_t *dst, const uint32_t *src, const uint32_t *idx,
                              size_t rows, size_t words)
{
    size_t total = rows * words;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        size_t r = i / words, c = i - r * words;
        dst[i] = src[(size_t)idx[r] * words + c];
    }
}

// ---- the layers of <ferry/nn.h> ----

__device__ float act_of(int act, float alpha, float x)
{
    switch (act) {
    case 1: return tanhf(x);
    case 2: return 1.0f / (1.0f + expf(-x));
    case 3: return x > 0 ? x : alpha * x;
    case 4: return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
    default: return x;
    }
}

__device__ float act_slope(int act, float alpha, float x, float y)
{
    switch (act) {
    case 1: return 1.0f - y * y;
    case 2: return y * (1.0f - y);
    case 3: return x > 0 ? 1.0f : alpha;
    case 4:
        return 0.5f * (1.0f + erff(x * 0.70710678118654752f)) +
               x * 0.3989422804014327f * expf(-0.5f * x * x);
    default: return 1.0f;
    }
}

__global__ void act_kernel(int act, float alpha, float *y, const float *x, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        y[i] = act_of(act, alpha, x[i]);
}

__global__ void act_grad_kernel(int act, float alpha, float *dx, const float *dy,
                                const float *x, const float *y, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        dx[i] = dy[i] * act_slope(act, alpha, x[i], y[i]);
}

__global__ void mul_kernel(float *z, const float *x, const float *y, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        z[i] = x[i] * y[i];
}

__global__ void dropout_kernel(float *mask, size_t n, float p, uint64_t seed)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        mask[i] = rt_dropout_factor(seed, i, p);
}

__global__ void avgpool_kernel(int planes, int h, int w, int size, int stride, int oh,
                               int ow, const float *x, float *y)
{
    size_t total = (size_t)planes * oh * ow;
    float inv = 1.0f / (float)(size * size);
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        int ox = (int)(i % ow), oy = (int)((i / ow) % oh);
        const float *xp = x + (i / ((size_t)ow * oh)) * h * w;
        float s = 0;
        for (int ky = 0; ky < size; ky++)
            for (int kx = 0; kx < size; kx++)
                s += xp[(size_t)(oy * stride + ky) * w + ox * stride + kx];
        y[i] = s * inv;
    }
}

// A thread per input element gathers its share from the windows holding it.
__global__ void avgpool_grad_kernel(int planes, int h, int w, int size, int stride,
                                    int oh, int ow, const float *dy, float *dx)
{
    size_t total = (size_t)planes * h * w;
    float inv = 1.0f / (float)(size * size);
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        int ix = (int)(i % w), iy = (int)((i / w) % h);
        const float *d = dy + (i / ((size_t)w * h)) * oh * ow;
        int y_lo = iy < size ? 0 : (iy - size) / stride + 1, y_hi = min(iy / stride, oh - 1);
        int x_lo = ix < size ? 0 : (ix - size) / stride + 1, x_hi = min(ix / stride, ow - 1);
        float s = 0;
        for (int oy = y_lo; oy <= y_hi; oy++)
            for (int ox = x_lo; ox <= x_hi; ox++)
                s += d[oy * ow + ox];
        dx[i] = s * inv;
    }
}

__global__ void bce_parts(const float *z, const float *t, size_t n, float inv,
                          float *dz, double *parts)
{
    double acc = 0.0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float v = z[i];
        acc += (double)(fmaxf(v, 0.0f) - v * t[i] + log1pf(expf(-fabsf(v))));
        if (dz)
            dz[i] = (1.0f / (1.0f + expf(-v)) - t[i]) * inv;
    }
    block_sum_to(acc, &parts[blockIdx.x]);
}

// A block's sum of v, in every thread (fixed order: deterministic).
__device__ double block_sum(double v)
{
    __shared__ double part[kThreads];
    part[threadIdx.x] = v;
    __syncthreads();
    for (int s = kThreads / 2; s > 0; s /= 2) {
        if ((int)threadIdx.x < s)
            part[threadIdx.x] += part[threadIdx.x + s];
        __syncthreads();
    }
    double total = part[0];
    __syncthreads();
    return total;
}

// A block a row.
__global__ void layernorm_kernel(const float *x, const float *gamma, const float *beta,
                                 int cols, float eps, float *y, float *mean, float *rstd)
{
    const float *xr = x + (size_t)blockIdx.x * cols;
    float *yr = y + (size_t)blockIdx.x * cols;
    double s = 0;
    for (int j = threadIdx.x; j < cols; j += kThreads)
        s += xr[j];
    double m = block_sum(s) / cols;
    double s2 = 0;
    for (int j = threadIdx.x; j < cols; j += kThreads)
        s2 += (xr[j] - m) * (xr[j] - m);
    float r = (float)(1.0 / sqrt(block_sum(s2) / cols + eps)), mf = (float)m;
    for (int j = threadIdx.x; j < cols; j += kThreads)
        yr[j] = (xr[j] - mf) * r * gamma[j] + beta[j];
    if (threadIdx.x == 0) {
        mean[blockIdx.x] = mf;
        rstd[blockIdx.x] = r;
    }
}

__global__ void layernorm_dx_kernel(const float *x, const float *gamma, const float *mean,
                                    const float *rstd, const float *dy, int cols, float *dx)
{
    size_t row = blockIdx.x;
    const float *xr = x + row * cols, *dyr = dy + row * cols;
    float m = mean[row], r = rstd[row];
    double a = 0, b = 0;
    for (int j = threadIdx.x; j < cols; j += kThreads) {
        float g = dyr[j] * gamma[j];
        a += g;
        b += (double)g * ((xr[j] - m) * r);
    }
    float ma = (float)(block_sum(a) / cols), mb = (float)(block_sum(b) / cols);
    for (int j = threadIdx.x; j < cols; j += kThreads)
        dx[row * cols + j] = r * (dyr[j] * gamma[j] - ma - (xr[j] - m) * r * mb);
}

// A thread a column, the rows in order.
__global__ void layernorm_dparams_kernel(const float *x, const float *mean, const float *rstd,
                                         const float *dy, int rows, int cols, float *dgamma,
                                         float *dbeta)
{
    for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < cols;
         j += gridDim.x * blockDim.x) {
        float g = 0, b = 0;
        for (int i = 0; i < rows; i++) {
            size_t at = (size_t)i * cols + j;
            g += dy[at] * (x[at] - mean[i]) * rstd[i];
            b += dy[at];
        }
        dgamma[j] = g;
        dbeta[j] = b;
    }
}

} // namespace

extern "C" cudaError_t cuda_k_fill(cudaStream_t stream, float *x, float value, size_t n)
{
    if (n == 0)
        return cudaSuccess;
    fill_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, value, n);
    return cudaGetLastError();
}

extern "C" cudaError_t cuda_k_relu(cudaStream_t stream, float *y, const float *x,
                                   size_t n)
{
    if (n == 0)
        return cudaSuccess;
    relu_kernel<<<blocks_for(n), kThreads, 0, stream>>>(y, x, n);
    return cudaGetLastError();
}

extern "C" cudaError_t cuda_k_relu_grad(cudaStream_t stream, float *dx, const float *dy,
                                        const float *y, size_t n)
{
    if (n == 0)
        return cudaSuccess;
    relu_grad_kernel<<<blocks_for(n), kThreads, 0, stream>>>(dx, dy, y, n);
    return cudaGetLastError();
}

extern "C" cudaError_t cuda_k_bias_add(cudaStream_t stream, float *y, const float *bias,
                                       int rows, int cols)
{
    size_t total = (size_t)rows * cols;
    if (total == 0)
        return cudaSuccess;
    bias_add_kernel<<<blocks_for(total), kThreads, 0, stream>>>(y, bias, total, cols);
    return cudaGetLastError();
}

extern "C" cudaError_t cuda_k_bias_relu(cudaStream_t stream, float *y, const float *bias,
                                        int rows, int cols)
{
    size_t total = (size_t)rows * cols;
    if (total == 0)
        return cudaSuccess;
    bias_relu_kernel<<<blocks_for(total), kThreads, 0, stream>>>(y, bias, total, cols);
    return cudaGetLastError();
}

extern "C" cudaError_t cuda_k_softmax_xent(cudaStream_t stream, const float *logits,
                                           const int32_t *labels, int rows, int classes,
                                           float *dlogits, double *row_loss,
                                           int *row_correct, cuda_loss_t *out)
{
    softmax_xent_labels<<<1, kThreads, 0, stream>>>(labels, rows, classes, out);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess)
        return e;
    unsigned grid = (unsigned)((rows + kRowsPerBlock - 1) / kRowsPerBlock);
    softmax_xent_rows<<<grid, 32 * kRowsPerBlock, 0, stream>>>(
        logits, labels, rows, classes, 1.0f / (float)rows, dlogits, row_loss, row_correct,
        out);
    if ((e = cudaGetLastError()) != cudaSuccess)
        return e;
    softmax_xent_finish<<<1, kThreads, 0, stream>>>(row_loss, row_correct, rows, out);
    return cudaGetLastError();
}

extern "C" cudaError_t cuda_k_mse(cudaStream_t stream, const float *pred,
                                  const float *target, size_t n, float inv_rows,
                                  float *dpred, double *parts, cuda_loss_t *out)
{
    unsigned grid = blocks_for(n);
    if (grid > CUDA_MSE_PARTS)
        grid = CUDA_MSE_PARTS;
    mse_parts<<<grid, kThreads, 0, stream>>>(pred, target, n, inv_rows, dpred, parts);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess)
        return e;
    mse_finish<<<1, kThreads, 0, stream>>>(parts, (int)grid, out);
    return cudaGetLastError();
}

extern "C" cudaError_t cuda_k_maxpool_grad(cudaStream_t stream, int n, int c, int h,
                                           int w, int size, int stride, int oh, int ow,
                                           const float *x, const float *y,
                                           const float *dy, float *dx)
{
    size_t total = (size_t)n * c * h * w;
    if (total == 0)
        return cudaSuccess;
    maxpool_grad_kernel<<<blocks_for(total), kThreads, 0, stream>>>(
        n * c, h, w, size, stride, oh, ow, x, y, dy, dx);
    return cudaGetLastError();
}

extern "C" cudaError_t cuda_k_sgd(cudaStream_t stream, float *p, const float *g,
                                  float *v, size_t n, float lr, float mu, float wd)
{
    if (n == 0)
        return cudaSuccess;
    sgd_kernel<<<blocks_for(n), kThreads, 0, stream>>>(p, g, v, n, lr, mu, wd);
    return cudaGetLastError();
}

extern "C" cudaError_t cuda_k_adam(cudaStream_t stream, float *p, const float *g,
                                   float *m, float *v, size_t n, float b1, float b2,
                                   float eps, float wd, float step, float bc2_sqrt)
{
    if (n == 0)
        return cudaSuccess;
    adam_kernel<<<blocks_for(n), kThreads, 0, stream>>>(p, g, m, v, n, b1, b2, eps, wd,
                                                        step, bc2_sqrt);
    return cudaGetLastError();
}

extern "C" cudaError_t cuda_k_gather(cudaStream_t stream, uint32_t *dst,
                                     const uint32_t *src, const uint32_t *idx,
                                     size_t rows, size_t words)
{
    if (rows == 0 || words == 0)
        return cudaSuccess;
    gather_kernel<<<blocks_for(rows * words), kThreads, 0, stream>>>(dst, src, idx, rows,
                                                                    words);
    return cudaGetLastError();
}

__global__ void to_bf16_kernel(uint16_t *dst, const float *src, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        dst[i] = cuda_bf16_from_f32(src[i]);
}

__global__ void round_bf16_kernel(float *dst, const float *src, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        dst[i] = cuda_bf16_round(src[i]);
}

extern "C" cudaError_t cuda_k_to_bf16(cudaStream_t stream, uint16_t *dst, const float *src,
                                      size_t n)
{
    if (n == 0)
        return cudaSuccess;
    to_bf16_kernel<<<blocks_for(n), kThreads, 0, stream>>>(dst, src, n);
    return cudaGetLastError();
}

extern "C" cudaError_t cuda_k_round_bf16(cudaStream_t stream, float *dst, const float *src,
                                         size_t n)
{
    if (n == 0)
        return cudaSuccess;
    round_bf16_kernel<<<blocks_for(n), kThreads, 0, stream>>>(dst, src, n);
    return cudaGetLastError();
}

extern "C" cudaError_t cuda_k_activation(cudaStream_t stream, int act, float alpha, float *y,
                                         const float *x, size_t n)
{
    act_kernel<<<blocks_for(n), kThreads, 0, stream>>>(act, alpha, y, x, n);
    return cudaGetLastError();
}

extern "C" cudaError_t cuda_k_activation_grad(cudaStream_t stream, int act, float alpha,
                                              float *dx, const float *dy, const float *x,
                                              const float *y, size_t n)
{
    act_grad_kernel<<<blocks_for(n), kThreads, 0, stream>>>(act, alpha, dx, dy, x, y, n);
    return cudaGetLastError();
}

extern "C" cudaError_t cuda_k_mul(cudaStream_t stream, float *z, const float *x,
                                  const float *y, size_t n)
{
    mul_kernel<<<blocks_for(n), kThreads, 0, stream>>>(z, x, y, n);
    return cudaGetLastError();
}

extern "C" cudaError_t cuda_k_dropout_mask(cudaStream_t stream, float *mask, size_t n,
                                           float p, uint64_t seed)
{
    dropout_kernel<<<blocks_for(n), kThreads, 0, stream>>>(mask, n, p, seed);
    return cudaGetLastError();
}

extern "C" cudaError_t cuda_k_avgpool(cudaStream_t stream, int n, int c, int h, int w,
                                      int size, int stride, int oh, int ow, const float *x,
                                      float *y)
{
    size_t total = (size_t)n * c * oh * ow;
    if (total == 0)
        return cudaSuccess;
    avgpool_kernel<<<blocks_for(total), kThreads, 0, stream>>>(n * c, h, w, size, stride,
                                                                oh, ow, x, y);
    return cudaGetLastError();
}

extern "C" cudaError_t cuda_k_avgpool_grad(cudaStream_t stream, int n, int c, int h, int w,
                                           int size, int stride, int oh, int ow,
                                           const float *dy, float *dx)
{
    size_t total = (size_t)n * c * h * w;
    if (total == 0)
        return cudaSuccess;
    avgpool_grad_kernel<<<blocks_for(total), kThreads, 0, stream>>>(n * c, h, w, size,
                                                                     stride, oh, ow, dy, dx);
    return cudaGetLastError();
}

extern "C" cudaError_t cuda_k_bce_logits(cudaStream_t stream, const float *z, const float *t,
                                         size_t n, float inv, float *dz, double *parts,
                                         cuda_loss_t *out)
{
    unsigned grid = blocks_for(n);
    if (grid > CUDA_MSE_PARTS)
        grid = CUDA_MSE_PARTS;
    bce_parts<<<grid, kThreads, 0, stream>>>(z, t, n, inv, dz, parts);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess)
        return e;
    mse_finish<<<1, kThreads, 0, stream>>>(parts, (int)grid, out);
    return cudaGetLastError();
}

extern "C" cudaError_t cuda_k_layernorm(cudaStream_t stream, const float *x, const float *gamma,
                                        const float *beta, int rows, int cols, float eps,
                                        float *y, float *mean, float *rstd)
{
    layernorm_kernel<<<rows, kThreads, 0, stream>>>(x, gamma, beta, cols, eps, y, mean, rstd);
    return cudaGetLastError();
}

extern "C" cudaError_t cuda_k_layernorm_grad(cudaStream_t stream, const float *x,
                                             const float *gamma, const float *mean,
                                             const float *rstd, const float *dy, int rows,
                                             int cols, float *dx, float *dgamma, float *dbeta)
{
    if (dx) {
        layernorm_dx_kernel<<<rows, kThreads, 0, stream>>>(x, gamma, mean, rstd, dy, cols,
                                                            dx);
        cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess)
            return e;
    }
    layernorm_dparams_kernel<<<blocks_for((size_t)cols), kThreads, 0, stream>>>(
        x, mean, rstd, dy, rows, cols, dgamma, dbeta);
    return cudaGetLastError();
}
