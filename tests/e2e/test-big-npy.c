/* Sets read in place from their files. A set larger than a worker should
 * copy: a 2 GiB float32 .npy trained on 4 workers in sync mode for about
 * 300 steps, while no worker's anonymous memory (RssAnon) grows by more
 * than 64 MiB beyond what it was before the data was opened. Each worker
 * maps the file and reads its shard in place; what grows is its labels,
 * row lists, loader ring and model. Also: a worker that cannot read the
 * file is named, and a seed trains the same model again though each
 * worker reads its own shard.
 *
 * The big file is sparse (a header, its first MiB, ftruncate) so that
 * writing it takes no time, and lives in the test's directory, which
 * teardown removes whether the test passed or not. --normalize none: each
 * worker reads only its shards; the standard normalisation would read the
 * whole file three times on every worker (seconds here, and the same
 * memory). */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "e2e.h"
#include "e2e_train.h"
#include "tcommon.h"

#define FEATURES  784
#define ROW_BYTES ((size_t)FEATURES * 4)
#define FILE_MIB  2048
#define WORKERS   4
#define GROWTH_MAX_KIB (64L * 1024)

static void big_setup(void)
{
    setenv("OPENBLAS_NUM_THREADS", "1", 1);
    e2e_setup();
}

TestSuite(e2e_big_npy, .init = big_setup, .fini = e2e_teardown, .timeout = 240);

/* An .npy header of version 1 for `descr` and the shape (n) or (n, f),
 * padded to a multiple of 64 bytes as NumPy writes it. */
static size_t npy_header(char *buf, size_t cap, const char *descr, size_t n, int f)
{
    char dict[256];
    int len = f ? snprintf(dict, sizeof dict,
                           "{'descr': '%s', 'fortran_order': False, 'shape': (%zu, %d), }",
                           descr, n, f)
                : snprintf(dict, sizeof dict,
                           "{'descr': '%s', 'fortran_order': False, 'shape': (%zu,), }",
                           descr, n);
    size_t total = (10 + (size_t)len + 1 + 63) / 64 * 64;
    cr_assert(total <= cap);
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    buf[8] = (char)((total - 10) & 0xff);
    buf[9] = (char)((total - 10) >> 8);
    memcpy(buf + 10, dict, (size_t)len);
    memset(buf + 10 + len, ' ', total - 10 - (size_t)len - 1);
    buf[total - 1] = '\n';
    return total;
}

