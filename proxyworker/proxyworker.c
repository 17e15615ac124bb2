/* One worker's stub: one channel, so every request to that worker is a
 * stream on the same HTTP/2 connection. */
#include <stdlib.h>
#include <string.h>

#include "pw_int.h"

int pw_create(rpc_client *c, const pw_opts *opts, pw **out)
{
    if (!c || !opts || !opts->target || !*opts->target || !out)
        return FERRY_EINVAL;
    pw *p = calloc(1, sizeof *p);
    if (!p)
        return FERRY_ENOMEM;
    p->rank = opts->rank;
    p->target = strdup(opts->target);
    if (!p->target) {
        free(p);
        return FERRY_ENOMEM;
    }
    rpc_channel_opts co = {
        .max_payload = opts->max_payload, .token = opts->token, .version = PROTO_VERSION};
    int rc = rpc_channel_create(c, opts->target, &co, &p->ch);
    if (rc) {
        free(p->target);
        free(p);
        return rc;
    }
    *out = p;
    return 0;
}

void pw_destroy(pw *p)
{
    if (!p)
        return;
    rpc_channel_destroy(p->ch);
    free(p->target);
    free(p);
}

const char *pw_target(const pw *p)
{
    return p->target;
}

int pw_rank(const pw *p)
{
    return p->rank;
}
