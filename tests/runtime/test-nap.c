/* tests/runtime — wm_nap: the wait of the worker's helper threads lasts
 * its time when nothing stops it, and ends early, saying so, when its quit
 * flag is set before or during it. */
#include "rth.h"

#include <pthread.h>
#include <time.h>

#include "runtime/worker_main/wm_int.h"

TestSuite(wm_nap, .timeout = 60);

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

Test(wm_nap, a_nap_nothing_stops_lasts_its_time_and_goes_on)
{
    atomic_bool quit;
    atomic_init(&quit, false);
    double t0 = now_ms();
    cr_expect(wm_nap(&quit, 250));
    cr_expect_geq(now_ms() - t0, 250.0);
}

Test(wm_nap, a_quit_set_before_ends_the_nap_at_once)
{
    atomic_bool quit;
    atomic_init(&quit, true);
    cr_expect_not(wm_nap(&quit, 600000));
}

static void *set_later(void *arg)
{
    struct timespec ts = {.tv_nsec = 50 * 1000000L};
    nanosleep(&ts, NULL);
    atomic_store((atomic_bool *)arg, true);
    return NULL;
}

Test(wm_nap, a_quit_set_during_the_nap_ends_it_early)
{
    atomic_bool quit;
    atomic_init(&quit, false);
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, set_later, &quit), 0);
    /* Ten minutes asked for: only the quit can end it within the test's
     * own timeout. */
    cr_expect_not(wm_nap(&quit, 600000));
    pthread_join(t, NULL);
}
