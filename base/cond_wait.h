/* base — a bounded wait on a condition variable, for the threads that
 * wake on a period (a collective session's ticker and waiters, the
 * parameter-server store's sweep). */
#ifndef FERRY_BASE_COND_WAIT_H
#define FERRY_BASE_COND_WAIT_H

#include <pthread.h>
#include <time.h>

/* Waits on `cv`, whose clock is `clk`, under `mu` for at most `ms`
 * milliseconds (under 1000). Returns pthread_cond_timedwait's result. */
static inline int base_cond_wait_ms(pthread_cond_t *cv, pthread_mutex_t *mu, clockid_t clk,
                                  long ms)
{
    struct timespec ts;
    clock_gettime(clk, &ts);
    ts.tv_nsec += ms * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    return pthread_cond_timedwait(cv, mu, &ts);
}

#endif
