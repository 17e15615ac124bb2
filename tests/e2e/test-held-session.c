/* A master killed between two of its calls leaves the workers free at once,
 * on a 3-worker cluster of real `ferry worker` processes: killed once every
 * rank's begin has returned and before the first epoch, or between two
 * epochs, where no call of the run is on any worker to see it go. Each
 * worker's session is held by the master's TrainHold, whose end on the wire
 * tells the worker; without it the sessions refused every other submitter
 * for their 30 s of idle time.
 *
 * The master is cluster/train driven as a library (what `ferry submit`
 * runs) in a child process that SIGKILLs itself from the run's own
 * callbacks: when it reports that the run started (its begins returned,
 * no epoch sent yet) or that epoch 1 ended (epoch 2 not sent yet). The
 * child is forked before this process touches gRPC, and asserts nothing:
 * it reports through its exit status. Then a real `ferry submit` must
 * train well within the idle time.
 *
 * And a real `ferry submit` held in the same place by its own output: its
 * stdout is a pipe filled to the brim, so that the first line it writes,
 * the one that says the run started (after its begins and holds, before
 * its first epoch), blocks it there until it is killed. */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cluster/train/train.h"
#include "e2e.h"
#include "e2e_train.h"

#define WORKERS 3
/* Far below the 30 s a session waited out before; a submit of linreg on a
 * loaded 2-core machine takes 1-3 s. */
#define FREE_WITHIN_MS 10000

TestSuite(e2e_held_session, .init = e2e_setup, .fini = e2e_teardown, .timeout = 180);

/* What the child master needs, read before it is forked. */
typedef struct master {
    char targets[WORKERS][128];
    char token[256];
    void *module;
    size_t len;
    const char *mode;
    unsigned die_after_epoch; /* 0: when the run reports that it started */
} master;

static void die_started(void *data, const cluster_train_started *s)
{
    (void)s;
    if (((master *)data)->die_after_epoch == 0)
        kill(getpid(), SIGKILL);
}

static void die_epoch(void *data, const cluster_train_epoch *e)
{
    if (e->epoch == ((master *)data)->die_after_epoch)
        kill(getpid(), SIGKILL);
}

/* The child: trains linreg on every worker and dies where `m` says. Exit
 * statuses name a step that failed before. */
static void run_master(master *m)
{
    const char *targets[WORKERS];
    for (int i = 0; i < WORKERS; i++)
        targets[i] = m->targets[i];
    cluster *cl;
    cluster_opts co = {.token = m->token};
    if (cluster_create(targets, WORKERS, &co, &cl))
        _exit(10);
    if (cluster_wait_ready(cl, 20000))
        _exit(11);
    cluster_module mod;
    if (cluster_load_module(cl, "linreg.so", m->module, m->len, &mod))
        _exit(12);
    cluster_train_opts o = {0};
    proto_train_spec_defaults(&o.spec);
    o.epochs = 3;
    o.mode = m->mode;
    cluster_train_events ev = {.data = m, .started = die_started, .epoch = die_epoch};
    cluster_train_result res;
    int rc = cluster_train_run(cl, &mod, "linreg.so", &o, &ev, &res);
    _exit(rc ? 13 : 14); /* never reached: the run dies in a callback */
}

static void read_module(master *m)
{
    FILE *f = fopen(e2e_task("linreg"), "rb");
    cr_assert(f);
    fseek(f, 0, SEEK_END);
    m->len = (size_t)ftell(f);
    rewind(f);
    cr_assert((m->module = malloc(m->len)));
    cr_assert(fread(m->module, 1, m->len, f) == m->len);
    fclose(f);
}

/* Starts the cluster, runs the child master in `mode` until it kills
 * itself where `die_after_epoch` says, then asserts that a `ferry submit`
 * trains at once. */
