/* Where this host reaches a worker of its own. */
#include <string.h>

#include "home.h"

const char *home_reach_host(const char *listen)
{
    if (strcmp(listen, "0.0.0.0") == 0)
        return "127.0.0.1";
    if (strcmp(listen, "::") == 0)
        return "::1";
    return listen;
}
