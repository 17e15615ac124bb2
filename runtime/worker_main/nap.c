/* The worker's helper threads wait between tries in short naps, so that a
 * stop is heard within one of them rather than after the whole wait. */
#include <time.h>

#include "wm_int.h"

#define NAP_SLICE_MS 100

bool wm_nap(atomic_bool *quit, int ms)
{
    for (int slept = 0; slept < ms && !atomic_load(quit); slept += NAP_SLICE_MS) {
        struct timespec ts = {.tv_nsec = NAP_SLICE_MS * 1000000L};
        nanosleep(&ts, NULL);
    }
    return !atomic_load(quit);
}
