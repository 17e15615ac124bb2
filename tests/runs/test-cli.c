/* tests/runs — `ferry submit` records each run, `ferry runs` lists them and
 * `ferry plot` draws them through gnuplot, refusing what it cannot draw. */
#include "e2e.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

TestSuite(runs_cli, .init = e2e_setup, .fini = e2e_teardown, .timeout = 180);

/* The first `n` bytes of the file at `path`, or "" when it is not there. */
static const char *head_of(const char *path, size_t n)
{
    static char buf[64];
    memset(buf, 0, sizeof buf);
    FILE *f = fopen(path, "rb");
    if (f) {
        size_t got = fread(buf, 1, n < sizeof buf - 1 ? n : sizeof buf - 1, f);
        buf[got] = '\0';
        fclose(f);
    }
    return buf;
}

static void train(const char *mode)
{
    e2e_run r;
    e2e_ferry(&r, E2E_CMD_MS * 4, "submit", e2e_task("mlp"), "--epochs", "2", "--mode",
              mode, "-q", NULL);
    E2E_EXPECT(&r, 0);
    cr_assert(e2e_has(r.out, "run 20") && e2e_has(r.out, "/runs/20"), "%s", r.out);
    e2e_run_fini(&r);
}

Test(runs_cli, runs_are_listed_and_drawn_side_by_side)
{
    e2e_start(2);
    train("sync");
    train("async");
    e2e_run r;
    e2e_ferry(&r, E2E_CMD_MS, "runs", NULL);
    E2E_EXPECT(&r, 0);
    cr_assert(e2e_has(r.out, "finished") && e2e_has(r.out, "sync x2") &&
                  e2e_has(r.out, "async x2") && e2e_has(r.out, "epochs 2/2"),
              "%s", r.out);
    e2e_run_fini(&r);

    char png[600], svg[600];
    snprintf(png, sizeof png, "%s/curves.png", e2e_home);
    snprintf(svg, sizeof svg, "%s/curves.svg", e2e_home);
    e2e_ferry(&r, E2E_CMD_MS, "runs", "--json", NULL);
    E2E_EXPECT(&r, 0);
    char first[128] = "";
    const char *id = strstr(r.out, "{\"id\":\"");
    cr_assert(id && sscanf(id + 7, "%127[^\"]", first) == 1, "%s", r.out);
    cr_assert(e2e_has(r.out, "\"status\":\"finished\"") &&
                  e2e_has(r.out, "\"epochs_done\":2"),
              "%s", r.out);
    e2e_run_fini(&r);

    e2e_ferry(&r, E2E_CMD_MS, "plot", first, "last", "--out", png, "--size", "800x500",
              NULL);
    E2E_EXPECT(&r, 0);
    cr_assert(e2e_has(r.out, "2 runs drawn"), "%s", r.out);
    /* a PNG of the size asked for: its IHDR's width and height, big-endian */
    const unsigned char *h = (const unsigned char *)head_of(png, 24);
    cr_assert(!memcmp(h, "\x89PNG\r\n\x1a\n", 8), "not a PNG: %s", png);
    unsigned w =
        (unsigned)h[16] << 24 | (unsigned)h[17] << 16 | (unsigned)h[18] << 8 | h[19];
    unsigned ht =
        (unsigned)h[20] << 24 | (unsigned)h[21] << 16 | (unsigned)h[22] << 8 | h[23];
    cr_assert(w == 800 && ht == 500, "%ux%u", w, ht);
    struct stat st;
    cr_assert(stat(png, &st) == 0 && st.st_size > 10000, "a near-empty picture");
    e2e_run_fini(&r);
    e2e_ferry(&r, E2E_CMD_MS, "plot", "--last", "2", "-o", svg, NULL);
    E2E_EXPECT(&r, 0);
    cr_assert(e2e_has(r.out, "2 runs drawn"), "%s", r.out);
    cr_assert(e2e_has(head_of(svg, 60), "<?xml") || e2e_has(head_of(svg, 60), "<svg"),
              "not an SVG: %s", head_of(svg, 60));
    e2e_run_fini(&r);
}

Test(runs_cli, a_failed_run_is_recorded_with_why)
{
    e2e_start(1);
    e2e_run r;
    e2e_ferry(&r, E2E_CMD_MS, "submit", e2e_task("mlp"), "--mode", "sync", "--workers",
              "3", NULL);
    E2E_EXPECT(&r, 1);
    e2e_run_fini(&r);
    e2e_ferry(&r, E2E_CMD_MS, "runs", NULL);
    E2E_EXPECT(&r, 0);
    cr_assert(e2e_has(r.out, " failed ") && e2e_has(r.out, "the cluster has 1 worker"),
              "%s", r.out);
    e2e_run_fini(&r);
    /* nothing to draw */
    e2e_ferry(&r, E2E_CMD_MS, "plot", "last", NULL);
    E2E_EXPECT(&r, 1);
    cr_assert(e2e_has(r.err, "recorded no epoch yet: nothing to draw"), "%s", r.err);
    e2e_run_fini(&r);
}

