/* bench/allreduce — forking ferry's ranks, handing them each other's
 * ports, and collecting their timings within a deadline. */
#include "allreduce_ranks.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "stats.h"

typedef struct ranks {
    int n;
    pid_t pid[AR_MAX_RANKS];
    int up[AR_MAX_RANKS];   /* read end: ports, then results */
    int down[AR_MAX_RANKS]; /* write end: ports; closing it ends the rank */
    uint64_t deadline_ns;
} ranks;

static int fork_rank(ranks *g, int r, const ar_plan *plan, const ar_ferry_opts *o)
{
    int u[2], d[2];
    if (pipe2(u, O_CLOEXEC) != 0)
        return -errno;
    if (pipe2(d, O_CLOEXEC) != 0) {
        int e = errno;
        close(u[0]), close(u[1]);
        return -e;
    }
    pid_t parent = getpid();
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(u[0]), close(u[1]), close(d[0]), close(d[1]);
        return -e;
    }
    if (pid == 0) {
        /* An earlier rank's pipes stay with the parent alone: a rank must
         * see EOF on its own down pipe when the parent closes it. */
        for (int i = 0; i < r; i++)
            close(g->up[i]), close(g->down[i]);
        close(u[0]), close(d[1]);
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive the benchmark */
        if (getppid() != parent)
            _exit(1);
        if (o->netns && setns(o->netns[r], CLONE_NEWNET) != 0) {
            dprintf(2, "bench/allreduce: rank %d: setns: %s\n", r, strerror(errno));
            _exit(1);
        }
        signal(SIGPIPE, SIG_IGN);
        ar_rank_main(r, plan, o, u[1], d[0]);
    }
    close(u[1]), close(d[0]);
    g->pid[r] = pid;
    g->up[r] = u[0];
    g->down[r] = d[1];
    g->n = r + 1;
    return 0;
}

/* Reads `each` bytes from every rank's up pipe into bufs (rank r's at
 * bufs + r * each), whichever is ready first. Returns -1 - r when rank r
 * closed its pipe early, -1 - n at the deadline, or 0. `stop`, when set,
 * ends the wait as soon as one complete record makes it return true. */
static int collect(ranks *g, char *bufs, size_t each, bool (*stop)(const void *rec))
{
    size_t got[AR_MAX_RANKS] = {0};
    int left = g->n;
    while (left > 0) {
        struct pollfd pfd[AR_MAX_RANKS];
        int map[AR_MAX_RANKS], np = 0;
        for (int r = 0; r < g->n; r++)
            if (got[r] < each)
                pfd[np] = (struct pollfd){.fd = g->up[r], .events = POLLIN},
                map[np++] = r;
        uint64_t now = bench_now_ns();
        if (now >= g->deadline_ns)
            return -1 - g->n;
        int ms = (int)((g->deadline_ns - now) / 1000000) + 1;
        int pr = poll(pfd, (nfds_t)np, ms);
        if (pr < 0 && errno != EINTR)
            return -1 - g->n;
        for (int i = 0; pr > 0 && i < np; i++) {
            if (!pfd[i].revents)
                continue;
            int r = map[i];
            ssize_t n = read(g->up[r], bufs + (size_t)r * each + got[r], each - got[r]);
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0)
                return -1 - r;
            got[r] += (size_t)n;
            if (got[r] == each) {
                left--;
                if (stop && stop(bufs + (size_t)r * each))
                    return 0;
            }
        }
    }
    return 0;
}

static bool failed(const void *rec)
{
    return ((const ar_rank_result *)rec)->status != 0;
}

/* Closes the down pipes (the ranks tear down and exit), waits a few
 * seconds, then kills what is left. With `kill_now`, kills at once. */
