/* `ferry status --watch`: the workers' table redrawn every interval until
 * `q` or Ctrl-C: each worker's health, what it runs, its training
 * progress, its busy slots and how long ago it last answered a ping. On a
 * terminal the screen is redrawn in place and keys are read one at a time;
 * otherwise one table follows another. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include "cli.h"

static volatile sig_atomic_t stop_signal;

static void on_stop(int sig)
{
    stop_signal = sig;
}

/* What the worker runs: its oldest call, or "idle". */
static const char *task_of(const cluster_worker *w)
{
    if (!w->stats)
        return "-";
    if (w->stats->busy_slots && w->stats->oldest_call && *w->stats->oldest_call)
        return w->stats->oldest_call;
    return "idle";
}

static void draw(const char *home, const cluster_worker *w, size_t n,
                 const int64_t *last_ok, bool tty, double interval)
{
    int64_t now = base_wall_ms();
    if (tty)
        fputs("\x1b[H\x1b[2J", stdout); /* home, clear */
    printf("ferry: %zu worker%s under %s, every %.1f s%s\n\n", n, n == 1 ? "" : "s", home,
           interval, tty ? "; q or Ctrl-C to quit" : "");
    printf("%-4s  %-21s  %-6s  %-36s  %6s  %8s  %9s  %5s  %s\n", "RANK", "ADDRESS",
           "HEALTH", "RUNNING", "EPOCHS", "STEPS", "SAMPLES/S", "SLOTS", "HEARTBEAT");
    for (size_t i = 0; i < n; i++) {
        const proto_stats_reply *s = w[i].stats;
        char epochs[24] = "-", steps[24] = "-", rate[24] = "-", slots[24] = "-",
             beat[32] = "never";
        if (s) {
            snprintf(epochs, sizeof epochs, "%llu", (unsigned long long)s->train_epochs);
            snprintf(steps, sizeof steps, "%llu", (unsigned long long)s->train_steps);
            if (s->train_samples_per_s > 0)
                snprintf(rate, sizeof rate, "%.0f", s->train_samples_per_s);
            snprintf(slots, sizeof slots, "%u/%u", s->busy_slots, s->slots);
        }
        if (last_ok[i])
            snprintf(beat, sizeof beat, "%.1f s ago", (double)(now - last_ok[i]) / 1e3);
        printf("%-4d  %-21s  %-6s  %-36.36s  %6s  %8s  %9s  %5s  %s\n", w[i].rank,
               w[i].target, w[i].ping ? "ok" : "DOWN", task_of(&w[i]), epochs, steps,
               rate, slots, beat);
    }
    fflush(stdout);
}

/* Waits up to `ms` for a key on `*in`; true for q. A closed input is read
 * no more (*in = -1). */
static bool quit_key(int *in, int ms)
{
    struct pollfd p = {.fd = *in, .events = POLLIN};
    if (*in < 0) {
        poll(NULL, 0, ms);
        return false;
    }
    if (poll(&p, 1, ms) <= 0)
        return false;
    char keys[64];
    ssize_t got = read(*in, keys, sizeof keys);
    if (got <= 0) {
        if (got == 0 || errno != EINTR)
            *in = -1;
        return false;
    }
    return memchr(keys, 'q', (size_t)got) || memchr(keys, 'Q', (size_t)got);
}

int cli_status_watch(cli_running *r, const home_paths *h, double interval)
{
    size_t n = cluster_size(r->cl);
    int64_t *last_ok = calloc(n ? n : 1, sizeof *last_ok);
    if (!last_ok) {
        cli_err("status", "out of memory");
        return CLI_FAIL;
    }
    /* Keys one at a time, not echoed, on a terminal; put back on the way out. */
    struct termios saved, raw;
    bool keys = isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO, &saved) == 0;
    if (keys) {
        raw = saved;
        raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
        raw.c_cc[VMIN] = 1;
        raw.c_cc[VTIME] = 0;
        tcsetattr(STDIN_FILENO, TCSANOW, &raw);
    }
    struct sigaction sa = {.sa_handler = on_stop}, old_int, old_term;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    bool tty = isatty(STDOUT_FILENO);
    int in = STDIN_FILENO;
    stop_signal = 0;
    while (!stop_signal) {
        const cluster_worker *w = NULL;
        cluster_survey(r->cl, true, &w); /* a worker down is a row, not an end */
        if (!w)
            break;
        int64_t now = base_wall_ms();
        for (size_t i = 0; i < n; i++)
            if (w[i].ping)
                last_ok[i] = now;
        draw(h->dir, w, n, last_ok, tty, interval);
        if (!tty)
            putchar('\n');
        if (quit_key(&in, (int)(interval * 1000)))
            break;
    }
    if (keys)
        tcsetattr(STDIN_FILENO, TCSANOW, &saved);
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    free(last_ok);
    return CLI_OK;
}
