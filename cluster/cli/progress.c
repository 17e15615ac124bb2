/* The progress bar `ferry submit` draws on a terminal: the run's share
 * done, the last epoch's rate and the time left, redrawn a few times a
 * second on the output's last line. The epoch lines are printed above it
 * as they come (the bar is wiped first, then drawn again), so that a run's
 * history stays on the screen. Not on a terminal (a pipe, a file, TERM
 * dumb), there is no bar and the lines are as before.
 *
 * Within an epoch the share is estimated from the time the last one took,
 * since the workers report once an epoch; during the first, only the
 * time spent is known, and the ETA says so. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

#define REDRAW_MS 250
#define BAR_WIDTH 24

struct cli_progress {
    FILE *f;
    long epochs;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t ticker;
    bool ticking, stop, drawn;
    /* Under mu. */
    long done;          /* epochs */
    double t0, t_epoch; /* the run's start, the current epoch's */
    double last_epoch_s, rate;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* "1:05" or "2:03:04". */
static void clock_text(double s, char *buf, size_t len)
{
    long t = s > 0 ? (long)(s + 0.5) : 0;
    if (t >= 3600)
        snprintf(buf, len, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
    else
        snprintf(buf, len, "%ld:%02ld", t / 60, t % 60);
}

static void draw(cli_progress *p)
{
    double now = now_s(), in = now - p->t_epoch;
    double part = p->last_epoch_s > 0 ? in / p->last_epoch_s : 0;
    if (part > 0.99)
        part = 0.99;
    if (p->done >= p->epochs)
        part = 0;
    double frac = ((double)p->done + part) / (double)p->epochs;
    if (frac > 1)
        frac = 1;
    int fill = (int)(frac * BAR_WIDTH);
    char bar[BAR_WIDTH + 1];
    for (int i = 0; i < BAR_WIDTH; i++)
        bar[i] = i < fill ? '#' : i == fill ? '>' : '-';
    bar[BAR_WIDTH] = 0;
    char rate[48] = "- samples/s", eta[32] = "--:--", spent[32];
    if (p->rate > 0)
        snprintf(rate, sizeof rate, "%.0f samples/s", p->rate);
    if (p->last_epoch_s > 0)
        clock_text((double)(p->epochs - p->done) * p->last_epoch_s -
                       (part * p->last_epoch_s),
                   eta, sizeof eta);
    clock_text(now - p->t0, spent, sizeof spent);
    long shown = p->done < p->epochs ? p->done + 1 : p->epochs;
    fprintf(p->f, "\r\033[Kepoch %ld/%ld [%s] %3.0f%%  %s  ETA %s  elapsed %s", shown,
            p->epochs, bar, 100 * frac, rate, eta, spent);
    fflush(p->f);
    p->drawn = true;
}

static void wipe(cli_progress *p)
{
    if (p->drawn)
        fputs("\r\033[K", p->f);
    p->drawn = false;
}

static void *tick(void *arg)
{
    cli_progress *p = arg;
    pthread_mutex_lock(&p->mu);
    while (!p->stop) {
        draw(p);
        struct timespec at;
        clock_gettime(CLOCK_REALTIME, &at);
        at.tv_nsec += REDRAW_MS * 1000000L;
        at.tv_sec += at.tv_nsec / 1000000000L;
        at.tv_nsec %= 1000000000L;
        pthread_cond_timedwait(&p->cv, &p->mu, &at);
    }
    wipe(p);
    fflush(p->f);
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

cli_progress *cli_progress_create(FILE *f, long epochs)
{
    const char *term = getenv("TERM");
    if (epochs <= 0 || !isatty(fileno(f)) || (term && strcmp(term, "dumb") == 0))
        return NULL;
    cli_progress *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->f = f;
    p->epochs = epochs;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    p->t0 = p->t_epoch = now_s();
    return p;
}

void cli_progress_begin(cli_progress *p)
{
    if (!p || p->ticking)
        return;
    pthread_mutex_lock(&p->mu);
    p->t0 = p->t_epoch = now_s();
    pthread_mutex_unlock(&p->mu);
    p->ticking = pthread_create(&p->ticker, NULL, tick, p) == 0;
}

void cli_progress_hold(cli_progress *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    wipe(p);
}

void cli_progress_release(cli_progress *p)
{
    if (!p)
        return;
    if (p->ticking)
        draw(p);
    pthread_mutex_unlock(&p->mu);
}

void cli_progress_epoch(cli_progress *p, long epoch, double samples_per_s)
{
    if (!p)
        return;
    double now = now_s();
    p->last_epoch_s = now - p->t_epoch;
    p->t_epoch = now;
    p->done = epoch;
    p->rate = samples_per_s;
}

void cli_progress_destroy(cli_progress *p)
{
    if (!p)
        return;
    if (p->ticking) {
        pthread_mutex_lock(&p->mu);
        p->stop = true;
        pthread_cond_signal(&p->cv);
        pthread_mutex_unlock(&p->mu);
        pthread_join(p->ticker, NULL);
    }
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    free(p);
}
