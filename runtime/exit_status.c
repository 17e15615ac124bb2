/* What a worker's exit status says. `ferry worker` ends with a status of
 * its own for each way it gives up; its supervisor names it, so that a
 * restart reads "wedged" rather than a bare number. */
#include <stddef.h>

#include "runtime.h"

const char *rt_exit_meaning(int status)
{
    switch (status) {
    case RT_EXIT_USAGE:
        return "the worker's own status for a mistake in its command line";
    case RT_EXIT_PORT_IN_USE:
        return "the worker's own status for a port that is in use";
    case RT_EXIT_DEAF:
        return "deaf: the worker's own status when its listener stopped answering";
    case RT_EXIT_WEDGED:
        return "wedged: the worker's own status when a call cancelled longer ago than "
               "the wedge grace never returned";
    default:
        return NULL;
    }
}
