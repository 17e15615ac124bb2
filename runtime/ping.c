/* Ping: who this worker is. The one call that needs no cluster token, so
 * that `ferry status` and health checks work before anything else. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <ferry/ferry.h>

#include "ferry.pb-c.h"
#include "runtime.h"

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
    Ferry__PingRequest *in;
    if (rpc_msg_unpack(req, &ferry__ping_request__descriptor, (ProtobufCMessage **)&in)) {
        rpc_srv_fail(sc, FERRY_EINVAL, "Ping: request is not a PingRequest");
        return;
    }
    char host[256] = "", device[256];
    gethostname(host, sizeof host - 1);
    if (id && id->device[0])
        snprintf(device, sizeof device, "%s", id->device);
    else
        rt_cpu_describe(device, sizeof device);

    Ferry__PingReply out = FERRY__PING_REPLY__INIT;
    out.version = (char *)ferry_version();
    out.pid = (int32_t)getpid();
    out.hostname = host;
    out.device = device;
    out.nonce = in->nonce;
    out.rank = id ? id->rank : -1;
    out.uptime_s = id ? (double)uv_hrtime() / 1e9 - id->started : 0.0;
    out.last_crash = id ? (char *)id->last_crash : "";
    out.crash_id = id ? id->crash_id : 0;
    out.restarts = id ? id->restarts : 0;
    rpc_slots_info slots;
    rpc_srv_slots(sc, &slots);
    out.slots = (uint32_t)slots.slots;
    out.busy_slots = (uint32_t)slots.busy;
    out.stuck_calls = (uint32_t)slots.stuck;
    out.oldest_call_s = slots.oldest_s;
    ferry__ping_request__free_unpacked(in, NULL);

    rpc_msg_out reply = {.head = &out.base};
    rpc_srv_reply(sc, &reply);
}