Test(runs_cli, plot_refuses_what_it_cannot_draw)
{
    e2e_run r;
    e2e_ferry(&r, E2E_CMD_MS, "runs", NULL);
    E2E_EXPECT(&r, 0);
    cr_assert(e2e_has(r.out, "no runs recorded"), "%s", r.out);
    e2e_run_fini(&r);
    e2e_ferry(&r, E2E_CMD_MS, "plot", "nosuch", NULL);
    E2E_EXPECT(&r, 1);
    cr_assert(e2e_has(r.err, "nosuch: no such run"), "%s", r.err);
    e2e_run_fini(&r);
    e2e_ferry(&r, E2E_CMD_MS, "plot", "last", "--out", "curves.pdf", NULL);
    E2E_EXPECT(&r, 2);
    cr_assert(e2e_has(r.err, "ending in .png or .svg"), "%s", r.err);
    e2e_run_fini(&r);
    e2e_ferry(&r, E2E_CMD_MS, "plot", "--last", "1", NULL);
    E2E_EXPECT(&r, 1);
    cr_assert(e2e_has(r.err, "--last 1: 0 runs recorded"), "%s", r.err);
    e2e_run_fini(&r);
    e2e_ferry(&r, E2E_CMD_MS, "plot", "--last", "1", "last", NULL); /* one or the other */
    E2E_EXPECT(&r, 2);
    e2e_run_fini(&r);
    e2e_ferry(&r, E2E_CMD_MS, "plot", "last", "--size", "20x9000", NULL);
    E2E_EXPECT(&r, 2);
    e2e_run_fini(&r);

    /* a record broken by hand, and a missing gnuplot */
    char dir[600], path[700];
    mkdir(e2e_home, 0700); /* no cluster made it */
    snprintf(dir, sizeof dir, "%s/runs", e2e_home);
    mkdir(dir, 0700);
    snprintf(dir, sizeof dir, "%s/runs/20260101-000000-hand-0000", e2e_home);
    cr_assert_eq(mkdir(dir, 0700), 0);
    snprintf(path, sizeof path, "%s/run.json", dir);
    FILE *f = fopen(path, "w");
    fputs("{\"options\":{\"epochs\":1},\"pid\":1,\"began\":1}\n", f);
    fclose(f);
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    f = fopen(path, "w");
    fputs("{\"event\":\"epoch\",\"epoch\":1,\"step\":9,\"wall_s\":1,\"train_loss\":1,"
          "\"test_loss\":1,\"test_accuracy\":0.5,\"samples_per_s\":9}\n{oops\n",
          f);
    fclose(f);
    e2e_ferry(&r, E2E_CMD_MS, "plot", "last", NULL);
    E2E_EXPECT(&r, 1);
    cr_assert(e2e_has(r.err, "metrics.jsonl: line 2: "), "%s", r.err);
    e2e_run_fini(&r);

    f = fopen(path, "w"); /* mended */
    fputs("{\"event\":\"epoch\",\"epoch\":1,\"step\":9,\"wall_s\":1,\"train_loss\":1,"
          "\"test_loss\":1,\"test_accuracy\":0.5,\"samples_per_s\":9}\n",
          f);
    fclose(f);
    cr_assert_eq(setenv("FERRY_GNUPLOT", "ferry-no-such-gnuplot", 1), 0);
    e2e_ferry(&r, E2E_CMD_MS, "plot", "last", NULL);
    unsetenv("FERRY_GNUPLOT");
    E2E_EXPECT(&r, 1);
    cr_assert(e2e_has(r.err, "ferry-no-such-gnuplot is not installed") &&
                  e2e_has(r.err, "apt install gnuplot-nox"),
              "%s", r.err);
    e2e_run_fini(&r);
}

Test(runs_cli, json_names_the_record_it_wrote)
{
    e2e_start(1);
    e2e_run r;
    e2e_ferry(&r, E2E_CMD_MS * 2, "submit", e2e_task("linreg"), "--epochs", "1", "--json",
              NULL);
    E2E_EXPECT(&r, 0);
    char id[128] = "", dir[700];
    const char *at = strstr(r.out, "\"run\":\"");
    cr_assert(at && sscanf(at + 7, "%127[^\"]", id) == 1, "%s", r.out);
    e2e_run_fini(&r);
    snprintf(dir, sizeof dir, "%s/runs/%s/metrics.jsonl", e2e_home, id);
    cr_assert(e2e_has(head_of(dir, 40), "{\"event\":\"started\""), "%s: %s", dir,
              head_of(dir, 40));
    e2e_ferry(&r, E2E_CMD_MS, "runs", NULL);
    E2E_EXPECT(&r, 0);
    /* a regression: a loss, no accuracy */
    cr_assert(e2e_has(r.out, id) && e2e_has(r.out, "test_loss") &&
                  !e2e_has(r.out, "test_accuracy"),
              "%s", r.out);
    e2e_run_fini(&r);
}
