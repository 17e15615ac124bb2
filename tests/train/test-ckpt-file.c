/* The checkpoint file's format (runtime/train/ckpt_file.c) on its own: what
 * is written reads back field for field, and a file cut at any length or
 * with any one bit flipped is refused before a value is used. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ferry/error.h>

#include "runtime/train/ckpt_file.h"

static char dir[] = "/tmp/ferry-ckpt-file-XXXXXX";

static void setup(void)
{
    cr_assert(mkdtemp(dir));
}

static void teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    cr_assert_eq(system(cmd), 0);
}

TestSuite(ckpt_file, .init = setup, .fini = teardown);

static const float state[6] = {1, 2, 3, 4, 5, 6}, optim[4] = {-1, 0.5f, 0.25f, 8};

static void encoded(uint8_t **b, size_t *len)
{
    rt_ckpt_head h = {.model = "linreg",
                      .ferry_version = "1.2.3",
                      .params = 5,
                      .epoch = 3,
                      .epoch_step = 17,
                      .steps = 209,
                      .seed = 18446744073709551615ull,
                      .optimizer = "adam",
                      .lr = 0.001,
                      .rng0 = 42,
                      .state_bytes = sizeof state,
                      .optim_bytes = sizeof optim};
    cr_assert_eq(rt_ckpt_encode(&h, state, optim, b, len), 0);
}

static void put(const char *path, const uint8_t *b, size_t len)
{
    FILE *f = fopen(path, "wb");
    cr_assert(f);
    cr_assert_eq(fwrite(b, 1, len, f), len);
    fclose(f);
}

Test(ckpt_file, what_is_written_reads_back)
{
    uint8_t *b;
    size_t len;
    encoded(&b, &len);
    char path[64], why[256];
    snprintf(path, sizeof path, "%s/a.ckpt", dir);
    put(path, b, len);
    rt_ckpt_file f;
    cr_assert_eq(rt_ckpt_read(path, &f, why, sizeof why), 0, "%s", why);
    cr_assert_str_eq(f.h.model, "linreg");
    cr_assert_str_eq(f.h.optimizer, "adam");
    cr_assert_eq(f.h.epoch, 3);
    cr_assert_eq(f.h.epoch_step, 17);
    cr_assert_eq(f.h.steps, 209);
    cr_assert_eq(f.h.seed, 18446744073709551615ull);
    cr_assert_eq(f.h.lr, 0.001);
    cr_assert_eq(memcmp(f.state, state, sizeof state), 0);
    cr_assert_eq(memcmp(f.optim, optim, sizeof optim), 0);
    cr_assert(strstr(f.text, "\nmodel linreg\n"), "%s", f.text);
    rt_ckpt_file_free(&f);
    free(b);
}

/* `len` bytes of `b` as a file, read back: rt_ckpt_read's answer. */
static int read_back(const uint8_t *b, size_t len)
{
    char path[64], why[256];
    snprintf(path, sizeof path, "%s/x.ckpt", dir);
    put(path, b, len);
    rt_ckpt_file f;
    int rc = rt_ckpt_read(path, &f, why, sizeof why);
    if (rc == 0)
        rt_ckpt_file_free(&f);
    return rc;
}

Test(ckpt_file, a_file_cut_at_any_length_is_refused)
{
    uint8_t *b;
    size_t len;
    encoded(&b, &len);
    cr_assert_eq(read_back(b, len), 0);
    for (size_t n = 0; n < len; n++)
        cr_assert_eq(read_back(b, n), FERRY_ECORRUPT, "cut at %zu of %zu", n, len);
    free(b);
}

Test(ckpt_file, any_one_flipped_bit_is_refused)
{
    uint8_t *b;
    size_t len;
    encoded(&b, &len);
    for (size_t i = 0; i < len; i++) {
        for (int bit = 0; bit < 8; bit++) {
            b[i] ^= (uint8_t)(1u << bit);
            int rc = read_back(b, len);
            b[i] ^= (uint8_t)(1u << bit);
            cr_assert_neq(rc, 0, "byte %zu bit %d", i, bit);
        }
    }
    free(b);
}

Test(ckpt_file, names_sort_as_their_steps_and_leftovers_are_not_checkpoints)
{
    char a[64], z[64];
    rt_ckpt_name(9, a, sizeof a);
    rt_ckpt_name(10, z, sizeof z);
    cr_assert(strcmp(a, z) < 0, "%s %s", a, z);
    cr_assert(rt_ckpt_is_name(z));
    strcat(z, ".tmp.AbCdEf");
    cr_assert(!rt_ckpt_is_name(z));
    uint64_t steps;
    double secs;
    cr_assert_eq(rt_ckpt_parse_every("100", &steps, &secs), 0);
    cr_assert(steps == 100 && secs == 0);
    cr_assert_eq(rt_ckpt_parse_every("30s", &steps, &secs), 0);
    cr_assert(steps == 0 && secs == 30);
    const char *bad[] = {"0", "-3", "1.5", "10m", "s", "1e10", "x"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        cr_assert_eq(rt_ckpt_parse_every(bad[i], &steps, &secs), FERRY_EINVAL, "%s",
                     bad[i]);
}
