/* What each method served, for a worker's metrics endpoint: calls by
 * status, bytes each way and a latency histogram, counted with relaxed
 * atomics by whichever thread ends a call (a scrape may see one counter a
 * call ahead of another; Prometheus' counters allow it). */
#include <string.h>

#include "rpc_int.h"

const double rpc_latency_bounds_s[RPC_LATENCY_BUCKETS] = {
    0.0001, 0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};

#define ADD(counter, n) atomic_fetch_add_explicit(&(counter), (n), memory_order_relaxed)
#define GET(counter)    atomic_load_explicit(&(counter), memory_order_relaxed)

void rpc_count_request(rpc_srv_call *sc, size_t bytes)
{
    if (sc->method)
        ADD(sc->method->counts.bytes_in, bytes);
}

void rpc_count_end(rpc_srv_call *sc, int status, size_t bytes_out)
{
    if (!sc->method) /* a method not served here: no series of its own */
        return;
    rpc_method_counters *c = &sc->method->counts;
    uint64_t ns = sc->began_ns ? uv_hrtime() - sc->began_ns : 0;
    double s = (double)ns / 1e9;
    int b = 0;
    while (b < RPC_LATENCY_BUCKETS && s > rpc_latency_bounds_s[b])
        b++;
    ADD(c->calls[status >= 0 && status < RPC_STATUS_CODES ? status : GRPC_STATUS_UNKNOWN],
        1);
    ADD(c->bytes_out, bytes_out);
    ADD(c->latency[b], 1);
    ADD(c->latency_ns, ns);
}

size_t rpc_server_method_stats(rpc_server *s, rpc_method_stats *out, size_t max)
{
    for (size_t i = 0; i < s->n_methods && i < max; i++) {
        const rpc_method_counters *c = &s->methods[i].counts;
        rpc_method_stats *o = &out[i];
        memset(o, 0, sizeof *o);
        o->name = s->methods[i].m.name;
        for (int k = 0; k < RPC_STATUS_CODES; k++)
            o->calls[k] = GET(c->calls[k]);
        for (int k = 0; k <= RPC_LATENCY_BUCKETS; k++)
            o->latency[k] = GET(c->latency[k]);
        o->bytes_in = GET(c->bytes_in);
        o->bytes_out = GET(c->bytes_out);
        o->latency_s = (double)GET(c->latency_ns) / 1e9;
    }
    return s->n_methods;
}
