/* Checkpoints and resume through `ferry submit`: a run continued from a
 * checkpoint ends with the parameters of the run it continues, bit for
 * bit; damaged and foreign files are skipped, each named with why; a
 * writer killed mid-write leaves the previous checkpoint whole; --keep;
 * `ferry checkpoint show`. linreg: 64 steps an epoch, a tenth of a second. */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "e2e.h"
#include "e2e_ckpt.h"
#include "runtime/train/ckpt_file.h"

TestSuite(e2e_checkpoint, .init = e2e_setup, .fini = e2e_teardown, .timeout = 300);

static void params_sha(const e2e_run *r, char sha[65])
{
    const char *at = strstr(r->out, "\"params_sha256\":\"");
    cr_assert(at && strspn(at + 17, "0123456789abcdef") == 64, "%s", r->out);
    memcpy(sha, at + 17, 64);
    sha[64] = '\0';
}

static char *path_in(const char *dir, uint64_t steps)
{
    char name[64];
    rt_ckpt_name(steps, name, sizeof name);
    char *p = malloc(strlen(dir) + sizeof name + 2);
    cr_assert(p);
    sprintf(p, "%s/%s", dir, name);
    return p;
}

/* Copies checkpoint `steps` of `from` into `to`, its bytes as they are. */
static void copy(const char *from, const char *to, uint64_t steps)
{
    char *src = path_in(from, steps), *dst = path_in(to, steps);
    size_t len = e2e_ckpt_file_size(src);
    char *b = e2e_slurp(src);
    cr_assert(b, "%s", src);
    e2e_ckpt_put(dst, b, len);
    free(b);
    free(src);
    free(dst);
}

/* The whole linreg run of `epochs` epochs on `workers`, its checkpoints
 * (every `every`, all kept) in `dir`: its final parameters' SHA-256. */
static void full_run(const char *workers, const char *epochs, const char *every,
                     const char *optimizer, const char *dir, char sha[65])
{
    e2e_run r;
    e2e_ferry(&r, 120000, "submit", e2e_task("linreg"), "--workers", workers, "--epochs",
              epochs, "--seed", "7", "--optimizer", optimizer, "--json", "--keep", "1000",
              "--checkpoint-dir", dir, "--checkpoint-every", every, NULL);
    E2E_EXPECT(&r, 0);
    cr_assert(e2e_has(r.err, "checkpoint written: "), "%s", r.err);
    params_sha(&r, sha);
    e2e_run_fini(&r);
}

/* The same run continued from `dir`: its final parameters' SHA-256. */
static void resumed_run(const char *workers, const char *epochs, const char *optimizer,
                        const char *dir, char sha[65], e2e_run *r)
{
    e2e_ferry(r, 120000, "submit", e2e_task("linreg"), "--workers", workers, "--epochs",
              epochs, "--seed", "7", "--optimizer", optimizer, "--json", "--resume", dir,
              NULL);
    E2E_EXPECT(r, 0);
    params_sha(r, sha);
}

static void expect_bit_identical(const char *workers, const char *optimizer)
{
    char full[65], again[65];
    const char *all = e2e_ckpt_dir_of(optimizer[0] == 's' ? "all-sgd" : "all-adam");
    full_run(workers, "3", "10", optimizer, all, full);
    /* Step 90 is in the second epoch (64 steps each): mid-epoch. */
    char *p = path_in(all, 90), why[256];
    rt_ckpt_file f;
    cr_assert_eq(rt_ckpt_read(p, &f, why, sizeof why), 0, "%s: %s", p, why);
    cr_assert(f.h.epoch == 1 && f.h.epoch_step == 26, "epoch %llu step %llu",
              (unsigned long long)f.h.epoch, (unsigned long long)f.h.epoch_step);
    rt_ckpt_file_free(&f);
    free(p);
    char name[64];
    snprintf(name, sizeof name, "from-90-%s-%s", workers, optimizer);
    const char *from = e2e_ckpt_dir_of(name);
    copy(all, from, 90);
    e2e_run r;
    resumed_run(workers, "3", optimizer, from, again, &r);
    cr_assert(e2e_has(r.err, "continuing from ") && e2e_has(r.err, "epoch 2/3") &&
                  !e2e_has(r.err, "epoch 1/3") && !e2e_has(r.err, "note:"),
              "%s", r.err);
    e2e_run_fini(&r);
    cr_assert_str_eq(again, full, "continued from step 90 on %s worker(s), %s", workers,
                     optimizer);
    /* From an epoch's end: step 128, the end of the second. */
    snprintf(name, sizeof name, "from-128-%s-%s", workers, optimizer);
    const char *all2 =
        e2e_ckpt_dir_of(optimizer[0] == 's' ? "all-sgd-64" : "all-adam-64");
    full_run(workers, "3", "64", optimizer, all2, full);
    from = e2e_ckpt_dir_of(name);
    copy(all2, from, 128);
    resumed_run(workers, "3", optimizer, from, again, &r);
    cr_assert(e2e_has(r.err, "epoch 3/3") && !e2e_has(r.err, "epoch 2/3"), "%s", r.err);
    e2e_run_fini(&r);
    /* The continued run wrote its own there: its run is over. */
    e2e_ferry(&r, E2E_CMD_MS, "submit", e2e_task("linreg"), "--workers", workers,
              "--epochs", "3", "--seed", "7", "--optimizer", optimizer, "--resume", from,
              NULL);
    cr_assert_eq(r.status, 2, "%s", r.err);
    cr_assert(e2e_has(r.err, "has finished 3 epochs, and the run is of 3: give --epochs "
                             "more than 3"),
              "%s", r.err);
    e2e_run_fini(&r);
    cr_assert_str_eq(again, full, "continued from step 128 on %s worker(s)", workers);
}

