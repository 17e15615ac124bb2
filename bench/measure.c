/* bench — latency, calls/s and payload throughput, baselines alternating
 * with ferry. */
#include "measure.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "data.h"

#define MiB ((size_t)1 << 20)

const int bench_inflight[BENCH_N_INFLIGHT] = {1, 64, 256};
const size_t bench_sizes[BENCH_N_SIZES] = {1 * MiB, 16 * MiB, 64 * MiB};

/* One repetition: writes up to two values (out[0], out[1]). Returns 0 or -1. */
typedef int (*rep_fn)(const bench_env *e, const void *arg, double out[2]);

/* Runs `reps` repetitions of a and b, a first on even ones and b first on
 * odd ones, storing value j of repetition r in va[j * reps + r]. */
static int alternate(const bench_env *e, int reps, rep_fn a, const void *a_arg,
                     double *va, rep_fn b, const void *b_arg, double *vb)
{
    for (int r = 0; r < reps; r++) {
        double x[2] = {0, 0}, y[2] = {0, 0};
        int rc = r % 2 == 0 ? (a(e, a_arg, x) || b(e, b_arg, y))
                            : (b(e, b_arg, y) || a(e, a_arg, x));
        if (rc)
            return -1;
        for (int j = 0; j < 2; j++) {
            va[j * reps + r] = x[j];
            if (vb)
                vb[j * reps + r] = y[j];
        }
    }
    return 0;
}

static int no_rep(const bench_env *e, const void *arg, double out[2])
{
    (void)e, (void)arg, (void)out;
    return 0;
}

static const char *impl_name(int impl)
{
    return impl == BENCH_BARE ? "bare_grpc" : "ferry";
}

/* ---- echo ---------------------------------------------------------------- */

typedef struct echo_arg {
    int impl, inflight, calls;
    double *lat; /* latency runs: calls samples */
} echo_arg;

static double echo_run(const bench_env *e, const echo_arg *a)
{
    return a->impl == BENCH_BARE
               ? bench_bare_run(e->bare, a->inflight, a->calls, a->lat)
               : bench_ferry_echo(e->ferry, a->inflight, a->calls, a->lat);
}

static int latency_rep(const bench_env *e, const void *arg, double out[2])
{
    const echo_arg *a = arg;
    if (echo_run(e, a) < 0)
        return -1;
    bench_sort(a->lat, (size_t)a->calls);
    out[0] = bench_percentile(a->lat, (size_t)a->calls, 50);
    out[1] = bench_percentile(a->lat, (size_t)a->calls, 99);
    return 0;
}

static int rate_rep(const bench_env *e, const void *arg, double out[2])
{
    const echo_arg *a = arg;
    double s = echo_run(e, a);
    if (s < 0)
        return -1;
    out[0] = a->calls / s;
    return 0;
}

int bench_warm_up(const bench_env *e)
{
    for (int impl = BENCH_BARE; impl <= BENCH_FERRY; impl++) {
        echo_arg one = {impl, 1, 200, NULL}, many = {impl, 256, 2000, NULL};
        if (echo_run(e, &one) < 0 || echo_run(e, &many) < 0)
            return -1;
    }
    return 0;
}

int bench_measure_latency(const bench_env *e, bench_results *res)
{
    const bench_opts *o = e->o;
    int reps = o->reps, rc = -1;
    double *v = calloc((size_t)reps * 4, sizeof *v);
    double *lat = calloc((size_t)o->lat_calls, sizeof *lat);
    if (!v || !lat)
        goto out;
    echo_arg a[2] = {{BENCH_BARE, 1, o->lat_calls, lat},
                     {BENCH_FERRY, 1, o->lat_calls, lat}};
    double *vb = v, *vf = v + 2 * reps; /* [p50 reps][p99 reps] each */
    if (alternate(e, reps, latency_rep, &a[0], vb, latency_rep, &a[1], vf) != 0)
        goto out;
    for (int impl = 0; impl < 2; impl++) {
        double *x = impl == BENCH_BARE ? vb : vf;
        res->p50_us[impl] = bench_summarize(x, (size_t)reps);
        res->p99_us[impl] = bench_summarize(x + reps, (size_t)reps);
        const char *params = "\"impl\":\"%s\",\"inflight\":1,\"bytes\":%d,\"calls\":%d";
        bench_emit("latency_p50_us", res->p50_us[impl].median, "us", &res->p50_us[impl],
                   params, impl_name(impl), BENCH_ECHO_BYTES, o->lat_calls);
        bench_emit("latency_p99_us", res->p99_us[impl].median, "us", &res->p99_us[impl],
                   params, impl_name(impl), BENCH_ECHO_BYTES, o->lat_calls);
        bench_log("%-9s latency: p50 %7.1f us, p99 %7.1f us", impl_name(impl),
                  res->p50_us[impl].median, res->p99_us[impl].median);
    }
    rc = 0;
out:
    free(v);
    free(lat);
    return rc;
}