/* x: n rows of FEATURES float32, sparse; y: their labels 0..9. */
static size_t write_set(const char *xpath, const char *ypath)
{
    size_t n = ((size_t)FILE_MIB << 20) / ROW_BYTES;
    char hdr[128];
    size_t h = npy_header(hdr, sizeof hdr, "<f4", n, FEATURES);
    int fd = open(xpath, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    cr_assert(fd >= 0);
    cr_assert(write(fd, hdr, h) == (ssize_t)h);
    cr_assert(ftruncate(fd, (off_t)(h + n * ROW_BYTES)) == 0);
    /* Numbers in the first MiB, zeros (a hole) after: one extent, which
     * the file system frees at once (many small ones took a minute to
     * discard here). */
    static float head[(1 << 20) / sizeof(float)];
    for (size_t i = 0; i < sizeof head / sizeof *head; i++)
        head[i] = (float)(i % 7) * 0.25f;
    cr_assert(pwrite(fd, head, sizeof head, (off_t)h) == (ssize_t)sizeof head);
    cr_assert(close(fd) == 0);

    int32_t *y = malloc(n * sizeof *y);
    cr_assert(y);
    for (size_t i = 0; i < n; i++)
        y[i] = (int32_t)(i % 10);
    h = npy_header(hdr, sizeof hdr, "<i4", n, 0);
    FILE *f = fopen(ypath, "wb");
    cr_assert(f && fwrite(hdr, 1, h, f) == h && fwrite(y, sizeof *y, n, f) == n);
    cr_assert(fclose(f) == 0);
    free(y);
    return n;
}

static long rss_anon_kib(pid_t pid)
{
    return tcom_status_kib((int)pid, "RssAnon");
}

Test(e2e_big_npy, a_2_gib_npy_trains_on_4_workers_without_growing_anonymous_memory)
{
#ifdef __SANITIZE_ADDRESS__
    /* ASan keeps freed memory in a quarantine (256 MiB by default), which
     * RssAnon counts (+75 MiB here): the workers, which inherit this
     * environment, get a small one, so that the bound measures ferry's
     * memory rather than the sanitizer's. */
    const char *asan = getenv("ASAN_OPTIONS");
    char opts[1024];
    snprintf(opts, sizeof opts, "%s%squarantine_size_mb=1", asan ? asan : "",
             asan && asan[0] ? ":" : "");
    setenv("ASAN_OPTIONS", opts, 1);
#endif
    e2e_start(WORKERS);
    const char *xpath = e2e_write_file("big-x.npy", "");
    const char *ypath = e2e_write_file("big-y.npy", "");
    size_t n = write_set(xpath, ypath);

    pid_t pid[WORKERS];
    long before[WORKERS], peak[WORKERS];
    for (int r = 0; r < WORKERS; r++) {
        pid[r] = e2e_worker_pid_file(r);
        cr_assert(pid[r] > 0, "no pid for worker %d", r);
        before[r] = peak[r] = rss_anon_kib(pid[r]);
        cr_assert(before[r] > 0, "worker %d's RssAnon", r);
    }
    /* 90% of the samples train (the rest is the test split): a global
     * batch of 2048 makes about 300 steps of one epoch. */
    char out[600], err[600];
    e2e_next_outputs(out, err);
    pid_t run = e2e_spawn("submit", e2e_local_module("softmax.so"), "--data", xpath,
                          "--labels", ypath, "--normalize", "none", "--epochs", "1",
                          "--batch", "2048", "--lr", "0.01", "--json", NULL);
    int status = -1;
    for (double end = e2e_now_ms() + 200000; e2e_now_ms() < end;) {
        for (int r = 0; r < WORKERS; r++) {
            long kib = rss_anon_kib(pid[r]);
            peak[r] = kib > peak[r] ? kib : peak[r];
        }
        if ((status = e2e_wait_exit(run, 0)) != -1)
            break;
        e2e_sleep_ms(20);
    }
    char *o = e2e_slurp(out), *e = e2e_slurp(err);
    cr_assert_eq(status, 0, "the run failed (%d):\nstdout:\n%s\nstderr:\n%s\n%s", status, o,
                 e, e2e_logs());
    cr_assert(e2e_json_is(o, "params_identical", "true", false), "%s", o);
    /* The epoch ran whole: its line, and a finite loss from its steps. */
    size_t held_out = (size_t)(0.1 * (double)n + 0.5), steps = (n - held_out + 2047) / 2048;
    cr_log_info("%zu samples of %d float32 (%d MiB) on %d workers: %zu steps, %.0f samples/s",
                n, FEATURES, FILE_MIB, WORKERS, steps, e2e_json_number(o, "samples_per_s"));
    cr_assert(e2e_has(e, "epoch 1/1"), "%s", e);
    double loss = e2e_json_number(o, "train_loss");
    cr_assert(loss > 0 && loss < 10, "train loss %g:\n%s", loss, o);
    for (int r = 0; r < WORKERS; r++) {
        long grown = peak[r] - before[r];
        cr_log_info("worker %d: RssAnon %ld KiB before, %ld KiB at most (+%ld KiB)", r,
                    before[r], peak[r], grown);
        cr_expect(grown <= GROWTH_MAX_KIB,
                  "worker %d's RssAnon grew by %ld KiB (from %ld KiB) for a %d MiB file", r,
                  grown, before[r], FILE_MIB);
    }
    free(o);
    free(e);
}

/* A submit on `path` fails, its error naming a worker, the path and
 * `why`. */
static void expect_unreadable(const char *path, const char *why)
{
    e2e_run r;
    e2e_ferry(&r, 60000, "submit", e2e_local_module("softmax.so"), "--data", path,
              "--epochs", "1", NULL);
    cr_assert(r.status != 0, "%s trained:\n%s", path, r.out);
    cr_assert(e2e_has(r.err, "worker ") && e2e_has(r.err, path) && e2e_has(r.err, why),
              "the error does not name the worker, the path and why (%s):\n%s", why, r.err);
    cr_log_info("%s", r.err);
    e2e_run_fini(&r);
}

/* Every worker reads the file itself: one that cannot is named, with the
 * path and the reason, in the submit's error. */
Test(e2e_big_npy, a_worker_that_cannot_read_the_data_is_named_with_the_path_and_why)
{
    e2e_start(2);
    const char *path = e2e_write_file("gone.npy", "");
    cr_assert(unlink(path) == 0);
    expect_unreadable(path, "No such file");
    /* Something there that is no file: a FIFO, which must not block. */
    cr_assert(mkfifo(path, 0600) == 0);
    expect_unreadable(path, "regular file");
}

/* The params_sha256 of a sync run of softmax on the .npy pair. */
static char *run_sha(const char *x, const char *y, const char *seed)
{
    e2e_run r;
    e2e_ferry(&r, 120000, "submit", e2e_local_module("softmax.so"), "--data", x, "--labels",
              y, "--epochs", "2", "--batch", "64", "--seed", seed, "--json", NULL);
    E2E_EXPECT(&r, 0);
    cr_assert(e2e_json_is(r.out, "params_identical", "true", false), "%s", r.out);
    const char *sha = strstr(r.out, "\"params_sha256\":\"");
    cr_assert(sha, "%s", r.out);
    char *out = strndup(sha + 17, 64);
    e2e_run_fini(&r);
    return out;
}

/* Each worker reads its own shard of a mapped file in its own shuffle: a
 * seed still trains the same model on the same workers, bit for bit. */
Test(e2e_big_npy, a_mapped_file_trains_the_same_model_again_from_the_same_seed)
{
    e2e_start(2);
    enum { N = 3000, F = 24 };
    static float x[N * F];
    static int32_t y[N];
    for (int i = 0; i < N; i++) {
        y[i] = i % 3;
        for (int j = 0; j < F; j++)
            x[i * F + j] = (float)((i * 31 + j * 7) % 13) * 0.1f + (j == y[i] ? 1.0f : 0.0f);
    }
    const char *paths[2] = {e2e_write_file("s-x.npy", ""), e2e_write_file("s-y.npy", "")};
    const void *data[2] = {x, y};
    size_t lens[2] = {sizeof x, sizeof y};
    for (int k = 0; k < 2; k++) {
        char hdr[128];
        size_t h = npy_header(hdr, sizeof hdr, k ? "<i4" : "<f4", N, k ? 0 : F);
        FILE *f = fopen(paths[k], "wb");
        cr_assert(f && fwrite(hdr, 1, h, f) == h && fwrite(data[k], 1, lens[k], f) == lens[k]);
        cr_assert(fclose(f) == 0);
    }
    char *a = run_sha(paths[0], paths[1], "5"), *b = run_sha(paths[0], paths[1], "5");
    char *c = run_sha(paths[0], paths[1], "6");
    cr_expect_str_eq(a, b, "the same seed trained another model");
    cr_expect_str_neq(a, c, "another seed trained the same model");
    free(a);
    free(b);
    free(c);
}