static void master_killed(const char *mode, unsigned die_after_epoch)
{
    e2e_start(WORKERS);
    master m = {.mode = mode, .die_after_epoch = die_after_epoch};
    for (int i = 0; i < WORKERS; i++)
        e2e_worker_address(i, m.targets[i], sizeof m.targets[i]);
    e2e_cluster_token(m.token, sizeof m.token);
    read_module(&m);
    fflush(NULL);
    pid_t child = fork();
    cr_assert(child >= 0);
    if (child == 0)
        run_master(&m);
    free(m.module);
    int status = e2e_wait_exit(child, 120000);
    if (status < 0)
        kill(child, SIGKILL);
    cr_assert_eq(status, 128 + SIGKILL,
                 "the master exited %d, not killed where it "
                 "should have been\n%s",
                 status, e2e_logs());
    double died = e2e_now_ms();

    e2e_run r;
    e2e_ferry(&r, 60000, "submit", e2e_task("linreg"), "--epochs", "1", NULL);
    double took = e2e_now_ms() - died;
    cr_log_info("%s, master killed %s: the next submit was done %.0f ms later", mode,
                die_after_epoch ? "between epochs" : "before its first epoch", took);
    cr_assert(r.status == 0, "the next submit: exit %d\n%s\n%s\n%s", r.status, r.out,
              r.err, e2e_logs());
    cr_assert(e2e_has(r.out, "on 3 workers"), "%s", r.out);
    cr_assert(took < FREE_WITHIN_MS,
              "the next submit was done %.0f ms after the master "
              "died\n%s",
              took, e2e_logs());
    /* Taken because its holder hung up, not because it idled out. */
    cr_assert(e2e_has(e2e_logs(), "its master hung up"), "%s", e2e_logs());
    e2e_run_fini(&r);
}

Test(e2e_held_session, a_master_killed_before_its_first_epoch_leaves_the_workers_free)
{
    master_killed("sync", 0);
}

Test(e2e_held_session, a_master_killed_between_epochs_leaves_the_workers_free)
{
    master_killed("sync", 1);
}

Test(e2e_held_session, an_async_master_killed_before_its_first_epoch_leaves_them_free)
{
    master_killed("async", 0);
}

/* A pipe whose buffer is full: a write to fd[1] blocks. */
static void full_pipe(int fd[2])
{
    cr_assert(pipe(fd) == 0);
    int fl = fcntl(fd[1], F_GETFL);
    cr_assert(fcntl(fd[1], F_SETFL, fl | O_NONBLOCK) == 0);
    char block[4096];
    memset(block, 'x', sizeof block);
    while (write(fd[1], block, sizeof block) > 0)
        ;
    while (write(fd[1], block, 1) > 0)
        ;
    cr_assert(fcntl(fd[1], F_SETFL, fl) == 0);
}

/* Whether `pid` is blocked in a write(2) to its stdout. */
static bool writing_stdout(pid_t pid)
{
    char path[64], text[64] = "";
    snprintf(path, sizeof path, "/proc/%d/syscall", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    bool yes = fgets(text, sizeof text, f) && strncmp(text, "1 0x1 ", 6) == 0;
    fclose(f);
    return yes;
}

Test(e2e_held_session, a_submit_killed_as_it_says_it_started_leaves_the_workers_free)
{
    e2e_start(WORKERS);
    int fd[2];
    full_pipe(fd);
    char err[600];
    snprintf(err, sizeof err, "%s/held-submit.err", e2e_home);
    const char *task = e2e_task("linreg");
    fflush(NULL);
    pid_t submit = fork();
    cr_assert(submit >= 0);
    if (submit == 0) {
        int e = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (e < 0 || dup2(fd[1], 1) < 0 || dup2(e, 2) < 0)
            _exit(127);
        execl(getenv("FERRY_TEST_BIN"), "ferry", "submit", task, "--epochs", "1",
              (char *)NULL);
        _exit(127);
    }
    close(fd[1]);
    double end = e2e_now_ms() + 60000;
    while (!writing_stdout(submit) && e2e_now_ms() < end &&
           waitpid(submit, NULL, WNOHANG) == 0)
        e2e_sleep_ms(10);
    bool blocked = writing_stdout(submit);
    if (!blocked)
        kill(submit, SIGKILL);
    cr_assert(blocked, "the submit never wrote its first line\n%s", e2e_logs());

    /* It holds every worker, between its begins and its first epoch. */
    e2e_run r;
    e2e_ferry(&r, 60000, "submit", task, "--epochs", "1", NULL);
    cr_assert(r.status == 1 && e2e_has(r.err, "for another submitter"),
              "a submit beside it: exit %d\n%s", r.status, r.err);
    e2e_run_fini(&r);

    cr_assert(kill(submit, SIGKILL) == 0);
    cr_assert_eq(e2e_wait_exit(submit, 10000), 128 + SIGKILL);
    close(fd[0]);
    double died = e2e_now_ms();
    e2e_ferry(&r, 60000, "submit", task, "--epochs", "1", NULL);
    double took = e2e_now_ms() - died;
    cr_log_info("ferry submit killed as it said it started: the next was done %.0f ms "
                "later",
                took);
    cr_assert(r.status == 0, "the next submit: exit %d\n%s\n%s", r.status, r.err,
              e2e_logs());
    cr_assert(took < FREE_WITHIN_MS, "the next submit was done %.0f ms later", took);
    e2e_run_fini(&r);
}
