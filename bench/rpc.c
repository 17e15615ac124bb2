/* bench/rpc — ferry's RPC layer against two baselines, on loopback.
 *
 *   A      raw TCP: bulk bytes between two sockets (bench/raw_tcp.c)
 *   B      a bare gRPC-core echo, no framework (bench/bare_echo.c)
 *   ferry  rpc_client on a uv loop against an rpc_server (bench/ferry_rpc.c,
 *          bench/ferry_server.c)
 *
 * then ratio lines with their targets. JSON lines on stdout, text on stderr.
 * Every peer is a child process, forked before this process calls
 * grpc_init(). */
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <grpc/grpc.h>

#include "bare_echo.h"
#include "child.h"
#include "data.h"
#include "ferry_rpc.h"
#include "ferry_server.h"
#include "measure.h"
#include "opts.h"
#include "raw_tcp.h"
#include "stats.h"

#define BIG (BENCH_N_SIZES - 1) /* index of 64 MiB in bench_sizes */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: rpc [--quick] [--help]\n"
            "\n"
            "Benchmarks ferry's RPC layer on 127.0.0.1 against raw TCP and a bare\n"
            "gRPC-core echo, and prints one JSON object per line on stdout:\n"
            "latency p50/p99 (1 call in flight, 64 B), calls/s (1, 64, 256 in\n"
            "flight), payload MB/s (1, 16, 64 MiB; raw and lz4; random and\n"
            "gradient-like float32), lz4 ratios, then ratio lines with their\n"
            "targets. Each ferry figure alternates with its baseline, repetition\n"
            "by repetition. Progress and a summary go to stderr.\n"
            "\n"
            "  --quick   fewer calls and repetitions (a smoke run of about ten seconds)\n"
            "  --help    this text\n");
}

static void ratio_line(const char *metric, double value, bool is_min, double target,
                       const char *params, int *missed)
{
    const char *key = is_min ? "target_min" : "target_max";
    bench_emit(metric, value, "ratio", NULL, "%s,\"%s\":%g", params, key, target);
    bool ok = is_min ? value >= target : value <= target;
    if (!ok)
        (*missed)++;
    bench_log("%-26s %6.3f  (%s %g) %s", metric, value, key, target,
              ok ? "met" : "MISSED");
}

static int print_ratios(const bench_results *r)
{
    int missed = 0;
    char params[160];
    const int F = BENCH_FERRY, B = BENCH_BARE, I256 = BENCH_N_INFLIGHT - 1;
    /* Measurements first: the target lines come last. */
    for (int k = 0; k < BENCH_N_KINDS; k++) {
        const char *kind = bench_data_name((bench_data_kind)k);
        bench_emit("lz4_compression_ratio", r->lz4_ratio[k][BIG], "ratio", NULL,
                   "\"data\":\"%s\",\"bytes\":%zu", kind, bench_sizes[BIG]);
        bench_log("lz4 ratio on %-8s %.2f", kind, r->lz4_ratio[k][BIG]);
    }
    snprintf(params, sizeof params, "\"bytes\":%zu,\"codec\":\"raw\",\"data\":\"random\"",
             bench_sizes[BIG]);
    ratio_line("payload_64MiB_vs_raw_tcp",
               r->mbps[0][BENCH_DATA_RANDOM][BIG].median / r->tcp_mbps[BIG].median, true,
               0.8, params, &missed);
    ratio_line("latency_p50_vs_bare", r->p50_us[F].median / r->p50_us[B].median, false,
               1.5, "\"inflight\":1,\"bytes\":64", &missed);
    ratio_line("calls_per_s_256_vs_bare", r->cps[F][I256].median / r->cps[B][I256].median,
               true, 0.8, "\"inflight\":256,\"bytes\":64", &missed);
    ratio_line("calls_per_s_256_vs_own_1", r->cps[F][I256].median / r->cps[F][0].median,
               true, 3.0, "\"inflight\":256,\"bytes\":64", &missed);
    return missed;
}

int main(int argc, char **argv)
{
    bench_opts o = {
        .reps = 7,
        .lat_calls = 2000,
        .rate_calls = 10000,
        .payload_reps = 9,
        .payload_bytes_per_rep = 128 << 20,
    };
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0) {
            o.reps = 3;
            o.lat_calls = 500;
            o.rate_calls = 3000;
            o.payload_reps = 3;
            o.payload_bytes_per_rep = 64 << 20;
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "rpc: unknown argument '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    signal(SIGPIPE, SIG_IGN);
    /* What a ferry daemon does first; set before forking so that the
     * baselines' processes run with the same allocator settings. */
    rpc_tune_malloc();
    uint64_t t_start = bench_now_ns();
    size_t max_len = bench_sizes[BIG];

    /* Every peer is forked before grpc_init() and before the big buffers. */
    bench_tcp tcp;
    bench_child bare_srv = {0}, ferry_srv = {0};
    if (bench_tcp_start(&tcp, max_len) != 0)
        return 1;
    if (bench_bare_server_start(&bare_srv) != 0 ||
        bench_ferry_server_start(&ferry_srv) != 0) {
        bench_child_stop(&bare_srv, 5000);
        bench_tcp_stop(&tcp);
        return 1;
    }
    grpc_init();

    static bench_results res;
    bench_env env = {.o = &o, .tcp = &tcp};
    int rc = -1;
    for (int k = 0; k < BENCH_N_KINDS; k++) {
        env.data[k] = malloc(max_len);
        if (!env.data[k]) {
            fprintf(stderr, "bench/rpc: out of memory\n");
            goto out;
        }
        bench_data_fill(env.data[k], max_len / sizeof(float), (bench_data_kind)k,
                        1 + (uint64_t)k);
    }
    if (bench_tcp_connect(&tcp) != 0 || bench_bare_open(&env.bare, bare_srv.port) != 0 ||
        bench_ferry_open(&env.ferry, ferry_srv.port) != 0)
        goto out;

    if (bench_warm_up(&env) == 0 && bench_measure_latency(&env, &res) == 0 &&
        bench_measure_rates(&env, &res) == 0 && bench_measure_payloads(&env, &res) == 0)
        rc = 0;

out:
    bench_bare_close(env.bare);
    if (bench_ferry_close(env.ferry) != 0)
        rc = -1;
    grpc_shutdown();
    if (bench_tcp_stop(&tcp) != 0 || bench_child_stop(&bare_srv, 5000) != 0 ||
        bench_child_stop(&ferry_srv, 10000) != 0)
        rc = -1;
    for (int k = 0; k < BENCH_N_KINDS; k++)
        free(env.data[k]);
    if (rc != 0) {
        fprintf(stderr, "bench/rpc: failed\n");
        return 1;
    }
    int missed = print_ratios(&res);
    bench_log("bench/rpc: %d target(s) missed; %.1f s", missed,
              (double)(bench_now_ns() - t_start) * 1e-9);
    return 0;
}
