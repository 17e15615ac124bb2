/* tests/collective — chunks sent by hand, with the session's secret (by a
 * client that has it, as a rank's own process does: the checks behind the
 * secret's; one without it is refused first, test-secret.c) for
 * collectives the receiver has not
 * started: a stray chunk of zeros for a future step (before and after the
 * neighbour's own chunks have come), one with the wrong element count, and
 * a flood of them. The session runs its collectives
 * afterwards and is compared with an undisturbed twin (a second session
 * of the same ranks, the same inputs): it either gives the same bits or
 * fails naming where the stray came from; and what it keeps for
 * collectives not yet started stays within its budget and goes with it. */
#include "tcoll.h"
#include "tcommon.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/collective/coll_int.h"

TestSuite(strays, .timeout = 120);

#define SESSION 31
#define TWIN    32
#define TARGET  1
#define COUNT   3000 /* segments of 1000 floats: one chunk each */
#define SEG     1000
#define REPS    2 /* collectives run after the strays: steps 1 and 2 */

/* REPS all-reduces of REPS buffers, on each rank's session or its twin. */
typedef struct reps_arg {
    float **bufs[REPS];
    bool twin;
    int skip; /* a rank whose first all-reduce was started by the test */
    rt_comm_op *started;
} reps_arg;

static int reps_fn(int rank, void *arg, char *err, size_t errlen)
{
    reps_arg *a = arg;
    rt_comm *c = a->twin ? R.r[rank].comm2 : R.r[rank].comm;
    for (int k = 0; k < REPS; k++) {
        int rc =
            k == 0 && rank == a->skip && a->started
                ? rt_comm_wait(c, a->started, NULL, NULL, err, errlen)
                : rt_comm_allreduce(c, a->bufs[k][rank], COUNT, NULL, NULL, err, errlen);
        if (rc)
            return rc;
    }
    return 0;
}

/* The fixture's client, with a channel of its own: gRPC shares one
 * connection between the channels of a process that have the same target
 * and arguments, and the strays must come from another caller than rank
 * 0's chunks, as they would from another process. */
static void stray_client_to(int rank)
{
    cr_assert(uv_loop_init(&R.loop) == 0);
    R.loop_open = true;
    int rc = rpc_client_create(&R.loop, &R.client);
    cr_assert(rc == 0, "rpc_client_create: %s", ferry_err_name(rc));
    rpc_channel_opts o = {.max_payload = CO_MAX_PAYLOAD + 4096};
    rc = rpc_channel_create(R.client, R.r[rank].addr, &o, &R.ch);
    cr_assert(rc == 0, "rpc_channel_create(%s): %s", R.r[rank].addr, ferry_err_name(rc));
}

/* The inputs of both sessions, and both sessions. */
typedef struct twins {
    reps_arg run, twin;
} twins;

static void twins_start(twins *t, int world, size_t chunk_bytes)
{
    co_start(world);
    rt_comm_opts o = co_opts(SESSION, chunk_bytes, RT_COMPRESS_NONE, CO_TIMEOUT_MS);
    co_join_all(&o);
    rt_comm_opts o2 = co_opts(TWIN, chunk_bytes, RT_COMPRESS_NONE, CO_TIMEOUT_MS);
    for (int r = 0; r < world; r++) {
        char err[CO_ERRLEN] = "";
        int rc = co_join2(r, &o2, err, sizeof err);
        cr_assert(rc == 0, "rank %d: the twin session: %s", r, err);
    }
    memset(t, 0, sizeof *t);
    t->run.skip = t->twin.skip = -1;
    t->twin.twin = true;
    for (int k = 0; k < REPS; k++) {
        t->run.bufs[k] = co_bufs(world, COUNT, 7 + (uint64_t)k);
        t->twin.bufs[k] = co_copy_bufs(t->run.bufs[k], world, COUNT);
    }
    stray_client_to(TARGET);
}

/* Runs the twin and asserts the run gave the same bits on every rank. */
static void twins_assert_identical(twins *t, const char *what)
{
    co_run_ok(reps_fn, &t->twin, "the undisturbed twin");
    for (int k = 0; k < REPS; k++)
        for (int r = 0; r < R.world; r++)
            cr_assert(
                memcmp(t->run.bufs[k][r], t->twin.bufs[k][r], COUNT * sizeof(float)) == 0,
                "%s: rank %d's all-reduce %d differs from its undisturbed twin", what, r,
                k + 1);
}

