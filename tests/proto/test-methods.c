/* tests/proto — the method names: each of the service's methods has its
 * constant, spelled as gRPC spells the path. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "ferry.pb-c.h"
#include "proto/proto.h"

static const struct {
    const char *method; /* as in ferry.proto */
    const char *path;   /* proto.h's constant */
} names[] = {
    {"Ping", PROTO_METHOD_PING},
    {"LoadModule", PROTO_METHOD_LOAD_MODULE},
    {"Call", PROTO_METHOD_CALL},
    {"Stats", PROTO_METHOD_STATS},
    {"Shutdown", PROTO_METHOD_SHUTDOWN},
    {"ReduceChunk", PROTO_METHOD_REDUCE_CHUNK},
    {"Push", PROTO_METHOD_PUSH},
    {"Pull", PROTO_METHOD_PULL},
    {"TrainHold", PROTO_METHOD_TRAIN_HOLD},
    {"Rendezvous", PROTO_METHOD_RENDEZVOUS},
    {"PutData", PROTO_METHOD_PUT_DATA},
};
#define N_NAMES (sizeof names / sizeof names[0])

Test(proto_methods, every_method_of_the_service_has_its_path)
{
    const ProtobufCServiceDescriptor *d = &ferry__worker__descriptor;
    cr_assert_eq(d->n_methods, N_NAMES, "the service has %u methods, proto.h names %zu",
                 d->n_methods, N_NAMES);
    for (unsigned i = 0; i < d->n_methods; i++) {
        size_t k = 0;
        while (k < N_NAMES && strcmp(names[k].method, d->methods[i].name) != 0)
            k++;
        cr_assert(k < N_NAMES, "method %s has no constant", d->methods[i].name);
        char want[128];
        snprintf(want, sizeof want, "/%s/%s", d->name, d->methods[i].name);
        cr_assert_str_eq(names[k].path, want);
    }
}
