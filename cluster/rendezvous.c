/* Asking rank 0 of a launcher's world who has joined its rendezvous
 * (Rendezvous, ferry.proto): how a submitter without the engine's
 * FERRY_HOME finds the workers an engine started. */
#include "cluster_int.h"

int cluster_rendezvous_ask(cluster *cl, proto_rendezvous_reply **out)
{
    *out = NULL;
    if (!cl || !cl->n)
        return FERRY_EINVAL;
    rpc_call call = {0};
    int rc = pw_rendezvous(cl->nodes[0].pw, &call, cl->ping_timeout_ms, NULL);
    if (rc) {
        cl_set_error(cl, "%s: cannot ask its rendezvous: %s", cl->nodes[0].target,
                     ferry_strerror(rc));
        return rc;
    }
    if ((rc = rpc_call_wait(&call)) != 0)
        cl_set_error(cl, "%s", call.errmsg ? call.errmsg : ferry_strerror(rc));
    else if ((rc = pw_rendezvous_result(&call, out)) != 0)
        cl_set_error(cl, "%s: corrupt Rendezvous reply", cl->nodes[0].target);
    rpc_call_fini(&call);
    return rc;
}