static void twins_free(twins *t)
{
    for (int k = 0; k < REPS; k++) {
        co_free_bufs(t->run.bufs[k], R.world);
        co_free_bufs(t->twin.bufs[k], R.world);
    }
}

/* Rank TARGET's reduce-scatter chunk 0 of ring step 0, from rank 0, of a
 * `count`-float all-reduce at `step`. */
static Ferry__ReduceChunkRequest chunk_req(uint64_t step, uint64_t count)
{
    Ferry__ReduceChunkRequest req = FERRY__REDUCE_CHUNK_REQUEST__INIT;
    req.job = SESSION;
    req.step = step;
    req.phase = 0;
    req.from_rank = TARGET - 1;
    req.count = count;
    req.elem = FERRY__ELEM__ELEM_F32;
    req.secret = co_secret_field();
    return req;
}

/* Sends rank TARGET a stray chunk_req(step, count) of `floats` floats, all
 * `v`; returns the call's result, its text in err. */
static int send_stray(uint64_t step, uint64_t count, size_t floats, float v, char *err,
                      size_t errlen)
{
    Ferry__ReduceChunkRequest req = chunk_req(step, count);
    float *vals = co_alloc(floats * sizeof(float));
    for (size_t i = 0; i < floats; i++)
        vals[i] = v;
    int rc = co_send_chunk(&req, vals, floats * sizeof(float), err, errlen);
    co_free(vals);
    return rc;
}

static rt_comm_stats target_stats(void)
{
    rt_comm_stats st;
    rt_comm_get_stats(R.r[TARGET].comm, &st);
    return st;
}

CO_TEST(strays, a_zero_chunk_for_a_future_step_changes_nothing_or_fails_naming_its_sender)
{
    twins t;
    twins_start(&t, 3, CO_CHUNK_BYTES);
    char err[CO_ERRLEN];
    int rc = send_stray(2, COUNT, SEG, 0, err, sizeof err);
    cr_assert(rc == 0, "a well-formed chunk for step 2 was refused: %s", err);
    cr_assert(target_stats().held == 1, "the chunk for step 2 was not kept");

    co_result res[CO_MAX_RANKS];
    co_run(reps_fn, &t.run, res);
    bool all_ok = true;
    for (int r = 0; r < 3; r++)
        all_ok &= res[r].rc == 0;
    if (all_ok) {
        twins_assert_identical(&t, "after a stray zero chunk");
    } else {
        /* Which of the two chunks for that slot was rank 0's cannot be
         * told: the step fails, naming both callers, never "did not take"
         * a collective as if the receiver had lost it. */
        cr_assert(res[TARGET].rc == FERRY_EPROTO,
                  "rank %d, which took both chunks, got %s (%s)", TARGET,
                  ferry_err_name(res[TARGET].rc), res[TARGET].err);
        int named = -1;
        for (int r = 0; r < 3; r++) {
            cr_assert(!strstr(res[r].err, "are done"),
                      "rank %d blames a finished collective: %s", r, res[r].err);
            if (res[r].rc && strstr(res[r].err, "came twice"))
                named = r;
        }
        cr_assert(named >= 0, "no rank says a chunk came twice: %s | %s | %s", res[0].err,
                  res[1].err, res[2].err);
        const char *e = res[named].err;
        const char *first = strstr(e, "first from ipv"),
                   *then = strstr(e, "then from ipv");
        cr_assert(first && then, "rank %d does not name both callers: %s", named, e);
        const char *end = strstr(then, ": a client");
        cr_assert(end, "%s", e);
        size_t la = strcspn(first + strlen("first from "), ",");
        size_t lb = (size_t)(end - then) - strlen("then from ");
        cr_assert(la != lb || strncmp(first + strlen("first from "),
                                      then + strlen("then from "), la) != 0,
                  "the two callers named are one: %s", e);
    }
    twins_free(&t);
}

