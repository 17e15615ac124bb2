/* Clock readings. clock_gettime, not uv_hrtime(): the base links no libuv,
 * and the supervisor's crash records are written from a signal handler. */
#include <time.h>

#include "base.h"

static struct timespec now(clockid_t clk)
{
    struct timespec ts;
    clock_gettime(clk, &ts);
    return ts;
}

uint64_t base_mono_ns(void)
{
    struct timespec ts = now(CLOCK_MONOTONIC);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

double base_mono_ms(void)
{
    struct timespec ts = now(CLOCK_MONOTONIC);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

double base_mono_s(void)
{
    struct timespec ts = now(CLOCK_MONOTONIC);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int64_t base_wall_ms(void)
{
    struct timespec ts = now(CLOCK_REALTIME);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

uint64_t base_wall_ns(void)
{
    struct timespec ts = now(CLOCK_REALTIME);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
