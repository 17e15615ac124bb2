/* Losses. Their results come back to the host as sums taken in double, so
 * that a batch's loss does not depend on how many rows it has in float. */
#include <math.h>

#include <ferry/error.h>

#include "cpu_int.h"

int cpu_softmax_xent(ferry_device_t *dev, const float *logits, const int32_t *labels,
                     int rows, int classes, float *dlogits, float *loss, int *correct)
{
    (void)dev;
    if (rows <= 0 || classes <= 0)
        return FERRY_EINVAL;
    /* Checked before anything is written: a bad batch leaves dlogits alone. */
    for (int i = 0; i < rows; i++)
        if (labels[i] < 0 || labels[i] >= classes)
            return FERRY_EINVAL;
    double sum = 0;
    int right = 0;
    const float inv = 1.f / (float)rows;
    for (int i = 0; i < rows; i++) {
        const float *x = logits + (size_t)i * classes;
        int best = 0;
        for (int j = 1; j < classes; j++)
            if (x[j] > x[best])
                best = j;
        const float mx = x[best];
        const int label = labels[i];
        right += best == label;
        /* Read before dlogits is written, which may be the logits. */
        const float xl = x[label];
        float s = 0.f;
        if (dlogits) {
            float *d = dlogits + (size_t)i * classes;
            for (int j = 0; j < classes; j++) {
                d[j] = expf(x[j] - mx);
                s += d[j];
            }
            const float scale = inv / s;
            for (int j = 0; j < classes; j++)
                d[j] *= scale;
            d[label] -= inv;
        } else {
            for (int j = 0; j < classes; j++)
                s += expf(x[j] - mx);
        }
        /* -log softmax[label] = log sum exp(x - max) - (x[label] - max) */
        sum += log((double)s) - (double)(xl - mx);
    }
    if (loss)
        *loss = (float)(sum / rows);
    if (correct)
        *correct = right;
    return 0;
}

int cpu_mse(ferry_device_t *dev, const float *restrict pred, const float *restrict target,
            int rows, int cols, float *restrict dpred, float *loss)
{
    (void)dev;
    if (rows <= 0 || cols <= 0)
        return FERRY_EINVAL;
    const size_t n = (size_t)rows * cols;
    const float inv = 1.f / (float)rows;
    double sum = 0;
    for (size_t i = 0; i < n; i++) {
        const float d = pred[i] - target[i];
        sum += (double)d * d;
        if (dpred)
            dpred[i] = d * inv;
    }
    if (loss)
        *loss = (float)(sum / (2.0 * rows));
    return 0;
}