int bench_measure_rates(const bench_env *e, bench_results *res)
{
    const bench_opts *o = e->o;
    int reps = o->reps;
    double *v = calloc((size_t)reps * 4, sizeof *v);
    if (!v)
        return -1;
    for (int k = 0; k < BENCH_N_INFLIGHT; k++) {
        int inflight = bench_inflight[k];
        int calls = inflight == 1 ? o->rate_calls / 4 : o->rate_calls;
        echo_arg a[2] = {{BENCH_BARE, inflight, calls, NULL},
                         {BENCH_FERRY, inflight, calls, NULL}};
        double *vb = v, *vf = v + 2 * reps;
        if (alternate(e, reps, rate_rep, &a[0], vb, rate_rep, &a[1], vf) != 0) {
            free(v);
            return -1;
        }
        for (int impl = 0; impl < 2; impl++) {
            bench_summary *s = &res->cps[impl][k];
            *s = bench_summarize(impl == BENCH_BARE ? vb : vf, (size_t)reps);
            bench_emit("calls_per_s", s->median, "calls/s", s,
                       "\"impl\":\"%s\",\"inflight\":%d,\"bytes\":%d,\"calls\":%d",
                       impl_name(impl), inflight, BENCH_ECHO_BYTES, calls);
            bench_log("%-9s %3d in flight: %8.0f calls/s (min %.0f, max %.0f)",
                      impl_name(impl), inflight, s->median, s->min, s->max);
        }
    }
    free(v);
    return 0;
}

/* ---- payloads ------------------------------------------------------------ */

typedef struct payload_arg {
    size_t len;
    int calls; /* back to back, per repetition */
    rpc_codec codec;
    bench_data_kind kind;
    uint64_t *wire_len;
} payload_arg;

static int tcp_rep(const bench_env *e, const void *arg, double out[2])
{
    const payload_arg *a = arg;
    double total = 0;
    for (int i = 0; i < a->calls; i++) {
        double s = bench_tcp_send(e->tcp, e->data[a->kind], a->len);
        if (s < 0)
            return -1;
        total += s;
    }
    out[0] = (double)a->len * a->calls / total / 1e6;
    return 0;
}

static int ferry_rep(const bench_env *e, const void *arg, double out[2])
{
    const payload_arg *a = arg;
    double s = bench_ferry_sink(e->ferry, e->data[a->kind], a->len, a->codec, a->calls,
                                a->wire_len);
    if (s < 0)
        return -1;
    out[0] = (double)a->len * a->calls / s / 1e6;
    return 0;
}

static const char *codec_name(rpc_codec c)
{
    return c == RPC_CODEC_LZ4 ? "lz4" : "raw";
}

int bench_measure_payloads(const bench_env *e, bench_results *res)
{
    const bench_opts *o = e->o;
    int reps = o->payload_reps;
    double *v = calloc((size_t)reps * 4, sizeof *v);
    if (!v)
        return -1;
    for (int c = 0; c < BENCH_N_CODECS; c++) {
        rpc_codec codec = c == 0 ? RPC_CODEC_RAW : RPC_CODEC_LZ4;
        for (int k = 0; k < BENCH_N_KINDS; k++) {
            for (int i = 0; i < BENCH_N_SIZES; i++) {
                size_t len = bench_sizes[i];
                size_t n = o->payload_bytes_per_rep / len;
                uint64_t wire = 0;
                payload_arg fa = {len, n ? (int)n : 1, codec, (bench_data_kind)k, &wire};
                payload_arg ta = fa;
                ta.wire_len = NULL;
                /* Raw TCP is the baseline for raw random data only. */
                bool with_tcp = c == 0 && k == BENCH_DATA_RANDOM;
                double out[2];
                /* Warm-up: the receivers' pooled buffers of this size get
                 * touched, and lz4's scratch buffers allocated. */
                payload_arg warm = fa;
                warm.calls = 1;
                if (ferry_rep(e, &warm, out) != 0 ||
                    (with_tcp && tcp_rep(e, &warm, out) != 0))
                    goto fail;
                double *vf = v, *vt = v + 2 * reps;
                if (alternate(e, reps, ferry_rep, &fa, vf, with_tcp ? tcp_rep : no_rep,
                              &ta, vt) != 0)
                    goto fail;
                if (with_tcp) {
                    bench_summary *s = &res->tcp_mbps[i];
                    *s = bench_summarize(vt, (size_t)reps);
                    bench_emit("throughput_MBps", s->median, "MB/s", s,
                               "\"impl\":\"raw_tcp\",\"bytes\":%zu,\"write_size\":%zu,"
                               "\"calls_per_rep\":%d",
                               len, BENCH_TCP_WRITE, ta.calls);
                    bench_log(
                        "raw tcp   %-3s %-8s %9zu B: %7.1f MB/s (min %.1f, max %.1f)", "",
                        "", len, s->median, s->min, s->max);
                }
                bench_summary *s = &res->mbps[c][k][i];
                *s = bench_summarize(vf, (size_t)reps);
                double ratio = wire ? (double)len / (double)wire : 0;
                if (codec == RPC_CODEC_LZ4)
                    res->lz4_ratio[k][i] = ratio;
                bench_emit("throughput_MBps", s->median, "MB/s", s,
                           "\"impl\":\"ferry\",\"codec\":\"%s\",\"data\":\"%s\","
                           "\"bytes\":%zu,\"wire_bytes\":%llu,\"calls_per_rep\":%d",
                           codec_name(codec), bench_data_name((bench_data_kind)k), len,
                           (unsigned long long)wire, fa.calls);
                bench_log("ferry     %-3s %-8s %9zu B: %7.1f MB/s (min %.1f, max %.1f), "
                          "wire ratio %.2f",
                          codec_name(codec), bench_data_name((bench_data_kind)k), len,
                          s->median, s->min, s->max, ratio);
            }
        }
    }
    free(v);
    return 0;
fail:
    free(v);
    return -1;
}
