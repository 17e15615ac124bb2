/* Dense products through OpenBLAS. Row-major and packed: the leading
 * dimension of each matrix is its stored row length. */
#include <cblas.h>

#include "cpu_int.h"

void cpu_gemm(ferry_device_t *dev, bool trans_a, bool trans_b, int m, int n, int k,
              float alpha, const float *a, const float *b, float beta, float *c)
{
    (void)dev;
    if (m <= 0 || n <= 0)
        return;
    if (k <= 0) {
        /* Nothing to multiply: C = beta C, with beta 0 clearing NaNs too. */
        for (size_t i = 0; i < (size_t)m * n; i++)
            c[i] = beta == 0.f ? 0.f : beta * c[i];
        return;
    }
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, trans_a ? m : k,
                b, trans_b ? k : n, beta, c, n);
}