Test(e2e_checkpoint, a_resumed_sync_run_ends_bit_identical_on_two_workers)
{
    e2e_start(2);
    expect_bit_identical("2", "sgd");
    expect_bit_identical("2", "adam");
}

Test(e2e_checkpoint, a_resumed_run_ends_bit_identical_on_one_worker)
{
    e2e_start(1);
    expect_bit_identical("1", "adam");
}

/* A checkpoint of linreg's header and the given changes, with a checksum
 * that holds: only what it says makes it foreign. */
static void forge(const char *path, const char *model, uint64_t params)
{
    char why[256];
    rt_ckpt_file f;
    char *src = path_in(e2e_ckpt_dir_of("good"), 64);
    cr_assert_eq(rt_ckpt_read(src, &f, why, sizeof why), 0, "%s", why);
    rt_ckpt_head h = f.h;
    h.model = (char *)model;
    h.params = params;
    uint8_t *b;
    size_t len;
    cr_assert_eq(rt_ckpt_encode(&h, f.state, f.optim, &b, &len), 0);
    e2e_ckpt_put(path, b, len);
    free(b);
    rt_ckpt_file_free(&f);
    free(src);
}

Test(e2e_checkpoint, damaged_and_foreign_checkpoints_are_skipped_each_named_with_why)
{
    e2e_start(1);
    char full[65], again[65];
    const char *good = e2e_ckpt_dir_of("good"), *d = e2e_ckpt_dir_of("damaged");
    full_run("1", "2", "64", "sgd", good, full);
    copy(good, d, 64); /* the one to continue from: the first epoch's end */
    char *valid = path_in(good, 128);
    size_t len = e2e_ckpt_file_size(valid);
    char *bytes = e2e_slurp(valid);
    cr_assert(bytes);
    char *trunc = path_in(d, 200), *flip = path_in(d, 300), *empty = path_in(d, 400),
         *other = path_in(d, 500), *count = path_in(d, 600);
    e2e_ckpt_put(trunc, bytes, len / 2);
    bytes[len / 3] ^= 0x10;
    e2e_ckpt_put(flip, bytes, len);
    e2e_ckpt_put(empty, "", 0);
    forge(other, "mlp", 9);
    forge(count, "linreg", 10);
    /* A write that never finished: not a checkpoint's name. */
    char tmp[700];
    snprintf(tmp, sizeof tmp, "%s/checkpoint-000000000999.ckpt.tmp.AbCdEf", d);
    e2e_ckpt_put(tmp, bytes, len / 4);
    e2e_run r;
    resumed_run("1", "2", "sgd", d, again, &r);
    struct {
        const char *file, *why;
    } want[] = {{trunc, "checksum"},
                {flip, "checksum does not match"},
                {empty, "empty"},
                {other, "task 'mlp''s, not 'linreg''s"},
                {count, "10 parameters, the model has 9"}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        char line[1024];
        snprintf(line, sizeof line, "warning: skipping checkpoint %s: ", want[i].file);
        const char *at = strstr(r.err, line);
        cr_assert(at, "no warning for %s:\n%s", want[i].file, r.err);
        const char *eol = strchr(at, '\n');
        cr_assert(eol && memmem(at, (size_t)(eol - at), want[i].why, strlen(want[i].why)),
                  "%s: not '%s':\n%s", want[i].file, want[i].why, r.err);
    }
    cr_assert(!e2e_has(r.err, ".tmp.AbCdEf"), "%s", r.err);
    char *from = path_in(d, 64);
    char said[800];
    snprintf(said, sizeof said, "continuing from %s", from);
    cr_assert(e2e_has(r.err, said), "%s", r.err);
    e2e_run_fini(&r);
    cr_assert_str_eq(again, full);
    /* The leftover went with the run's first write. */
    cr_assert(access(tmp, F_OK) != 0, "%s is still there", tmp);
    /* Nothing valid: the run does not start. */
    const char *none = e2e_ckpt_dir_of("none");
    copy(d, none, 300);
    e2e_ferry(&r, E2E_CMD_MS, "submit", e2e_task("linreg"), "--resume", none, NULL);
    cr_assert_neq(r.status, 0, "%s", r.err);
    cr_assert(e2e_has(r.err, "no valid checkpoint of task 'linreg' there"), "%s", r.err);
    e2e_run_fini(&r);
    free(from);
    free(bytes);
    free(valid);
    free(trunc);
    free(flip);
    free(empty);
    free(other);
    free(count);
}

