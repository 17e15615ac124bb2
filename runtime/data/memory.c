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
    memset(ds, 0, sizeof *ds);
}
