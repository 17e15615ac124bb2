/* A cluster of three hosts and a submitter on a fourth, each a network
 * namespace: `ferry start --config` waits for the remote workers, status
 * lists them at their hosts' addresses, the mlp trains on Fashion-MNIST in
 * sync and in async mode across them, once with 5 ms of delay and 1% loss
 * on one worker's link, and shutdown stops the workers over the network. */
#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "mhcluster.h"
#include "tchild.h"
#include "tcommon.h"

/* netem on the link of worker NETEM_HOST: its outgoing packets. */
#define NETEM_HOST 1
#define NETEM_SPEC "delay 5ms loss 1%"

TestSuite(multihost, .init = mhc_setup, .fini = mhc_teardown, .timeout = 500);

/* Asserts the one JSON line of a training run on every worker. */
static void expect_trained(const mhc_run *r, const char *mode, double min_accuracy)
{
    MHC_EXPECT(r, 0);
    char want[64];
    snprintf(want, sizeof want, "\"mode\":\"%s\"", mode);
    cr_assert(mhc_has(r->out, want), "%s", r->out);
    cr_assert_eq(mhc_json_number(r->out, "workers"), MHC_WORKERS, "%s", r->out);
    double acc = mhc_json_number(r->out, "test_accuracy");
    cr_assert(acc >= min_accuracy && acc <= 1.0, "%s: test accuracy %g:\n%s", mode, acc,
              r->out);
    cr_log_info("%s across %d hosts: test accuracy %.4f, %.0f samples/s", mode,
                MHC_WORKERS, acc, mhc_json_number(r->out, "samples_per_s"));
}

Test(multihost, sync_and_async_training_across_three_hosts_then_status_and_shutdown)
{
    mhc_start(&mhc_plain);

    mhc_run r;
    mhc_ferry(&r, 60000, "status", NULL);
    MHC_EXPECT(&r, 0);
    for (int w = 0; w < MHC_WORKERS; w++) {
        char addr[64];
        snprintf(addr, sizeof addr, "%s:%d", mhc_net.addr[w], MHC_PORT);
        cr_assert(mhc_has(r.out, addr), "status does not list %s:\n%s", addr, r.out);
    }
    mhc_run_fini(&r);

    mhc_ferry(&r, 300000, "submit", mhc_task("mlp"), "--mode", "sync", "--epochs", "1",
              "--json", NULL);
    expect_trained(&r, "sync", 0.80);
    cr_assert(mhc_has(r.out, "\"params_identical\":true"),
              "the workers ended on different parameters:\n%s", r.out);
    cr_assert(mhc_json_number(r.out, "allreduce_s") > 0, "%s", r.out);
    mhc_run_fini(&r);

    mhc_ferry(&r, 300000, "submit", mhc_task("mlp"), "--mode", "async", "--epochs", "1",
              "--json", NULL);
    expect_trained(&r, "async", 0.75);
    mhc_run_fini(&r);

    mhc_expect_shutdown();
    mhc_ferry(&r, 60000, "status", NULL);
    cr_assert_eq(r.status, 1, "status after shutdown:\n%s\n%s", r.out, r.err);
    cr_assert(mhc_has(r.err, "no cluster is running"), "%s", r.err);
    mhc_run_fini(&r);
    tcom_assert_no_leaks();
}

/* The time a TCP connection from the submitter's host to worker `w`'s
 * port takes to open, in ms; -1 when it fails. */
static double connect_ms(int w)
{
    int ns = mh_netns_fd(&mhc_net, MHC_SUBMITTER);
    cr_assert(ns >= 0, "%s", strerror(-ns));
    int p[2];
    cr_assert(pipe(p) == 0);
    pid_t pid = tcom_fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        double ms = -1;
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(MHC_PORT)};
        inet_pton(AF_INET, mhc_net.addr[w], &a.sin_addr);
        struct timespec t0, t1;
        int s = setns(ns, CLONE_NEWNET) == 0 ? socket(AF_INET, SOCK_STREAM, 0) : -1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        if (s >= 0 && connect(s, (struct sockaddr *)&a, sizeof a) == 0) {
            clock_gettime(CLOCK_MONOTONIC, &t1);
            ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 +
                 (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
        }
        _exit(write(p[1], &ms, sizeof ms) == sizeof ms ? 0 : 1);
    }
    close(ns);
    close(p[1]);
    double ms = -1;
    cr_assert(read(p[0], &ms, sizeof ms) == sizeof ms);
    close(p[0]);
    waitpid(pid, NULL, 0);
    return ms;
}

Test(multihost, sync_and_async_training_across_a_link_with_5ms_delay_and_1_percent_loss)
{
    char err[512];
    int rc = mh_netem(&mhc_net, NETEM_HOST, NETEM_SPEC, err, sizeof err);
    if (rc == -ENOTSUP) {
        fprintf(stderr, "skipped: %s\n", err);
        cr_skip_test("%s", err);
    }
    cr_assert(rc == 0, "%s", err);
    /* which of the two: the kernel's qdisc, or lossy-link where it has none */
    cr_assert(mhc_net.netem[NETEM_HOST] != NULL);
    fprintf(stderr, "%s on worker %d's link: %s\n", mhc_net.netem[NETEM_HOST], NETEM_HOST,
            NETEM_SPEC);
    mhc_start(&mhc_plain);
    /* The delay is on the path: every connection to that worker waits for
     * its SYN-ACK, which leaves through the netem queue (or lossy-link's). */
    double ms = connect_ms(NETEM_HOST);
    cr_assert(ms >= 5.0,
              "a connection to worker %d opened in %.2f ms, under netem's 5 ms",
              NETEM_HOST, ms);

    /* Fewer, larger steps: each one's all-reduce crosses the slow link. */
    mhc_run r;
    mhc_ferry(&r, 400000, "submit", mhc_task("mlp"), "--mode", "sync", "--epochs", "1",
              "--batch", "512", "--json", NULL);
    expect_trained(&r, "sync", 0.75);
    cr_assert(mhc_has(r.out, "\"params_identical\":true"), "%s", r.out);
    mhc_run_fini(&r);

    /* The slow worker's pushes and pulls cross it too. */
    mhc_ferry(&r, 400000, "submit", mhc_task("mlp"), "--mode", "async", "--epochs", "1",
              "--batch", "512", "--json", NULL);
    expect_trained(&r, "async", 0.70);
    mhc_run_fini(&r);

    cr_assert(mh_netem(&mhc_net, NETEM_HOST, NULL, err, sizeof err) == 0, "%s", err);
    cr_assert_null(mhc_net.netem[NETEM_HOST]);
    tcom_assert_no_leaks();
}
