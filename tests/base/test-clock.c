/* Clock readings agree with each other and with the system's clocks. */
#include <criterion/criterion.h>
#include <time.h>

#include "base/base.h"

Test(base_clock, the_monotonic_readings_agree_and_advance)
{
    uint64_t ns = base_mono_ns();
    double ms = base_mono_ms(), s = base_mono_s();
    /* Read one after another: within a second of each other. */
    cr_expect((double)ns / 1e6 <= ms && ms - (double)ns / 1e6 < 1000.0);
    cr_expect(ms / 1e3 <= s && s - ms / 1e3 < 1.0);
    struct timespec pause = {.tv_nsec = 2000000};
    nanosleep(&pause, NULL);
    cr_expect(base_mono_ns() >= ns + 2000000u);
}

Test(base_clock, the_wall_readings_are_the_epoch_time)
{
    time_t before = time(NULL);
    int64_t ms = base_wall_ms();
    uint64_t ns = base_wall_ns();
    time_t after = time(NULL);
    cr_expect(ms / 1000 >= (int64_t)before && ms / 1000 <= (int64_t)after);
    cr_expect(ns / 1000000u >= (uint64_t)ms && ns / 1000000000u <= (uint64_t)after);
}