Test(e2e_checkpoint, keep_leaves_the_newest_k)
{
    e2e_start(1);
    const char *keep[] = {NULL, "3"};
    for (int k = 0; k < 2; k++) {
        const char *d = e2e_ckpt_dir_of(k ? "keep3" : "keep-default");
        e2e_run r;
        e2e_ferry(&r, 120000, "submit", e2e_task("linreg"), "--epochs", "5",
                  "--checkpoint-dir", d, keep[k] ? "--keep" : NULL, keep[k], NULL);
        E2E_EXPECT(&r, 0);
        e2e_run_fini(&r);
        char **names;
        int n = rt_ckpt_list(d, &names);
        int want = k ? 3 : 2;
        cr_assert_eq(n, want, "%d checkpoints, --keep %s", n, keep[k] ? keep[k] : "");
        for (int i = 0; i < n; i++) {
            char name[64];
            rt_ckpt_name(320 - 64 * (uint64_t)i, name, sizeof name);
            cr_assert_str_eq(names[i], name);
        }
        rt_ckpt_names_free(names, n);
    }
    /* A run that does not continue from them is not mixed in with them. */
    e2e_run r;
    e2e_ferry(&r, E2E_CMD_MS, "submit", e2e_task("linreg"), "--checkpoint-dir",
              e2e_ckpt_dir_of("keep3"), NULL);
    cr_assert_eq(r.status, 2, "%s", r.err);
    cr_assert(e2e_has(r.err, "already holds 3 checkpoints: continue from the newest with "
                             "--resume"),
              "%s", r.err);
    e2e_run_fini(&r);
}

Test(e2e_checkpoint, show_prints_the_header_of_a_whole_file_only)
{
    e2e_start(1);
    const char *d = e2e_ckpt_dir_of("show");
    e2e_run r;
    e2e_ferry(&r, 120000, "submit", e2e_task("linreg"), "--epochs", "2", "--seed", "11",
              "--checkpoint-dir", d, NULL);
    E2E_EXPECT(&r, 0);
    e2e_run_fini(&r);
    char *p = path_in(d, 128);
    e2e_ferry(&r, E2E_CMD_MS, "checkpoint", "show", p, NULL);
    E2E_EXPECT(&r, 0);
    const char *lines[] = {"FERRY-CHECKPOINT 1\n", "\nmodel linreg\n", "\nepoch 2\n",
                           "\nepoch_step 0\n",     "\nsteps 128\n",    "\nseed 11\n",
                           "\noptimizer sgd\n",    "(checked)\n"};
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++)
        cr_assert(e2e_has(r.out, lines[i]), "no '%s' in:\n%s", lines[i], r.out);
    e2e_run_fini(&r);
    size_t len = e2e_ckpt_file_size(p);
    char *b = e2e_slurp(p);
    cr_assert(b);
    e2e_ckpt_put(p, b, len - 1);
    e2e_ferry(&r, E2E_CMD_MS, "checkpoint", "show", p, NULL);
    cr_assert_neq(r.status, 0, "%s", r.out);
    cr_assert(e2e_has(r.err, p) && e2e_has(r.err, "truncated"), "%s", r.err);
    e2e_run_fini(&r);
    free(b);
    free(p);
}

Test(e2e_checkpoint, async_mode_refuses_checkpoints_by_time_saying_so)
{
    e2e_start(2);
    e2e_run r;
    e2e_ferry(&r, E2E_CMD_MS, "submit", e2e_task("linreg"), "--mode", "async",
              "--checkpoint-dir", e2e_ckpt_dir_of("async"), "--checkpoint-every", "5s",
              NULL);
    cr_assert_neq(r.status, 0);
    cr_assert(e2e_has(r.err, "every N global steps or at each epoch's end, not by time"),
              "%s", r.err);
    e2e_run_fini(&r);
}

Test(e2e_checkpoint, a_checkpoint_that_cannot_be_written_fails_the_run_naming_it)
{
    e2e_start(1);
    /* A file where the directory should be. */
    const char *d = e2e_write_file("not-a-dir", "x");
    e2e_run r;
    e2e_ferry(&r, 120000, "submit", e2e_task("linreg"), "--epochs", "2",
              "--checkpoint-dir", d, NULL);
    cr_assert_eq(r.status, 1, "%s", r.err);
    char want[800];
    snprintf(want, sizeof want, "cannot write checkpoint %s/checkpoint-", d);
    cr_assert(e2e_has(r.err, want) && e2e_has(r.err, "Not a directory"), "%s", r.err);
    e2e_run_fini(&r);
}
