/* The worker's two watchdog threads: one probes the listener and judges the
 * executor's stuck calls while the worker serves; one, once it stops, ends
 * the process if calls that ignore cancellation hold it past the grace. */
#include <errno.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include <ferry/ferry.h>

#include "wm_int.h"

/* The listener is probed this often; this many failed probes in a row (each
 * given PROBE_TIMEOUT_MS) and the worker exits to be restarted. */
#define PROBE_EVERY_MS   2000
#define PROBE_TIMEOUT_MS 2000
#define PROBE_FAILURES   3

/* A function that ignores cancellation must not keep the process alive:
 * this long after the grace ends, the worker exits regardless. */
#define STUCK_EXTRA_MS 5000

/* Calls queued behind a pool that every slot's stuck call holds are failed
 * (rpc_server_shed); a call stuck past the grace wedges the worker: nothing
 * can free its thread but the end of the process. The record names what
 * held the slots, and what the tasks forked goes first. */
static void check_slots(wm_watch *wt)
{
    rpc_server_shed(wt->w->srv);
    rpc_slots_info si;
    rpc_server_slots(wt->w->srv, &si);
    if (!wt->wedge_grace_ms || !si.stuck || si.stuck_s * 1000 < wt->wedge_grace_ms)
        return;
    char held[1024], text[1400];
    rpc_server_holders(wt->w->srv, held, sizeof held);
    snprintf(text, sizeof text,
             "wedged: %d of %d executor slots held by calls cancelled up to %.0f s ago "
             "that never returned (%s)",
             si.stuck, si.slots, si.stuck_s, held);
    rt_crash_note(text);
    fprintf(stderr, "ferry worker: %s: exiting to be restarted\n", text);
    rt_reap_descendants();
    _exit(EXIT_WEDGED);
}

static void *listener_watch(void *arg)
{
    wm_watch *wt = arg;
    int failures = 0;
    while (wm_nap(&wt->quit, PROBE_EVERY_MS)) {
        check_slots(wt);
        int rc = rpc_server_probe(wt->w->srv, PROBE_TIMEOUT_MS);
        if (rc == 0)
            failures = 0;
        else if (rc == FERRY_EUNAVAIL)
            failures++;
        /* else: no descriptor to probe with; no verdict */
        if (failures >= PROBE_FAILURES) {
            fprintf(stderr,
                    "ferry worker: port %d no longer accepts connections (%d probes of "
                    "%d ms went unanswered; file descriptors ran out?): exiting to be "
                    "restarted\n",
                    rt_worker_port(wt->w), failures, PROBE_TIMEOUT_MS);
            atomic_store(&wt->deaf, true);
            rt_worker_stop(wt->w);
            break;
        }
    }
    return NULL;
}

void wm_watch_start(wm_watch *wt, rt_worker *w, long wedge_grace_ms)
{
    wt->w = w;
    wt->wedge_grace_ms = wedge_grace_ms;
    atomic_store(&wt->quit, false);
    atomic_store(&wt->deaf, false);
    wt->started = pthread_create(&wt->thread, NULL, listener_watch, wt) == 0;
}

bool wm_watch_stop(wm_watch *wt)
{
    atomic_store(&wt->quit, true);
    if (wt->started)
        pthread_join(wt->thread, NULL);
    return atomic_load(&wt->deaf);
}

static void *stuck_watch(void *arg)
{
    long long ms = *(long long *)arg;
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
    fprintf(stderr,
            "ferry worker: calls still running %lld ms after the stop; exiting "
            "without them\n",
            ms);
    rt_reap_descendants();
    _exit(EXIT_FAIL);
}

void wm_stop_deadline(long long grace_ms)
{
    static long long stuck_ms;
    stuck_ms = (grace_ms >= 0 ? grace_ms : STOP_GRACE_MS) + STUCK_EXTRA_MS;
    pthread_t t;
    if (pthread_create(&t, NULL, stuck_watch, &stuck_ms) == 0)
        pthread_detach(t);
}
