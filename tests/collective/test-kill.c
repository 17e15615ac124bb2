/* tests/collective — a sync step whose peer dies mid-chunk: rank 1 runs in
 * a forked child, stopped while rank 0's megabyte chunks are on their way
 * and then SIGKILLed. Rank 0's all-reduce fails naming rank 1, and returns
 * only once gRPC has let go of its buffer, which the test overwrites and
 * frees the moment it returns (a sanitizer build reports any later read). */
#include "tcoll.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tchild.h"
#include "tcommon.h"

#define SESSION 31
#define N       ((size_t)8 << 20) /* 32 MiB: 32 chunks of 1 MiB */
#define CHUNK   ((size_t)1 << 20)

static pid_t peer;

static void fini(void)
{
    tcom_reap(&peer);
    co_teardown();
}

static void listen_as(int rank)
{
    co_make_hub(rank);
    int rc = co_listen_again(rank);
    cr_assert(rc == 0, "rank %d cannot listen on %s: %s", rank, R.r[rank].addr,
              ferry_err_name(rc));
}

/* The child: rank 1, all-reducing until it is killed. */
static void run_peer(int fd, const rt_comm_opts *o)
{
    listen_as(1);
    char err[CO_ERRLEN] = "";
    if (co_join(1, o, err, sizeof err) != 0)
        _exit(1);
    float *buf = malloc(N * sizeof *buf);
    if (!buf || write(fd, "r", 1) != 1)
        _exit(1);
    for (;;) {
        co_fill_random(buf, N, 2);
        if (rt_comm_allreduce(R.r[1].comm, buf, N, NULL, NULL, err, sizeof err) != 0)
            pause();
    }
}

static void step_with_a_killed_peer(rt_compress compress)
{
    R.world = 2;
    for (int i = 0; i < 2; i++) {
        snprintf(R.r[i].addr, sizeof R.r[i].addr, "127.0.0.1:%d", tcom_free_port());
        R.peers[i] = R.r[i].addr;
    }
    rt_comm_opts o = co_opts(SESSION, CHUNK * sizeof(float), compress, 5000);
    int fds[2];
    cr_assert(pipe(fds) == 0);
    /* Before anything here starts gRPC. */
    peer = tcom_fork();
    if (peer == 0) {
        close(fds[0]);
        run_peer(fds[1], &o);
    }
    close(fds[1]);
    listen_as(0);
    char err[CO_ERRLEN] = "";
    int rc = co_join(0, &o, err, sizeof err);
    cr_assert(rc == 0, "rank 0: %s: %s", ferry_err_name(rc), err);
    char c;
    cr_assert(read(fds[0], &c, 1) == 1, "rank 1 did not start");
    close(fds[0]);

    float *buf = malloc(N * sizeof *buf);
    cr_assert(buf);
    /* One step that goes through: both ranks are in, the windows grown. */
    co_fill_random(buf, N, 1);
    rc = rt_comm_allreduce(R.r[0].comm, buf, N, NULL, NULL, err, sizeof err);
    cr_assert(rc == 0, "the first step: %s: %s", ferry_err_name(rc), err);

    cr_assert(kill(peer, SIGSTOP) == 0);
    pthread_t th;
    tcom_kill_after(peer, 300, &th);
    double t0 = co_now_ms();
    co_fill_random(buf, N, 1);
    rc = rt_comm_allreduce(R.r[0].comm, buf, N, NULL, NULL, err, sizeof err);
    double took = co_now_ms() - t0;
    /* The caller's to reuse now. */
    memset(buf, 0xee, N * sizeof *buf);
    free(buf);
    pthread_join(th, NULL);
    tcom_reap(&peer);
    cr_assert(rc != 0, "a step whose peer was killed succeeded");
    cr_assert(strstr(err, "rank 1") && strstr(err, R.r[1].addr), "%s: %s",
              ferry_err_name(rc), err);
    cr_assert(took < 5000 + 3000, "the step took %.0f ms", took);
    cr_log_info("step with a killed peer: %s after %.0f ms: %s", ferry_err_name(rc), took,
                err);
    co_finish();
}

/* Two ranks exchange their buffers, sent from the caller's memory. */
Test(kill, a_step_whose_peer_dies_mid_chunk_fails_and_lets_go_of_the_buffer,
     .init = co_setup, .fini = fini, .timeout = 120)
{
    step_with_a_killed_peer(RT_COMPRESS_NONE);
}

/* With fp16 the ring sends converted copies, freed once gRPC lets go. */
Test(kill, an_fp16_step_whose_peer_dies_mid_chunk_fails_and_frees_its_copies,
     .init = co_setup, .fini = fini, .timeout = 120)
{
    step_with_a_killed_peer(RT_COMPRESS_FP16);
}