static void end_ranks(ranks *g, bool kill_now)
{
    for (int r = 0; r < g->n; r++) {
        close(g->down[r]);
        if (kill_now)
            kill(g->pid[r], SIGKILL);
    }
    uint64_t until = bench_now_ns() + 5000000000ull;
    for (int r = 0; r < g->n; r++) {
        int status = 0;
        while (waitpid(g->pid[r], &status, WNOHANG) == 0) {
            if (bench_now_ns() > until) {
                bench_log("bench/allreduce: rank %d did not exit; killing it", r);
                kill(g->pid[r], SIGKILL);
                waitpid(g->pid[r], &status, 0);
                break;
            }
            usleep(5000);
        }
        /* A rank that crashes while tearing down is a bug worth seeing. */
        if (!kill_now && !(WIFEXITED(status) && WEXITSTATUS(status) == 0))
            bench_log("bench/allreduce: rank %d ended with status 0x%x after its results",
                      r, status);
        close(g->up[r]);
    }
    g->n = 0;
}

int ar_ferry_run(const ar_plan *plan, const ar_ferry_opts *o,
                 double secs[AR_MAX_SIZES][AR_MAX_REPS], char *err, size_t errlen)
{
    if (o->world < 2 || o->world > AR_MAX_RANKS) {
        snprintf(err, errlen, "ranks must be 2 to %d", AR_MAX_RANKS);
        return -1;
    }
    ranks g = {.deadline_ns = bench_now_ns() + (uint64_t)o->deadline_s * 1000000000ull};
    ar_rank_result *res = calloc((size_t)o->world, sizeof *res);
    if (!res) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    int rc = 0;
    for (int r = 0; r < o->world && rc == 0; r++)
        rc = fork_rank(&g, r, plan, o);
    if (rc) {
        snprintf(err, errlen, "fork: %s", strerror(-rc));
        goto fail;
    }

    int32_t ports[AR_MAX_RANKS];
    rc = collect(&g, (char *)ports, sizeof ports[0], NULL);
    if (rc == -1 - g.n) {
        snprintf(err, errlen, "the ranks did not start within %d s", o->deadline_s);
        goto fail;
    }
    if (rc < 0) {
        snprintf(err, errlen, "rank %d did not start (see its stderr)", -1 - rc);
        goto fail;
    }
    for (int r = 0; r < g.n; r++) {
        ssize_t w = write(g.down[r], ports, sizeof ports[0] * (size_t)g.n);
        if (w != (ssize_t)(sizeof ports[0] * (size_t)g.n)) {
            snprintf(err, errlen, "cannot hand rank %d the ports", r);
            goto fail;
        }
    }

    rc = collect(&g, (char *)res, sizeof *res, failed);
    if (rc == -1 - g.n) {
        snprintf(err, errlen, "the ranks did not finish within %d s", o->deadline_s);
        goto fail;
    }
    if (rc < 0) {
        snprintf(err, errlen, "rank %d exited early (see its stderr)", -1 - rc);
        goto fail;
    }
    for (int r = 0; r < g.n; r++) {
        if (res[r].status) {
            snprintf(err, errlen, "%s", res[r].err);
            goto fail;
        }
    }
    end_ranks(&g, false);
    /* A repetition lasts as long as its slowest rank. */
    for (int s = 0; s < plan->n; s++)
        for (int i = 0; i < plan->step[s].reps; i++) {
            secs[s][i] = 0;
            for (int r = 0; r < o->world; r++)
                if (res[r].secs[s][i] > secs[s][i])
                    secs[s][i] = res[r].secs[s][i];
        }
    free(res);
    return 0;

fail:
    end_ranks(&g, true);
    free(res);
    return -1;
}

int ar_ferry_half(const ar_plan *plan, const ar_ferry_opts *o, int half,
                  double secs[AR_MAX_SIZES][AR_MAX_REPS], char *err, size_t errlen)
{
    ar_plan part = *plan;
    int at[AR_MAX_SIZES];
    for (int s = 0; s < part.n; s++) {
        int first = (plan->step[s].reps + 1) / 2;
        at[s] = half ? first : 0;
        /* May be 0 (a size of one repetition): then only its warm-up runs. */
        part.step[s].reps = half ? plan->step[s].reps - first : first;
    }
    static double got[AR_MAX_SIZES][AR_MAX_REPS];
    if (ar_ferry_run(&part, o, got, err, errlen) != 0)
        return -1;
    for (int s = 0; s < part.n; s++)
        for (int r = 0; r < part.step[s].reps; r++)
            secs[s][at[s] + r] = got[s][r];
    return 0;
}
