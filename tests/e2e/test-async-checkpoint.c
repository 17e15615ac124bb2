/* An async run's checkpoints through `ferry submit`: each worker writes the
 * shards it holds; `--resume` continues from the newest set of which every
 * shard is whole, skipping a truncated, bit-flipped, empty, foreign or
 * missing file with a warning naming it and why; a resumed mlp run ends
 * within a point of its uninterrupted twin and starts where the set was
 * written; `ferry checkpoint show` prints a shard's header. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "e2e.h"
#include "e2e_ckpt.h"
#include "e2e_train.h"
#include "runtime/train/ckpt_file.h"

static void async_setup(void)
{
    setenv("OPENBLAS_NUM_THREADS", "1", 1);
    e2e_setup();
}

TestSuite(e2e_async_checkpoint, .init = async_setup, .fini = e2e_teardown,
          .timeout = 400);

static void shard_path(const char *dir, uint64_t steps, int shard, char *buf, size_t len)
{
    char name[96];
    rt_ckpt_shard_name(steps, shard, 2, name, sizeof name);
    snprintf(buf, len, "%s/%s", dir, name);
}

/* Both shards' files of sets 64 and 128 of `from` into `to`. */
static void copy_sets(const char *from, const char *to)
{
    for (uint64_t steps = 64; steps <= 128; steps += 64)
        for (int s = 0; s < 2; s++) {
            char src[700], dst[700];
            shard_path(from, steps, s, src, sizeof src);
            shard_path(to, steps, s, dst, sizeof dst);
            char *b = e2e_slurp(src);
            cr_assert(b, "%s", src);
            e2e_ckpt_put(dst, b, e2e_ckpt_file_size(src));
            free(b);
        }
}

Test(e2e_async_checkpoint, each_holder_writes_its_shard_and_show_prints_it)
{
    e2e_start(2);
    const char *d = e2e_ckpt_dir_of("sets");
    e2e_run r;
    /* linreg: 64 global steps an epoch; --keep 2 keeps epochs 2 and 3. */
    e2e_ferry(&r, 120000, "submit", e2e_task("linreg"), "--mode", "async", "--epochs",
              "3", "--checkpoint-dir", d, NULL);
    E2E_EXPECT(&r, 0);
    e2e_run_fini(&r);
    char **names;
    int n = rt_ckpt_list_shards(d, &names);
    /* The sets of epochs 2 and 3; the holder that wrote set 3 first saw
     * only one whole set newer than epoch 1's, and kept its file. */
    cr_assert(n == 4 || n == 5, "%d shard files in %s", n, d);
    rt_ckpt_names_free(names, n);
    for (uint64_t steps = 128; steps <= 192; steps += 64)
        for (int s = 0; s < 2; s++) {
            char p[700], why[256];
            shard_path(d, steps, s, p, sizeof p);
            rt_ckpt_file f;
            cr_assert_eq(rt_ckpt_read(p, &f, why, sizeof why), 0, "%s: %s", p, why);
            /* Shard s is rank s's (2 shards on 2 workers), its half of the
             * 9 parameters padded to 32 floats. */
            cr_assert_eq(f.h.shard, s);
            cr_assert_eq(f.h.shards, 2);
            cr_assert_eq(f.h.rank, s);
            cr_assert_eq(f.h.shard_hi - f.h.shard_lo, 16);
            cr_assert_eq(f.h.epoch, steps / 64);
            cr_assert(f.h.samples >= steps / 64 * 8192, "%llu samples",
                      (unsigned long long)f.h.samples);
            cr_assert(f.h.shard_version > 0 && f.h.optim_v == 1);
            rt_ckpt_file_free(&f);
        }
    char p[700];
    shard_path(d, 192, 1, p, sizeof p);
    e2e_ferry(&r, E2E_CMD_MS, "checkpoint", "show", p, NULL);
    E2E_EXPECT(&r, 0);
    cr_assert(e2e_has(r.out, "FERRY-CHECKPOINT 2\n") && e2e_has(r.out, "\nshard 1\n") &&
                  e2e_has(r.out, "\nshards 2\n") && e2e_has(r.out, "\nshard_lo 16\n") &&
                  e2e_has(r.out, "(checked)"),
              "%s", r.out);
    e2e_run_fini(&r);
    /* A sync run does not take an async run's files for its own. */
    e2e_ferry(&r, E2E_CMD_MS, "submit", e2e_task("linreg"), "--epochs", "5", "--resume",
              d, NULL);
    E2E_EXPECT(&r, 1);
    cr_assert(e2e_has(r.err, "no valid checkpoint"), "%s", r.err);
    e2e_run_fini(&r);
}

/* The newest set's shard 0 damaged `how`: skipped, named with `why`, and
 * the run continues from the set before it. */
