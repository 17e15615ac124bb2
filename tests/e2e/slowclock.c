/* LD_PRELOAD shim for tests/e2e: holds `ferry start`'s processes (the CLI
 * and the supervisor it becomes) up for a second in each reading of the
 * coarse real-time clock, as a busy machine that does not run the
 * supervisor for a while would. Workers (`ferry worker`) are not held:
 * they run on meanwhile, as the children of a descheduled parent do. */
#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define HOLD_US 1000000

static bool is_start(void)
{
    char buf[256];
    FILE *f = fopen("/proc/self/cmdline", "re");
    if (!f)
        return false;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    size_t first = strlen(buf); /* argv[0] */
    return n > first + 1 && strcmp(buf + first + 1, "start") == 0;
}

int clock_gettime(clockid_t id, struct timespec *ts)
{
    static int (*real)(clockid_t, struct timespec *);
    if (!real)
        real = (int (*)(clockid_t, struct timespec *))dlsym(RTLD_NEXT, "clock_gettime");
    if (id == CLOCK_REALTIME_COARSE && is_start())
        usleep(HOLD_US);
    return real(id, ts);
}
