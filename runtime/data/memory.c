/* runtime/data — a data set's memory: the aligned blocks its arrays live
 * in, and freeing them. */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "data_int.h"

#define HUGE_PAGE ((size_t)2 << 20)

void *rt_data_alloc(size_t n)
{
    if (n >= HUGE_PAGE) {
        /* A whole data set: the loader reads its rows in random order, one
         * or two 4 KiB pages a row, and TLB misses then cost as much as the
         * copying (a 128-row gather took half the time on 2 MiB pages). */
        size_t rounded = (n + HUGE_PAGE - 1) & ~(size_t)(HUGE_PAGE - 1);
        if (rounded < n)
            return NULL;
        void *p = aligned_alloc(HUGE_PAGE, rounded);
        if (p)
            madvise(p, rounded, MADV_HUGEPAGE); /* a hint: failure is harmless */
        return p;
    }
    size_t rounded = (n + 63) & ~(size_t)63;
    return aligned_alloc(64, rounded ? rounded : 64);
}

void rt_dataset_free(rt_dataset *ds)
{
    if (!ds)
        return;
    free(ds->x);
    free(ds->labels);
    free(ds->targets);
    free(ds->answer);
    for (int i = 0; i < ds->n_class_names; i++)
        free(ds->class_names[i]);
    free(ds->class_names);
    free(ds->norm_shift);
    free(ds->norm_scale);
    free(ds->about);
    rt_array_free(ds->mapped);
    free(ds->mapped);
    free(ds->mapped_rows);
    memset(ds, 0, sizeof *ds);
}

void rt_dataset_row(const rt_dataset *ds, size_t i, float *out)
{
    size_t f = (size_t)ds->features;
    if (ds->x) {
        memcpy(out, ds->x + i * f, f * sizeof(float));
        return;
    }
    size_t row = ds->mapped_rows ? ds->mapped_rows[i] : i;
    rt_array_floats(ds->mapped, row * f, f, out);
    if (!ds->norm_n)
        return;
    size_t per = f / (size_t)ds->norm_n;
    if (per == 1) { /* per feature: one loop the compiler vectorises */
        const float *shift = ds->norm_shift, *scale = ds->norm_scale;
        for (size_t j = 0; j < f; j++)
            out[j] = (out[j] - shift[j]) * scale[j];
        return;
    }
    for (size_t g = 0, j = 0; g < (size_t)ds->norm_n; g++) {
        float shift = ds->norm_shift[g], scale = ds->norm_scale[g];
        for (size_t end = j + per; j < end; j++)
            out[j] = (out[j] - shift) * scale;
    }
}
