/* runtime/data — a run's sets from a user's files: the training file, and
 * a test file or a seeded held-out part of the training file; then the
 * checks between the two and the normalisation. */
#include "data_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ferry/error.h"

/* The split's own stream of the seed, apart from the shuffles'. */
#define SPLIT_STREAM 0x5b1172u

/* rows[0..n_test) the test rows, rows[n_test..n) the training rows, each
 * part in file order. */
static int split(size_t n, double frac, uint64_t seed, uint32_t **rows, size_t *n_test)
{
    uint32_t *r = malloc((n ? n : 1) * sizeof *r);
    uint8_t *is_test = calloc(n ? n : 1, 1);
    if (!r || !is_test) {
        free(r);
        free(is_test);
        return FERRY_ENOMEM;
    }
    for (size_t i = 0; i < n; i++)
        r[i] = (uint32_t)i;
    size_t k = (size_t)(frac * (double)n + 0.5);
    if (k == 0 && n > 1)
        k = 1;
    if (k >= n)
        k = n - 1;
    rt_rng g;
    rt_rng_seed(&g, seed, SPLIT_STREAM);
    for (size_t i = 0; i < k; i++) { /* a partial Fisher-Yates: k draws */
        size_t j = i + (size_t)rt_rng_below(&g, n - i);
        uint32_t t = r[i];
        r[i] = r[j];
        r[j] = t;
        is_test[r[i]] = 1;
    }
    size_t a = 0, b = k;
    for (size_t i = 0; i < n; i++)
        r[is_test[i] ? a++ : b++] = (uint32_t)i;
    free(is_test);
    *rows = r;
    *n_test = k;
    return 0;
}

static int same_shape(const rt_dataset *tr, const rt_dataset *te, const char *path,
                      char *err, size_t errlen)
{
    if (tr->c == te->c && tr->h == te->h && tr->w == te->w &&
        !tr->labels == !te->labels && tr->outputs == te->outputs)
        return 0;
    return base_errf(err, errlen, FERRY_EINVAL,
                     "%s: test samples of %dx%dx%d%s, the training set's are %dx%dx%d%s",
                     path, te->c, te->h, te->w, te->labels ? " with labels" : " with targets",
                     tr->c, tr->h, tr->w, tr->labels ? " with labels" : " with targets");
}

static int from_split(const rt_data_source *s, const rt_raw *raw, rt_dataset *train,
                      rt_dataset *test, char *err, size_t errlen)
{
    size_t n = rt_raw_count(raw), k;
    if (n > UINT32_MAX)
        return base_errf(err, errlen, FERRY_EINVAL, "%s: more than %u samples", s->path,
                         UINT32_MAX);
    if (n < 2)
        return base_errf(err, errlen, FERRY_EINVAL,
                         "%s: %zu sample, too few to hold some out for testing", s->path, n);
    uint32_t *rows;
    double frac = s->test_split > 0 ? s->test_split : RT_DATA_SPLIT;
    if (split(n, frac, s->seed, &rows, &k) != 0)
        return base_errf(err, errlen, FERRY_ENOMEM, "%s: no memory", s->path);
    int rc = rt_raw_to_set(raw, rows + k, n - k, NULL, train, err, errlen);
    if (rc == 0)
        rc = rt_raw_to_set(raw, rows, k, train, test, err, errlen);
    free(rows);
    return rc;
}

/* A set read in place is checked finite before anything reads it as
 * numbers: all of it, or with normalize "none" and shards given only the
 * reader's shards (normalising reads every sample anyway). */
static int check_finite(const rt_data_source *s, const rt_dataset *train,
                        const rt_dataset *test, char *err, size_t errlen)
{
    bool shards = s->world > 0 && s->rank >= 0 && s->rank < s->world && s->batch > 0 &&
                  s->test_batch > 0 && s->normalize && strcmp(s->normalize, "none") == 0;
    const rt_dataset *sets[] = {train, test};
    const char *paths[] = {s->path, s->test_path && s->test_path[0] ? s->test_path : s->path};
    for (int k = 0; k < 2; k++) {
        size_t lo = 0, n = sets[k]->n;
        if (shards)
            rt_shard_of(sets[k]->n, (size_t)(k ? s->test_batch : s->batch), s->rank,
                        s->world, &lo, &n);
        int rc = rt_dataset_check_finite(sets[k], lo, n, paths[k], err, errlen);
        if (rc != 0)
            return rc;
    }
    return 0;
}

int rt_data_source_load(const rt_data_source *s, const rt_data_cancel *cancel,
                        rt_dataset *train, rt_dataset *test, char *err, size_t errlen)
{
    memset(train, 0, sizeof *train);
    memset(test, 0, sizeof *test);
    if (!s || !s->path || !s->path[0])
        return base_errf(err, errlen, FERRY_EINVAL, "no data file named");
    rt_raw raw, raw_test = {0};
    int rc = rt_raw_read(s, s->path, s->labels, cancel, &raw, err, errlen);
    if (rc == 0 && s->test_path && s->test_path[0])
        rc = rt_raw_read(s, s->test_path, s->test_labels, cancel, &raw_test, err, errlen);
    if (rc != 0)
        goto out;
    if (s->test_path && s->test_path[0]) {
        rc = rt_raw_to_set(&raw, NULL, rt_raw_count(&raw), NULL, train, err, errlen);
        if (rc == 0)
            rc = rt_raw_to_set(&raw_test, NULL, rt_raw_count(&raw_test), train, test, err,
                               errlen);
        if (rc == 0)
            rc = same_shape(train, test, s->test_path, err, errlen);
    } else {
        rc = from_split(s, &raw, train, test, err, errlen);
    }
    if (rc == 0)
        rc = check_finite(s, train, test, err, errlen);
    if (rc == 0)
        rc = rt_normalize(train, test, s->normalize, err, errlen);
    if (rc == 0)
        rt_data_describe(train, test, s->path, s->normalize);
out:
    rt_raw_free(&raw);
    rt_raw_free(&raw_test);
    if (rc != 0) {
        rt_dataset_free(train);
        rt_dataset_free(test);
    }
    return rc;
}
