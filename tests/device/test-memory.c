/* Memory and vectors: alignment, round trips through upload, download and
 * copy, fill/scale/axpy, and a device that frees what was left on it. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tdevice.h"

Test(memory, alloc_is_64_byte_aligned_and_free_of_null_is_a_no_op)
{
    td_open();
    size_t sizes[] = {0, 1, 3, 64, 65, 4096, 1 << 20};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        char *p = D->ops->alloc(D, sizes[i]);
        cr_assert_not_null(p, "alloc(%zu)", sizes[i]);
        cr_assert_eq((uintptr_t)p % 64, 0, "alloc(%zu) = %p", sizes[i], (void *)p);
        memset(p, 0xab, sizes[i]); /* all of it is usable (ASan checks) */
        D->ops->free(D, p);
    }
    D->ops->free(D, NULL);
    cr_assert_null(D->ops->alloc(D, SIZE_MAX - 8));
    cr_assert_eq(D->ops->sync(D), 0);
    td_finish();
}

Test(memory, upload_download_and_copy_round_trip_bytes)
{
    td_open();
    const size_t n = 10007;
    unsigned char *src = malloc(n), *back = malloc(n);
    cr_assert(src && back);
    for (size_t i = 0; i < n; i++)
        src[i] = (unsigned char)(i * 131 + 7);
    void *a = D->ops->alloc(D, n), *b = D->ops->alloc(D, n);
    cr_assert_eq(D->ops->upload(D, a, src, n), 0);
    cr_assert_eq(D->ops->copy(D, b, a, n), 0);
    memset(a, 0, n); /* b must not alias a */
    cr_assert_eq(D->ops->download(D, back, b, n), 0);
    cr_assert_eq(memcmp(src, back, n), 0);
    /* zero bytes: nothing happens, NULL or not */
    cr_assert_eq(D->ops->upload(D, NULL, NULL, 0), 0);
    cr_assert_eq(D->ops->download(D, NULL, NULL, 0), 0);
    cr_assert_eq(D->ops->copy(D, NULL, NULL, 0), 0);
    D->ops->free(D, a);
    D->ops->free(D, b);
    free(src);
    free(back);
    td_finish();
}

Test(memory, closing_the_device_frees_what_was_left_allocated)
{
    td_open();
    for (int i = 0; i < 10; i++)
        cr_assert_not_null(D->ops->alloc(D, 1000 * (i + 1)));
    void *kept = D->ops->alloc(D, 10);
    D->ops->free(D, D->ops->alloc(D, 20));
    cr_assert_not_null(kept);
    td_finish(); /* LeakSanitizer, in sanitizer builds */
}

Test(vectors, fill_scale_and_axpy_match_the_reference)
{
    td_open();
    const size_t n = 1029;
    uint64_t seed = 9;
    double *x = td_new(n), *y = td_new(n), *want = td_new(n), *got = td_new(n);
    td_rand(x, n, -2, 2, &seed);
    td_rand(y, n, -2, 2, &seed);
    float *dx = td_put(x, n), *dy = td_put(y, n);

    D->ops->fill(D, dx + 1, 2.5f, n - 2); /* bounds: the ends stay */
    td_get(got, dx, n);
    cr_assert_eq(got[0], (double)(float)x[0]);
    cr_assert_eq(got[n - 1], (double)(float)x[n - 1]);
    for (size_t i = 1; i < n - 1; i++)
        cr_assert_eq(got[i], 2.5, "fill at %zu", i);

    float *fx = td_put(x, n);
    D->ops->scale(D, fx, -0.75f, n);
    for (size_t i = 0; i < n; i++)
        want[i] = (double)(float)x[i] * -0.75;
    td_get(got, fx, n);
    td_close(got, want, n, 1e-7, "scale");

    D->ops->axpy(D, dy, 1.5f, fx, n);
    for (size_t i = 0; i < n; i++)
        want[i] = (double)(float)y[i] + 1.5 * want[i];
    td_get(got, dy, n);
    td_close(got, want, n, 1e-6, "axpy");

    free(x);
    free(y);
    free(want);
    free(got);
    td_finish();
}
