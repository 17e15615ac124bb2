/* proxyworker — private header shared by the files of this folder. */
#ifndef FERRY_PW_INT_H
#define FERRY_PW_INT_H

#include "proxyworker.h"

struct pw {
    rpc_channel *ch;
    char *target; /* our copy: the channel may outlive pw_destroy() briefly */
    int rank;
};

#endif
