/* Memory, copies and sync on the GPU: round trips are exact, allocations are
 * aligned, and memory a model forgot is freed by close (the leak check and
 * a clean close are what a test can see of that). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <ferry/error.h>

#include "tcuda.h"

Test(cuda_memory, round_trips_through_upload_copy_and_download_are_exact)
{
    tc_gpu();
    const size_t n = 1u << 20;
    float *host = malloc(n * sizeof(float)), *back = malloc(n * sizeof(float));
    cr_assert(host && back);
    for (size_t i = 0; i < n; i++)
        host[i] = (float)i * 0.5f - 1e5f;
    float *a = G->ops->alloc(G, n * sizeof(float)),
          *b = G->ops->alloc(G, n * sizeof(float));
    cr_assert(a && b);
    cr_assert_eq((uintptr_t)a % 64, 0);
    cr_assert_eq((uintptr_t)b % 64, 0);
    cr_assert_eq(G->ops->upload(G, a, host, n * sizeof(float)), 0);
    /* The host buffer may be reused as soon as upload returns. */
    memset(host, 0x7f, n * sizeof(float));
    cr_assert_eq(G->ops->copy(G, b, a, n * sizeof(float)), 0);
    cr_assert_eq(G->ops->download(G, back, b, n * sizeof(float)), 0);
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(back[i], (float)i * 0.5f - 1e5f, "[%zu] %g", i, back[i]);
    /* Zero bytes: nothing to do, and no failure. */
    cr_assert_eq(G->ops->upload(G, a, host, 0), 0);
    cr_assert_eq(G->ops->download(G, back, a, 0), 0);
    cr_assert_eq(G->ops->copy(G, b, a, 0), 0);
    cr_assert_eq(G->ops->sync(G), 0);
    G->ops->free(G, a);
    G->ops->free(G, b);
    G->ops->free(G, NULL);
    free(host);
    free(back);
    tc_finish();
}

Test(cuda_memory, close_frees_what_was_never_freed)
{
    tc_gpu();
    /* Many, so the set of live allocations grows and rehashes. */
    void *p[300];
    for (int i = 0; i < 300; i++) {
        p[i] = G->ops->alloc(G, (size_t)(i + 1) * 4096);
        cr_assert_not_null(p[i]);
    }
    for (int i = 0; i < 300; i += 2)
        G->ops->free(G, p[i]);
    G->ops->fill(G, p[1], 1.0f, 2048);
    cr_assert_eq(G->ops->sync(G), 0);
    tc_finish(); /* closes with 150 still allocated */
}

Test(cuda_memory, a_zero_byte_allocation_is_a_pointer_to_free)
{
    tc_gpu();
    void *p = G->ops->alloc(G, 0);
    cr_assert_not_null(p);
    G->ops->free(G, p);
    tc_finish();
}

Test(cuda_memory, freeing_a_foreign_pointer_is_reported_by_sync_not_a_crash)
{
    tc_gpu();
    float *p = G->ops->alloc(G, 256);
    cr_assert_not_null(p);
    G->ops->free(G, p + 1); /* not a pointer alloc returned */
    cr_assert_eq(G->ops->sync(G), FERRY_EINVAL);
    cr_assert_eq(G->ops->sync(G), 0, "reported once");
    G->ops->free(G, p);
    tc_finish();
}

Test(cuda_memory, a_failed_void_op_is_reported_by_the_next_download)
{
    tc_gpu();
    float *p = G->ops->alloc(G, 64 * sizeof(float));
    cr_assert_not_null(p);
    G->ops->gemm(G, false, false, -1, 4, 4, 1.0f, p, p, 0.0f, p);
    float host[4];
    cr_assert_eq(G->ops->download(G, host, p, sizeof host), FERRY_EINVAL);
    cr_assert_eq(G->ops->sync(G), 0);
    G->ops->free(G, p);
    tc_finish();
}