static void expect_skipped(const char *good, const char *name, const char *why,
                           void (*damage)(const char *path))
{
    const char *d = e2e_ckpt_dir_of(name);
    copy_sets(good, d);
    char p[700];
    shard_path(d, 128, 0, p, sizeof p);
    damage(p);
    e2e_run r;
    e2e_ferry(&r, 120000, "submit", e2e_task("linreg"), "--mode", "async", "--epochs",
              "3", "--resume", d, NULL);
    E2E_EXPECT(&r, 0);
    char line[900];
    snprintf(line, sizeof line, "warning: skipping checkpoint %s: ", p);
    cr_assert(e2e_has(r.err, line) && e2e_has(r.err, why), "%s: wanted '%s%s':\n%s", name,
              line, why, r.err);
    cr_assert(e2e_has(r.err, "checkpoint-000000000064.shard-*-of-0002.ckpt (2 shards): 1 "
                             "epochs and 64 steps done"),
              "%s:\n%s", name, r.err);
    /* Progress goes to stdout without --json. */
    cr_assert(e2e_has(r.out, "epoch 2/3") && !e2e_has(r.out, "epoch 1/3"), "%s", r.out);
    e2e_run_fini(&r);
}

static void truncate_it(const char *p)
{
    cr_assert_eq(truncate(p, (off_t)(e2e_ckpt_file_size(p) / 2)), 0);
}

static void flip_a_bit(const char *p)
{
    char *b = e2e_slurp(p);
    size_t len = e2e_ckpt_file_size(p);
    b[len / 2] ^= 0x10;
    e2e_ckpt_put(p, b, len);
    free(b);
}

static void empty_it(const char *p)
{
    e2e_ckpt_put(p, "", 0);
}

static void remove_it(const char *p)
{
    cr_assert_eq(unlink(p), 0);
}

/* Another task's shard, whole and checksummed. */
static void make_foreign(const char *p)
{
    rt_ckpt_file f;
    char why[256];
    cr_assert_eq(rt_ckpt_read(p, &f, why, sizeof why), 0, "%s", why);
    f.h.model = "mlp";
    uint8_t *b;
    size_t len;
    cr_assert_eq(rt_ckpt_encode(&f.h, f.state, f.optim, &b, &len), 0);
    e2e_ckpt_put(p, b, len);
    free(b);
    rt_ckpt_file_free(&f);
}

Test(e2e_async_checkpoint, damaged_foreign_and_missing_shards_are_skipped)
{
    e2e_start(2);
    const char *good = e2e_ckpt_dir_of("good");
    e2e_run r;
    e2e_ferry(&r, 120000, "submit", e2e_task("linreg"), "--mode", "async", "--epochs",
              "2", "--checkpoint-dir", good, NULL);
    E2E_EXPECT(&r, 0);
    e2e_run_fini(&r);
    expect_skipped(good, "truncated", "truncated", truncate_it);
    expect_skipped(good, "flipped", "its checksum does not match its bytes", flip_a_bit);
    expect_skipped(good, "empty", "empty", empty_it);
    expect_skipped(good, "foreign", "it is task 'mlp''s, not 'linreg''s", make_foreign);
    expect_skipped(good, "missing", "it is missing", remove_it);
}

/* Async is not bit-identical; the resumed run must end where its twin
 * does, within a point of accuracy. */
Test(e2e_async_checkpoint, a_resumed_mlp_run_reaches_its_twins_accuracy)
{
    e2e_start(2);
    e2e_run r;
    e2e_ferry(&r, 300000, "submit", e2e_task("mlp"), "--mode", "async", "--epochs", "2",
              "--json", NULL);
    E2E_EXPECT(&r, 0);
    double twin = e2e_json_number(r.out, "test_accuracy");
    e2e_run_fini(&r);
    const char *d = e2e_ckpt_dir_of("mlp");
    e2e_ferry(&r, 300000, "submit", e2e_task("mlp"), "--mode", "async", "--epochs", "1",
              "--checkpoint-dir", d, NULL);
    E2E_EXPECT(&r, 0);
    e2e_run_fini(&r);
    e2e_ferry(&r, 300000, "submit", e2e_task("mlp"), "--mode", "async", "--epochs", "2",
              "--resume", d, "--json", NULL);
    E2E_EXPECT(&r, 0);
    double acc = e2e_json_number(r.out, "test_accuracy");
    cr_log_info("async mlp, 2 epochs: %.4f uninterrupted, %.4f resumed after 1", twin,
                acc);
    /* 60000 samples, global batch 128: the set of epoch 1 is step 469. */
    cr_assert(
        e2e_has(r.err, "shard-*-of-0002.ckpt (2 shards): 1 epochs and 469 steps done"),
        "%s", r.err);
    cr_assert(e2e_has(r.err, "epoch 2/2") && !e2e_has(r.err, "epoch 1/2"), "%s", r.err);
    cr_assert(acc > 0.5 && acc >= twin - 0.01, "resumed %.4f, twin %.4f:\n%s", acc, twin,
              r.err);
    e2e_run_fini(&r);
}