CO_TEST(strays, a_zero_chunk_after_the_neighbours_own_is_refused_at_once_naming_both)
{
    twins t;
    twins_start(&t, 3, CO_CHUNK_BYTES);
    /* Steps 1 and 2: rank 0's chunks reach rank 1 over rank 0's connection. */
    co_run_ok(reps_fn, &t.run, "the first steps");
    co_run_ok(reps_fn, &t.twin, "the twin's first steps");
    char err[CO_ERRLEN];
    uint64_t held = target_stats().held;
    int rc = send_stray(4, COUNT, SEG, 0, err, sizeof err);
    cr_assert(rc == FERRY_EINVAL, "got %s (%s), want EINVAL", ferry_err_name(rc), err);
    cr_assert(strstr(err, "claims to be rank 0's") && strstr(err, "come from ipv"),
              "the refusal does not name both callers: %s", err);
    cr_assert(target_stats().held == held, "the stray was kept");
    /* Steps 3 and 4, on the same inputs as the twin's. */
    co_run_ok(reps_fn, &t.run, "the steps after the stray");
    twins_assert_identical(&t, "after a refused stray");
    twins_free(&t);
}

CO_TEST(strays,
        a_chunk_of_the_wrong_count_kept_for_a_future_step_is_dropped_when_it_starts)
{
    twins t;
    twins_start(&t, 3, CO_CHUNK_BYTES);
    /* 3003 floats: rank 1's first segment is 1001 floats, of a value that
     * would show in the sum if it were added. */
    char err[CO_ERRLEN];
    int rc = send_stray(1, COUNT + 3, SEG + 1, 1e6f, err, sizeof err);
    cr_assert(rc == 0, "kept until step 1 starts: %s", err);
    co_run_ok(reps_fn, &t.run, "the run after a chunk of the wrong count");
    rt_comm_stats st = target_stats();
    cr_assert(st.strays == 1, "%llu chunks dropped, want 1",
              (unsigned long long)st.strays);
    cr_assert(st.held_bytes == 0, "%llu bytes still charged",
              (unsigned long long)st.held_bytes);
    twins_assert_identical(&t, "after a chunk of the wrong count");
    twins_free(&t);
}

CO_TEST(strays,
        a_chunk_of_the_wrong_count_for_a_started_step_is_refused_naming_its_sender)
{
    twins t;
    twins_start(&t, 3, CO_CHUNK_BYTES);
    int rc = rt_comm_allreduce_start(R.r[TARGET].comm, t.run.bufs[0][TARGET], COUNT,
                                     &t.run.started);
    cr_assert(rc == 0);
    t.run.skip = TARGET;
    char err[CO_ERRLEN];
    rc = send_stray(1, COUNT + 3, SEG + 1, 1e6f, err, sizeof err);
    cr_assert(rc == FERRY_EINVAL, "got %s (%s), want EINVAL", ferry_err_name(rc), err);
    cr_assert(strstr(err, "3003-float collective 1 from ipv4:127.0.0.1:") ||
                  strstr(err, "3003-float collective 1 from ipv6:"),
              "the refusal does not name its caller: %s", err);
    cr_assert(strstr(err, "3000 floats"), "the refusal does not say what step 1 is: %s",
              err);
    co_run_ok(reps_fn, &t.run, "the run after a refused chunk");
    twins_assert_identical(&t, "after a refused chunk of the wrong count");
    twins_free(&t);
}

/* ---- without the session's secret ----------------------------------------------- */

/* In a world of 2 whose all-reduce is one chunk exchanged, a chunk that
 * came before the neighbour's first could finish the step here with its
 * own values, had it the secret. Without it, it is refused at once,
 * whatever it claims. */
#define ONE_CHUNK_BYTES 16384 /* COUNT floats in one chunk */

