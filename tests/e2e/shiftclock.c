/* LD_PRELOAD shim for tests/e2e: moves the monotonic clock of `ferry
 * worker --rank R` processes forward by 1000 + 3 R seconds, as if each
 * worker ran on a machine of its own, booted at another time. Other
 * processes (the supervisor, `ferry submit`) keep the true clock. */
#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The seconds this process's clock moves: -1 until read, 0 for none. */
static long shift_s = -1;

static long read_shift(void)
{
    char buf[4096];
    FILE *f = fopen("/proc/self/cmdline", "re");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    size_t first = strlen(buf); /* argv[0] */
    if (n <= first + 1 || strcmp(buf + first + 1, "worker") != 0)
        return 0;
    for (size_t i = 0; i < n; i += strlen(buf + i) + 1)
        if (strcmp(buf + i, "--rank") == 0 && i + 7 < n)
            return 1000 + 3 * atol(buf + i + 7);
    return 0;
}

int clock_gettime(clockid_t id, struct timespec *ts)
{
    static int (*real)(clockid_t, struct timespec *);
    if (!real)
        real = (int (*)(clockid_t, struct timespec *))dlsym(RTLD_NEXT, "clock_gettime");
    int rc = real(id, ts);
    if (rc == 0 && id == CLOCK_MONOTONIC) {
        if (shift_s < 0)
            shift_s = read_shift();
        ts->tv_sec += shift_s;
    }
    return rc;
}
