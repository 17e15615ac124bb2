/* bench/train --timeline, end to end: a sync run of tasks/mlp on two local
 * workers with `--timeline FILE` and the metrics endpoint on (`ferry start
 * --metrics-port`), against the same run on a cluster with both off. Both
 * clusters are up the whole time; one epoch is submitted to each in turn,
 * the order swapped every round, so that a machine that speeds up or slows
 * down moves both sides. As in train_timeline.c, the target is judged on
 * each side's fastest epoch, and the median of the rounds' ratios is
 * printed beside it. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "stats.h"
#include "train_child.h"
#include "train_run.h"
#include "train_timeline.h"

#define TARGET_OVERHEAD 1.03
#define ROUNDS          6
#define QUICK_ROUNDS    2
#define BATCH           128

/* A port P on 127.0.0.1 with P + 1 free too (the two workers' endpoints),
 * or 0. */
static int free_pair(void)
{
    for (int tries = 0; tries < 20; tries++) {
        int s[2] = {socket(AF_INET, SOCK_STREAM, 0), socket(AF_INET, SOCK_STREAM, 0)};
        struct sockaddr_in a = {.sin_family = AF_INET,
                                .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t len = sizeof a;
        int port = 0;
        if (s[0] >= 0 && bind(s[0], (struct sockaddr *)&a, sizeof a) == 0 &&
            getsockname(s[0], (struct sockaddr *)&a, &len) == 0 &&
            ntohs(a.sin_port) < 65535) {
            a.sin_port = htons((uint16_t)(ntohs(a.sin_port) + 1));
            if (s[1] >= 0 && bind(s[1], (struct sockaddr *)&a, sizeof a) == 0)
                port = ntohs(a.sin_port) - 1;
        }
        close(s[0]);
        close(s[1]);
        if (port)
            return port;
    }
    return 0;
}

/* One epoch submitted to the cluster under `home` (with a timeline into
 * `timeline` unless NULL): its step time in ms, or a negative value. */
static double epoch_ms(const char *ferry, const char *so, const char *home,
                       const char *timeline)
{
    const char *args[] = {"submit", so,        "--epochs",
                          "1",      "--batch", "128",
                          "--json", "-q",      timeline ? "--timeline" : NULL,
                          timeline, NULL};
    char json[8192] = "";
    int code = bench_run_ferry(ferry, home, args, json, sizeof json);
    double rate = bench_json_number(json, "samples_per_s");
    if (code != 0 || !(rate > 0)) {
        bench_log("bench/train --timeline: ferry submit exited %d: %s", code, json);
        return -1;
    }
    return BATCH * 1e3 / rate;
}

int bench_train_observe(const char *ferry, const char *so, bool quick)
{
    char home[2][64] = {"/tmp/ferry-bench-observe-off-XXXXXX",
                        "/tmp/ferry-bench-observe-on-XXXXXX"};
    if (!mkdtemp(home[0]) || !mkdtemp(home[1])) {
        bench_log("bench/train --timeline: mkdtemp failed");
        return -1;
    }
    char port[16], timeline[128];
    snprintf(port, sizeof port, "%d", free_pair());
    snprintf(timeline, sizeof timeline, "%s/timeline.json", home[1]);
    const char *start_off[] = {"start", "2", "--base-port", "0", NULL};
    const char *start_on[] = {"start",          "2",  "--base-port", "0",
                              "--metrics-port", port, NULL};
    int rc = 0, missed = -1;
    if (bench_run_ferry(ferry, home[0], start_off, NULL, 0) != 0 ||
        bench_run_ferry(ferry, home[1], start_on, NULL, 0) != 0) {
        bench_log("bench/train --timeline: ferry start 2 failed");
        rc = -1;
    }
    int rounds = quick ? QUICK_ROUNDS : ROUNDS;
    double ms[2][ROUNDS], ratio[ROUNDS];
    /* An untimed epoch each: the workers' data loaded and caches warm. */
    for (int i = 0; i < 2 && rc == 0; i++)
        if (epoch_ms(ferry, so, home[i], i ? timeline : NULL) < 0)
            rc = -1;
    for (int r = 0; r < rounds && rc == 0; r++) {
        for (int k = 0; k < 2 && rc == 0; k++) {
            int i = (r + k) % 2;
            if ((ms[i][r] = epoch_ms(ferry, so, home[i], i ? timeline : NULL)) < 0)
                rc = -1;
        }
        if (rc == 0) {
            ratio[r] = ms[1][r] / ms[0][r];
            bench_log("  round %d: sync step %.3f ms off, %.3f ms with the timeline and "
                      "the metrics endpoint (x%.4f)",
                      r + 1, ms[0][r], ms[1][r], ratio[r]);
        }
    }
    if (rc == 0) {
        const char *p = "\"model\":\"mlp\",\"mode\":\"sync\",\"workers\":2,\"batch\":128";
        bench_summary off = bench_summarize(ms[0], (size_t)rounds);
        bench_summary on = bench_summarize(ms[1], (size_t)rounds);
        bench_summary q = bench_summarize(ratio, (size_t)rounds);
        bench_emit("observe_off_step_ms", off.median, "ms", &off, "%s", p);
        bench_emit("observe_on_step_ms", on.median, "ms", &on, "%s", p);
        bench_emit("observe_overhead_ratio_median", q.median, "x", &q, "%s", p);
        double best = on.min / off.min;
        missed = best > TARGET_OVERHEAD;
        bench_emit("observe_overhead_ratio", best, "x", NULL,
                   "\"of\":\"fastest epochs\",\"on\":\"--timeline and --metrics-port\","
                   "\"target\":%.2f,\"met\":%s,%s",
                   TARGET_OVERHEAD, missed ? "false" : "true", p);
    }
    const char *shutdown[] = {"shutdown", "--grace-ms", "2000", NULL};
    for (int i = 0; i < 2; i++) {
        bench_run_ferry(ferry, home[i], shutdown, NULL, 0);
        bench_remove_tree(home[i]);
    }
    return missed;
}