CO_TEST(strays,
        chunks_without_the_secret_are_refused_at_once_even_before_the_neighbours_first)
{
    twins t;
    twins_start(&t, 2, ONE_CHUNK_BYTES);
    float *zeros = co_alloc((COUNT + 3) * sizeof(float));
    memset(zeros, 0, (COUNT + 3) * sizeof(float));
    uint8_t wrong[RT_COMM_SECRET_BYTES];
    memcpy(wrong, co_secret, sizeof wrong);
    wrong[sizeof wrong - 1] ^= 1;
    const struct {
        ProtobufCBinaryData secret;
        const char *what;
    } keys[] = {{{0, NULL}, "no secret"},
                {{sizeof wrong, wrong}, "a secret one bit off"},
                {{RT_COMM_SECRET_BYTES / 2, (uint8_t *)co_secret}, "half the secret"}};
    /* Rank 0's exchange chunk of step 1 (the opening: nothing has come
     * from rank 0 yet), of step 2, and one of the wrong count. */
    const struct {
        uint64_t step, count;
    } chunks[] = {{1, COUNT}, {2, COUNT}, {1, COUNT + 3}};
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++)
        for (size_t i = 0; i < sizeof chunks / sizeof chunks[0]; i++) {
            Ferry__ReduceChunkRequest req = chunk_req(chunks[i].step, chunks[i].count);
            req.phase = RT_PHASE_EX;
            req.secret = keys[k].secret;
            char err[CO_ERRLEN];
            int rc = co_send_chunk(&req, zeros, chunks[i].count * sizeof(float), err,
                                   sizeof err);
            cr_assert(rc == FERRY_EACCES, "%s, step %llu: got %s (%s), want EACCES",
                      keys[k].what, (unsigned long long)chunks[i].step,
                      ferry_err_name(rc), err);
            cr_assert(
                strstr(err, "does not carry the session's secret") &&
                    (strstr(err, "from ipv4:127.0.0.1:") || strstr(err, "from ipv6:")),
                "%s: the refusal does not name its caller: %s", keys[k].what, err);
            cr_assert(!strstr(err, "collective"),
                      "%s: the refusal tells of the session: %s", keys[k].what, err);
        }
    co_free(zeros);
    rt_comm_stats st = target_stats();
    cr_assert(st.held == 0 && st.held_refused == 0 && st.strays == 0,
              "chunks without the secret were counted: %llu kept, %llu refused as held",
              (unsigned long long)st.held, (unsigned long long)st.held_refused);
    co_run_ok(reps_fn, &t.run, "the run after the chunks without the secret");
    twins_assert_identical(&t, "after chunks without the secret");
    twins_free(&t);
}

/* Ranks told different secrets: each one's chunks are refused by its
 * neighbour. That is the ranks disagreeing: EPROTO on both, at once,
 * naming the neighbour. */
CO_TEST(strays, ranks_whose_secrets_differ_fail_at_once_with_eproto)
{
    co_start(2);
    uint8_t other[RT_COMM_SECRET_BYTES];
    memcpy(other, co_secret, sizeof other);
    other[0] ^= 0x80;
    rt_comm_opts o[2] = {
        co_opts(SESSION, ONE_CHUNK_BYTES, RT_COMPRESS_NONE, CO_TIMEOUT_MS),
        co_opts(SESSION, ONE_CHUNK_BYTES, RT_COMPRESS_NONE, CO_TIMEOUT_MS)};
    o[1].secret = other;
    for (int r = 0; r < 2; r++) {
        char err[CO_ERRLEN] = "";
        int rc = co_join(r, &o[r], err, sizeof err);
        cr_assert(rc == 0, "rank %d: %s: %s", r, ferry_err_name(rc), err);
    }
    float **bufs = co_bufs(2, COUNT, 3);
    co_allreduce_arg a = {bufs, COUNT};
    co_result res[CO_MAX_RANKS];
    co_run(co_allreduce_fn, &a, res);
    for (int r = 0; r < 2; r++) {
        double ms = res[r].end_ms - res[r].start_ms;
        cr_assert(res[r].rc == FERRY_EPROTO, "rank %d got %s (%s), want EPROTO", r,
                  ferry_err_name(res[r].rc), res[r].err);
        char who[64];
        snprintf(who, sizeof who, "rank %d (%s)", 1 - r, R.peers[1 - r]);
        cr_assert(strstr(res[r].err, who) &&
                      strstr(res[r].err, "does not carry the session's secret"),
                  "rank %d does not name %s and the secret: %s", r, who, res[r].err);
        cr_assert(ms < CO_TIMEOUT_MS / 2, "rank %d took %.0f ms to notice", r, ms);
    }
    co_free_bufs(bufs, 2);
}

/* ---- a flood ------------------------------------------------------------------- */

#define FLOOD       3000
#define FLOOD_CHUNK 32768                         /* bytes: the session's chunk */
#define FLOOD_FL    (FLOOD_CHUNK / sizeof(float)) /* floats a chunk */
#define FLOOD_PER   64                            /* chunks a segment */
#define FLOOD_COUNT (3 * FLOOD_PER * FLOOD_FL)
#define FLOOD_SLOTS (4 * FLOOD_PER) /* 2 phases x 2 ring steps */
#define FLOOD_FIRST 5               /* steps the run never reaches */


