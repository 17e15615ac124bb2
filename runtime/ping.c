/* Ping: who this worker is. The one call that needs no cluster token, so
 * that `ferry status` and health checks work before anything else. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <ferry/ferry.h>

#include "runtime_int.h"

void rt_cpu_describe(char *buf, size_t len)
{
    char model[128] = "unknown cpu";
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f) {
        char line[256];
        while (fgets(line, sizeof line, f)) {
            char *colon = strchr(line, ':');
            if (strncmp(line, "model name", 10) == 0 && colon) {
                snprintf(model, sizeof model, "%s", colon + 2);
                model[strcspn(model, "\n")] = '\0';
                break;
            }
        }
        fclose(f);
    }
    snprintf(buf, len, "cpu: %s (%ld cores)", model, sysconf(_SC_NPROCESSORS_ONLN));
}

void rt_ping_handler(rpc_srv_call *sc, rpc_msg *req, void *data)
{
    const rt_identity *id = data;
    proto_ping_req *in;
    if (proto_ping_req_unpack(req->head, req->head_len, &in)) {
        rpc_srv_fail(sc, FERRY_EINVAL, "Ping: request is not a PingRequest");
        return;
    }
    char host[256] = "", device[256];
    gethostname(host, sizeof host - 1);
    if (id && id->device[0])
        snprintf(device, sizeof device, "%s", id->device);
    else
        rt_cpu_describe(device, sizeof device);

    proto_ping_reply out = {
        .version = (char *)ferry_version(),
        .pid = (int32_t)getpid(),
        .hostname = host,
        .device = device,
        .nonce = in->nonce,
        .rank = id ? id->rank : -1,
        .uptime_s = id ? (double)uv_hrtime() / 1e9 - id->started : 0.0,
        .last_crash = id ? (char *)id->last_crash : "",
        .crash_id = id ? id->crash_id : 0,
        .restarts = id ? id->restarts : 0,
        .clock_ns = uv_hrtime(),
    };
    rpc_slots_info slots;
    rpc_srv_slots(sc, &slots);
    out.slots = (uint32_t)slots.slots;
    out.busy_slots = (uint32_t)slots.busy;
    out.stuck_calls = (uint32_t)slots.stuck;
    out.oldest_call_s = slots.oldest_s;
    proto_free(in);

    proto_bytes head;
    rt_reply_packed(sc, proto_ping_reply_pack(&out, &head), &head, "Ping");
}
