/* bench/train --async — the straggler's duty cycle, in a child process. */
#include "train_async_duty.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "stats.h"

/* What the handlers need: written only while no signal can come in between
 * (a pid is set after fork returns, cleared before waiting). */
static volatile pid_t duty_pid, worker_pid;
static char *const *volatile on_signal_argv;
static char *const *volatile on_signal_env;
static char *volatile on_signal_dir;

/* The child's counts, in memory shared with the parent. */
typedef struct duty_counts {
    volatile long periods;
    volatile uint64_t stopped_ns, total_ns;
} duty_counts;
static duty_counts *counts;

static volatile sig_atomic_t child_done;

static void child_signal(int sig)
{
    (void)sig;
    child_done = 1;
}

/* Sleeps until `at` on the monotonic clock (bench_now_ns()'s). */
static void sleep_until(uint64_t at)
{
    struct timespec ts = {.tv_sec = (time_t)(at / 1000000000u),
                          .tv_nsec = (long)(at % 1000000000u)};
    if (!child_done) /* a signal cuts it short: child_done is set */
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
}

static _Noreturn void duty_child(pid_t parent, pid_t pid, int stop_ms, int run_ms,
                                 const sigset_t *mask)
{
    struct sigaction sa = {.sa_handler = child_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    sigprocmask(SIG_SETMASK, mask, NULL);
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent)
        child_done = 1;
    /* On time even when the workers keep every core busy: a real-time
     * priority where allowed (it sleeps nearly all the time), and deadlines
     * on a fixed grid, so that a late wake-up shortens the next phase
     * instead of shifting every later one. */
    struct sched_param sp = {.sched_priority = 10};
    if (sched_setscheduler(0, SCHED_FIFO, &sp) != 0)
        setpriority(PRIO_PROCESS, 0, -10);
    uint64_t t0 = bench_now_ns(), period = (uint64_t)(stop_ms + run_ms) * 1000000u;
    for (uint64_t k = 0; !child_done; k++) {
        uint64_t a = bench_now_ns();
        if (a > t0 + k * period + period / 3)
            t0 = a - k * period; /* far behind: a new grid from now */
        if (kill(pid, SIGSTOP) != 0)
            break; /* the worker is gone */
        sleep_until(t0 + k * period + (uint64_t)stop_ms * 1000000u);
        kill(pid, SIGCONT);
        counts->stopped_ns += bench_now_ns() - a;
        counts->periods++;
        sleep_until(t0 + (k + 1) * period);
        counts->total_ns = bench_now_ns() - t0;
    }
    /* The last word is always SIGCONT; nothing stops it after this. */
    kill(pid, SIGCONT);
    counts->total_ns = bench_now_ns() - t0;
    _exit(0);
}

/* Ends the child and continues the worker; async-signal-safe. */
static void end_duty(void)
{
    pid_t d = duty_pid, w = worker_pid;
    duty_pid = 0;
    if (d > 0) {
        kill(d, SIGTERM);
        while (waitpid(d, NULL, 0) < 0 && errno == EINTR)
            ;
    }
    if (w > 0)
        kill(w, SIGCONT);
}

/* Runs argv to its end; async-signal-safe. */
static void run_to_end(char *const *argv, char *const *env)
{
    pid_t p = fork();
    if (p == 0) {
        dup2(2, 1); /* stdout is for JSON lines */
        execve(argv[0], argv, env);
        _exit(127);
    }
    while (p > 0 && waitpid(p, NULL, 0) < 0 && errno == EINTR)
        ;
}

static void bench_signal(int sig)
{
    end_duty();
    char *const *argv = on_signal_argv;
    char *const *env = on_signal_env;
    char *dir = on_signal_dir;
    if (argv)
        run_to_end(argv, env);
    if (argv && dir) {
        char *rm[] = {"/bin/rm", "-rf", "--", dir, NULL};
        run_to_end(rm, env);
    }
    signal(sig, SIG_DFL);
    raise(sig);
}

static void at_exit(void)
{
    end_duty();
}

void bench_duty_install(void)
{
    struct sigaction sa = {.sa_handler = bench_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    atexit(at_exit);
    if (!counts) {
        void *m = mmap(NULL, sizeof *counts, PROT_READ | PROT_WRITE,
                       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED)
            bench_die("mmap: %s", strerror(errno));
        counts = m;
    }
}

void bench_duty_on_signal(char *const *shutdown_argv, char *const *shutdown_env,
                          char *home)
{
    on_signal_argv = NULL; /* never a half-set triple */
    on_signal_env = shutdown_env;
    on_signal_dir = home;
    on_signal_argv = shutdown_argv;
}

int bench_duty_start(pid_t pid, int stop_ms, int run_ms)
{
    if (duty_pid > 0 || !counts)
        return -EBUSY;
    memset((void *)counts, 0, sizeof *counts);
    /* Blocked across the fork, so that a signal sees both pids or neither. */
    sigset_t all, old;
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, &old);
    pid_t parent = getpid();
    fflush(NULL);
    pid_t d = fork();
    if (d == 0)
        duty_child(parent, pid, stop_ms, run_ms, &old);
    int e = errno;
    if (d > 0) {
        worker_pid = pid;
        duty_pid = d;
    }
    sigprocmask(SIG_SETMASK, &old, NULL);
    return d > 0 ? 0 : -e;
}

long bench_duty_stop(void)
{
    if (duty_pid <= 0)
        return -1;
    sigset_t all, old;
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, &old);
    end_duty();
    worker_pid = 0;
    sigprocmask(SIG_SETMASK, &old, NULL);
    return counts->periods;
}

double bench_duty_stopped_fraction(void)
{
    return counts && counts->total_ns
               ? (double)counts->stopped_ns / (double)counts->total_ns
               : 0.0;
}