CO_TEST(strays, a_flood_of_chunks_for_future_steps_is_kept_within_the_budget)
{
    twins t;
    twins_start(&t, 3, FLOOD_CHUNK);
    float *junk = co_alloc(FLOOD_CHUNK);
    for (size_t i = 0; i < FLOOD_FL; i++)
        junk[i] = 1e6f;
    long rss0 = tcom_rss_kib(0);
    int kept = 0, refused = 0;
    char err[CO_ERRLEN], first_refusal[CO_ERRLEN] = "";
    for (int i = 0; i < FLOOD; i++) {
        int slot = i % FLOOD_SLOTS;
        Ferry__ReduceChunkRequest req =
            chunk_req(FLOOD_FIRST + (uint64_t)(i / FLOOD_SLOTS), FLOOD_COUNT);
        req.phase = (uint32_t)(slot / (2 * FLOOD_PER));
        req.ring_step = (uint32_t)(slot / FLOOD_PER % 2);
        req.chunk = (uint32_t)(slot % FLOOD_PER);
        int rc = co_send_chunk(&req, junk, FLOOD_CHUNK, err, sizeof err);
        cr_assert(rc == 0 || rc == FERRY_ENOENT, "chunk %d: %s (%s)", i,
                  ferry_err_name(rc), err);
        kept += rc == 0;
        refused += rc != 0;
        if (rc && !first_refusal[0])
            snprintf(first_refusal, sizeof first_refusal, "%s", err);
    }
    /* Past the steps a session keeps chunks for: refused whatever room is
     * left. */
    Ferry__ReduceChunkRequest far = chunk_req(RT_COMM_AHEAD + 1, FLOOD_COUNT);
    int rc = co_send_chunk(&far, junk, FLOOD_CHUNK, err, sizeof err);
    cr_assert(rc == FERRY_ENOENT && strstr(err, "up to 16"),
              "a chunk for step %u: %s (%s)", RT_COMM_AHEAD + 1, ferry_err_name(rc), err);
    long rss1 = tcom_rss_kib(0);
    co_free(junk);

    rt_comm_stats st = target_stats();
    cr_log_info("flood of %d chunks of %d bytes: %d kept, %d refused, %llu bytes charged "
                "at most, RSS %ld -> %ld KiB",
                FLOOD, FLOOD_CHUNK, kept, refused, (unsigned long long)st.held_peak, rss0,
                rss1);
    size_t cost = FLOOD_CHUNK + RT_COMM_HELD_OVERHEAD;
    cr_assert(refused > 0 && strstr(first_refusal, "MiB"),
              "%d of %d chunks kept: none refused for the budget (%s)", kept, FLOOD,
              first_refusal);
    cr_assert((size_t)kept == RT_COMM_HELD_BYTES / cost, "%d chunks kept, want %zu", kept,
              RT_COMM_HELD_BYTES / cost);
    cr_assert(st.held_peak <= RT_COMM_HELD_BYTES && st.held_bytes == st.held_peak,
              "charged %llu bytes at most, %llu now, budget %zu",
              (unsigned long long)st.held_peak, (unsigned long long)st.held_bytes,
              RT_COMM_HELD_BYTES);
    cr_assert(st.held_refused == (uint64_t)refused + 1);
#if !defined(__SANITIZE_ADDRESS__)
    /* The process holds three ranks and the test's client: the kept bytes
     * and what gRPC keeps with them, with room for the allocator. */
    long grew = (rss1 - rss0) / 1024;
    cr_assert(grew <= (long)(RT_COMM_HELD_BYTES >> 20) * 2,
              "RSS grew by %ld MiB for a budget of %zu MiB", grew,
              RT_COMM_HELD_BYTES >> 20);
#else
    (void)rss0;
    (void)rss1;
#endif

    /* The run's own chunks for steps it has not started wait at the sender
     * while the budget is full, and go through once the step starts. */
    co_run_ok(reps_fn, &t.run, "the run after the flood");
    twins_assert_identical(&t, "after a flood of chunks for future steps");
    twins_free(&t);
    /* The kept chunks go with the session (a leak in sanitizer builds). */
    co_leave_all();
    long rss2 = tcom_rss_kib(0);
    cr_log_info("after the sessions ended: RSS %ld KiB", rss2);
#if !defined(__SANITIZE_ADDRESS__)
    /* Handed back to the system, not only freed: half the budget is room
     * for what the run itself and gRPC keep. */
    cr_assert((rss2 - rss0) / 1024 <= (long)(RT_COMM_HELD_BYTES >> 21),
              "RSS %ld KiB after the sessions ended, %ld KiB before the flood", rss2, rss0);
#endif
}
