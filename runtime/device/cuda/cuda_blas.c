/* The dense ops on cuBLAS. cuBLAS is column-major and ferry's matrices are
 * row-major; a row-major matrix read column-major is its transpose, so
 * C = op(A) op(B) is computed as C^T = op(B)^T op(A)^T with the operands
 * swapped and no data moved. The handle keeps its default math mode: full
 * float32, no TF32, so results agree with the cpu backend's; tf32 sets the
 * TF32 mode, and bf16 runs the products through cublasGemmEx on bfloat16
 * copies of the inputs with float32 sums (cuda_bf16_copy). */
#include <limits.h>

#include "cuda_int.h"

static int imax1(int v)
{
    return v > 1 ? v : 1;
}

void cuda_gemm(ferry_device_t *dev, bool trans_a, bool trans_b, int m, int n, int k,
               float alpha, const float *a, const float *b, float beta, float *c)
{
    cuda_dev_t *d = cuda_dev(dev);
    int rc = 0;
    if (m < 0 || n < 0 || k < 0) {
        rc = cuda_einval(d, "gemm: a negative size");
        goto out;
    }
    if (m == 0 || n == 0)
        return;
    if ((rc = cuda_enter(d)) != 0)
        goto out;
    if (k == 0) {
        /* An empty product: C = beta C, by hand rather than trusting every
         * BLAS's quick return (C is packed, so it is one vector). */
        if (beta == 0.0f)
            CUDA_RT_TRY(
                d, cudaMemsetAsync(c, 0, (size_t)m * n * sizeof(float), d->stream), out);
        else
            cuda_scale(dev, c, beta, (size_t)m * n);
        return;
    }
    /* Row-major A is m x k (lda k), or stored k x m when trans_a (lda m);
     * likewise B, k x n (ldb n) or n x k (ldb k). C is m x n, ldc n. */
    int lda = imax1(trans_a ? m : k);
    int ldb = imax1(trans_b ? k : n);
    if (d->precision == CUDA_PREC_BF16) {
        /* Mixed precision: both inputs rounded to bfloat16, the products
         * summed in float32 into a float32 C (tensor cores on Ampere and
         * later). A and B hold m k and k n elements whatever their
         * transposition. */
        const void *ha, *hb;
        if ((rc = cuda_bf16_copy(d, 0, a, (size_t)m * k, true, &ha)) != 0 ||
            (rc = cuda_bf16_copy(d, 1, b, (size_t)k * n, true, &hb)) != 0)
            goto out;
        CUDA_BLAS_TRY(d,
                      cublasGemmEx(d->blas, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                                   trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha,
                                   hb, CUDA_R_16BF, ldb, ha, CUDA_R_16BF, lda, &beta, c,
                                   CUDA_R_32F, n, CUBLAS_COMPUTE_32F,
                                   CUBLAS_GEMM_DEFAULT),
                      out);
        goto out;
    }
    CUDA_BLAS_TRY(d,
                  cublasSgemm(d->blas, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                              trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha, b,
                              ldb, a, lda, &beta, c, n),
                  out);
out:
    cuda_defer(d, rc);
}

/* The level-1 calls take int counts: a longer vector goes in pieces. */
#define CHUNK ((size_t)INT_MAX / 2)

void cuda_scale(ferry_device_t *dev, float *x, float a, size_t n)
{
    cuda_dev_t *d = cuda_dev(dev);
    int rc = 0;
    if (n == 0)
        return;
    if ((rc = cuda_enter(d)) != 0)
        goto out;
    for (size_t off = 0; off < n; off += CHUNK) {
        int len = (int)(n - off < CHUNK ? n - off : CHUNK);
        CUDA_BLAS_TRY(d, cublasSscal(d->blas, len, &a, x + off, 1), out);
    }
out:
    cuda_defer(d, rc);
}

void cuda_axpy(ferry_device_t *dev, float *y, float a, const float *x, size_t n)
{
    cuda_dev_t *d = cuda_dev(dev);
    int rc = 0;
    if (n == 0)
        return;
    if ((rc = cuda_enter(d)) != 0)
        goto out;
    for (size_t off = 0; off < n; off += CHUNK) {
        int len = (int)(n - off < CHUNK ? n - off : CHUNK);
        CUDA_BLAS_TRY(d, cublasSaxpy(d->blas, len, &a, x + off, 1, y + off, 1), out);
    }
out:
    cuda_defer(d, rc);
}

/* dbias = dy^T 1: row-major dy (rows x cols) read column-major is a
 * cols x rows matrix, so it is one gemv against a vector of ones that the
 * device keeps. */
void cuda_bias_grad(ferry_device_t *dev, float *dbias, const float *dy, int rows,
                    int cols)
{
    cuda_dev_t *d = cuda_dev(dev);
    int rc = 0;
    if (rows < 0 || cols < 0) {
        rc = cuda_einval(d, "bias_grad: a negative size");
        goto out;
    }
    if (cols == 0)
        return;
    if ((rc = cuda_enter(d)) != 0)
        goto out;
    cudaError_t e;
    if (rows == 0) {
        /* cuBLAS returns at once on an empty matrix, leaving y as it was. */
        if ((e = cuda_k_fill(d->stream, dbias, 0.0f, (size_t)cols)) != cudaSuccess)
            rc = cuda_rt_fail(d, "bias_grad: fill", e);
        goto out;
    }
    if ((size_t)rows > d->ones_n) {
        size_t bytes = d->ones_n * sizeof(float);
        void *buf = d->ones;
        rc = cuda_grow(d, &buf, &bytes, (size_t)rows * sizeof(float));
        d->ones = buf;
        d->ones_n = bytes / sizeof(float);
        if (rc != 0)
            goto out;
        if ((e = cuda_k_fill(d->stream, d->ones, 1.0f, d->ones_n)) != cudaSuccess) {
            rc = cuda_rt_fail(d, "bias_grad: fill", e);
            d->ones_n = 0;
            goto out;
        }
    }
    float one = 1.0f, zero = 0.0f;
    CUDA_BLAS_TRY(d,
                  cublasSgemv(d->blas, CUBLAS_OP_N, cols, rows, &one, dy, cols, d->ones,
                              1, &zero, dbias, 1),
                  out);
out:
    cuda_defer(d, rc);
}
