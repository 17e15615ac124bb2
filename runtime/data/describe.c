/* runtime/data — the line that says what a user's file gave: samples,
 * shape, classes and their balance (or targets), the test set, and what
 * normalisation did, so that nothing about the input is silent. */
#include "data_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ABOUT_MAX 4096

/* "classes 0..9 (6000 each)" or the counts, or the smallest and largest. */
static size_t balance(const rt_dataset *ds, char *out, size_t len)
{
    size_t *count = calloc((size_t)ds->classes + 1, sizeof *count);
    if (!count)
        return 0;
    for (size_t i = 0; i < ds->n; i++)
        count[ds->labels[i]]++;
    size_t lo = SIZE_MAX, hi = 0, used = 0;
    for (int k = 0; k < ds->classes; k++) {
        lo = count[k] < lo ? count[k] : lo;
        hi = count[k] > hi ? count[k] : hi;
    }
    int w = snprintf(out, len, "%d classes, balance ", ds->classes);
    used = w > 0 ? (size_t)w : 0;
    for (int k = 0; k < ds->classes && ds->classes <= 10 && used < len; k++) {
        const char *name = ds->class_names ? ds->class_names[k] : NULL;
        w = name ? snprintf(out + used, len - used, "%s%d=%s:%zu", k ? " " : "", k, name,
                            count[k])
                 : snprintf(out + used, len - used, "%s%zu", k ? " " : "", count[k]);
        used += w > 0 ? (size_t)w : 0;
    }
    if (ds->classes > 10 && used < len) {
        w = snprintf(out + used, len - used, "%zu to %zu a class", lo, hi);
        used += w > 0 ? (size_t)w : 0;
    }
    free(count);
    return used < len ? used : len - 1;
}

static size_t norm_text(const rt_dataset *ds, const char *how, char *out, size_t len)
{
    if (!ds->norm_n)
        return (size_t)snprintf(out, len, "; not normalised (--normalize none)");
    bool image = ds->h > 1;
    int w = snprintf(out, len, "; normalised %s per %s from the training set",
                     how && how[0] ? how : "standard", image ? "channel" : "feature");
    if (w > 0 && (size_t)w < len && image && ds->norm_n == 1)
        w += snprintf(out + w, len - (size_t)w, " (shift %.6g, scale %.6g)",
                      ds->norm_shift[0], ds->norm_scale[0]);
    return w > 0 && (size_t)w < len ? (size_t)w : len - 1;
}

void rt_data_describe(rt_dataset *train, const rt_dataset *test, const char *path,
                      const char *how)
{
    char *s = malloc(ABOUT_MAX);
    if (!s)
        return;
    size_t used = (size_t)snprintf(s, ABOUT_MAX, "%s: %zu samples of %dx%dx%d, ", path,
                                   train->n, train->c, train->h, train->w);
    if (train->labels)
        used += balance(train, s + used, ABOUT_MAX - used);
    else
        used += (size_t)snprintf(s + used, ABOUT_MAX - used, "%d targets a sample",
                                 train->outputs);
    if (used < ABOUT_MAX)
        used += (size_t)snprintf(s + used, ABOUT_MAX - used, "; test %zu samples",
                                 test ? test->n : 0);
    if (used < ABOUT_MAX)
        norm_text(train, how, s + used, ABOUT_MAX - used);
    free(train->about);
    train->about = s;
}
