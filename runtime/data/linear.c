/* runtime/data — a synthetic regression set whose answer is known: the
 * weights and bias come from the seed alone, the samples from (seed, which),
 * so a training and a test set of one seed share the true model. */
#include "data_int.h"

#include <stdlib.h>
#include <string.h>

#include "ferry/error.h"

/* Streams of a seed: the true model, then one a split. */
#define STREAM_MODEL   0x6d6f64656cull /* "model" */
#define STREAM_SAMPLES 0x73616d706cull /* "sampl" */

int rt_linear_make(size_t n, int features, float noise, uint64_t seed, int which,
                   rt_dataset *out)
{
    if (!out || features <= 0 || !(noise >= 0) || (which != 0 && which != 1))
        return FERRY_EINVAL;
    memset(out, 0, sizeof *out);
    size_t f = (size_t)features;
    if (n > SIZE_MAX / sizeof(float) / f)
        return FERRY_ENOMEM;

    rt_dataset ds = {
        .n = n, .features = features, .c = 1, .h = 1, .w = features, .outputs = 1};
    double *w = rt_data_alloc(f * sizeof *w);
    ds.x = rt_data_alloc(n * f * sizeof(float));
    ds.targets = rt_data_alloc(n * sizeof(float));
    ds.answer_n = f + 1;
    ds.answer = malloc(ds.answer_n * sizeof *ds.answer);
    if (!w || !ds.x || !ds.targets || !ds.answer) {
        free(w);
        rt_dataset_free(&ds);
        return FERRY_ENOMEM;
    }

    rt_rng r;
    rt_rng_seed(&r, seed, STREAM_MODEL);
    for (size_t j = 0; j < f; j++)
        w[j] = rt_rng_normal(&r);
    double b = rt_rng_normal(&r);
    for (size_t j = 0; j < f; j++)
        ds.answer[j] = (float)w[j];
    ds.answer[f] = (float)b;

    rt_rng_seed(&r, seed, STREAM_SAMPLES + (uint64_t)which);
    for (size_t i = 0; i < n; i++) {
        float *x = ds.x + i * f;
        double t = b;
        for (size_t j = 0; j < f; j++) {
            x[j] = (float)rt_rng_normal(&r);
            t += (double)x[j] * w[j];
        }
        ds.targets[i] = (float)(t + noise * rt_rng_normal(&r));
    }
    free(w);
    *out = ds;
    return 0;
}
