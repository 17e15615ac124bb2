/* A worker's figures as Prometheus' text exposition format 0.0.4: a HELP
 * and a TYPE line a family, then its samples. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "metrics.h"
#include "runtime/device/device.h"
#include "runtime/runtime_int.h"

#define MAX_METHODS 32

/* An open_memstream: the text grows as it is written. */
typedef struct out {
    FILE *f;
    int rank;
} out;

static void family(out *o, const char *name, const char *type, const char *help)
{
    fprintf(o->f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* One sample: name{rank="R"[,labels]} value. */
static void sample(out *o, const char *name, const char *labels, double v)
{
    fprintf(o->f, "%s{rank=\"%d\"%s%s} %.17g\n", name, o->rank, labels ? "," : "",
            labels ? labels : "", v);
}

static void rpc_families(out *o, rpc_server *srv)
{
    rpc_method_stats ms[MAX_METHODS];
    size_t n = rpc_server_method_stats(srv, ms, MAX_METHODS);
    if (n > MAX_METHODS)
        n = MAX_METHODS;
    char labels[256];
    family(o, "ferry_rpc_calls_total", "counter",
           "Calls ended, by method and gRPC status.");
    for (size_t i = 0; i < n; i++)
        for (int c = 0; c < RPC_STATUS_CODES; c++) {
            if (!ms[i].calls[c] && c != 0)
                continue; /* OK always, other codes once seen */
            snprintf(labels, sizeof labels, "method=\"%s\",code=\"%s\"", ms[i].name,
                     rpc_status_name(c));
            sample(o, "ferry_rpc_calls_total", labels, (double)ms[i].calls[c]);
        }
    family(o, "ferry_rpc_received_bytes_total", "counter",
           "Request bytes as on the wire, by method.");
    for (size_t i = 0; i < n; i++) {
        snprintf(labels, sizeof labels, "method=\"%s\"", ms[i].name);
        sample(o, "ferry_rpc_received_bytes_total", labels, (double)ms[i].bytes_in);
    }
    family(o, "ferry_rpc_sent_bytes_total", "counter",
           "Reply bytes as on the wire, by method.");
    for (size_t i = 0; i < n; i++) {
        snprintf(labels, sizeof labels, "method=\"%s\"", ms[i].name);
        sample(o, "ferry_rpc_sent_bytes_total", labels, (double)ms[i].bytes_out);
    }
    family(o, "ferry_rpc_call_seconds", "histogram",
           "Call latency, from its arrival to its end, by method.");
    for (size_t i = 0; i < n; i++) {
        uint64_t below = 0;
        for (int b = 0; b <= RPC_LATENCY_BUCKETS; b++) {
            below += ms[i].latency[b];
            char le[32];
            if (b < RPC_LATENCY_BUCKETS)
                snprintf(le, sizeof le, "%g", rpc_latency_bounds_s[b]);
            else
                snprintf(le, sizeof le, "+Inf");
            snprintf(labels, sizeof labels, "method=\"%s\",le=\"%s\"", ms[i].name, le);
            sample(o, "ferry_rpc_call_seconds_bucket", labels, (double)below);
        }
        snprintf(labels, sizeof labels, "method=\"%s\"", ms[i].name);
        sample(o, "ferry_rpc_call_seconds_sum", labels, ms[i].latency_s);
        sample(o, "ferry_rpc_call_seconds_count", labels, (double)below);
    }
}

static void executor_families(out *o, rt_worker *w)
{
    rpc_slots_info si;
    rpc_server_slots(w->srv, &si);
    family(o, "ferry_executor_slots", "gauge",
           "Handler threads that run calls: all of them, busy, and stuck in a call "
           "cancelled long ago.");
    sample(o, "ferry_executor_slots", "state=\"total\"", si.slots);
    sample(o, "ferry_executor_slots", "state=\"busy\"", si.busy);
    sample(o, "ferry_executor_slots", "state=\"stuck\"", si.stuck);
    family(o, "ferry_executor_queued", "gauge", "Calls waiting for a handler thread.");
    sample(o, "ferry_executor_queued", NULL, si.queued);
}

static void device_family(out *o, rt_worker *w)
{
    size_t free_b = 0, total_b = 0;
    /* A query, not work on the device's stream: safe beside a training. */
    const rt_device_ext_t *ext = w->device ? rt_device_ext(w->device) : NULL;
    if (!ext || !ext->mem_info || ext->mem_info(w->device, &free_b, &total_b) != 0)
        return; /* a device that does not say has no series */
    family(o, "ferry_device_memory_bytes", "gauge",
           "The device's memory, free and total.");
    sample(o, "ferry_device_memory_bytes", "kind=\"free\"", (double)free_b);
    sample(o, "ferry_device_memory_bytes", "kind=\"total\"", (double)total_b);
}

static void counter(out *o, const char *name, const char *help, double v)
{
    family(o, name, "counter", help);
    sample(o, name, NULL, v);
}

static void gauge(out *o, const char *name, const char *help, double v)
{
    family(o, name, "gauge", help);
    sample(o, name, NULL, v);
}

static void worker_families(out *o, rt_worker *w)
{
    gauge(o, "ferry_uptime_seconds", "Seconds since the worker started.",
          (double)uv_hrtime() / 1e9 - w->id.started);
    gauge(o, "ferry_worker_restarts", "Times the supervisor restarted this worker.",
          w->id.restarts);
    gauge(o, "ferry_modules_loaded", "Task modules in the worker's cache.",
          (double)rt_modcache_count(w->cache));
    gauge(o, "ferry_calls_in_flight", "Call requests running now.",
          atomic_load(&w->stats.in_flight));
    counter(o, "ferry_train_epochs_total", "Training epochs this rank finished.",
            (double)atomic_load(&w->stats.train_epochs));
    counter(o, "ferry_train_steps_total", "Training steps of the epochs finished.",
            (double)atomic_load(&w->stats.train_steps));
    counter(o, "ferry_train_samples_total", "Samples this rank trained on.",
            (double)atomic_load(&w->stats.train_samples));
    uint64_t bits = atomic_load(&w->stats.train_rate_bits);
    double rate;
    memcpy(&rate, &bits, sizeof rate);
    gauge(o, "ferry_train_samples_per_second",
          "This rank's samples a second over its last epoch.", rate);
}

char *rt_metrics_text(rt_worker *w)
{
    char *text = NULL;
    size_t len = 0;
    out o = {.f = open_memstream(&text, &len), .rank = w->id.rank};
    if (!o.f)
        return NULL;
    rpc_families(&o, w->srv);
    executor_families(&o, w);
    device_family(&o, w);
    worker_families(&o, w);
    if (fclose(o.f) != 0) {
        free(text);
        return NULL;
    }
    return text;
}
