/* A rank's timeline (runtime/train/timeline.c): events kept in order up to
 * the buffer's size, the rest counted as dropped; a copy that outlives it;
 * a trainer that records one span of each kind a step, and one that does
 * not record at all. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "runtime/train/timeline.h"
#include "tcommon.h"
#include "ttrain.h"

Test(timeline, events_past_the_buffer_are_counted_and_dropped)
{
    rt_timeline *tl = rt_timeline_create(4);
    cr_assert(tl);
    double t0 = rt_timeline_now();
    usleep(2000);
    double end = rt_timeline_since(tl, PROTO_TL_BUCKET, 3, t0);
    cr_assert(end - t0 >= 0.002, "a 2 ms span ended after %g s", end - t0);
    for (uint32_t i = 0; i < 5; i++)
        rt_timeline_since(tl, PROTO_TL_PUSH, i, rt_timeline_now());
    rt_timeline_events v;
    rt_timeline_view(tl, &v);
    cr_assert_eq(v.n, 4);
    cr_assert_eq(v.dropped, 2);
    cr_assert_eq(proto_tl_kind_of(v.what[0]), PROTO_TL_BUCKET);
    cr_assert_eq(proto_tl_arg_of(v.what[0]), 3);
    cr_assert(v.dur_ns[0] >= 2000000, "%llu ns", (unsigned long long)v.dur_ns[0]);
    for (size_t i = 1; i < 4; i++) {
        cr_assert_eq(proto_tl_kind_of(v.what[i]), PROTO_TL_PUSH);
        cr_assert_eq(proto_tl_arg_of(v.what[i]), i - 1, "recorded out of order");
        cr_assert(v.start_ns[i] >= v.start_ns[i - 1]);
    }
    rt_timeline_events c;
    void *blk = rt_timeline_copy(tl, &c);
    cr_assert(blk && c.n == 4 && c.dropped == 2);
    rt_timeline_reset(tl);
    rt_timeline_view(tl, &v);
    cr_assert(v.n == 0 && v.dropped == 0);
    /* The copy is its own: the timeline records over what it had. */
    rt_timeline_since(tl, PROTO_TL_EVAL, 0, rt_timeline_now());
    cr_assert_eq(proto_tl_kind_of(c.what[0]), PROTO_TL_BUCKET);
    cr_assert_eq(proto_tl_arg_of(c.what[0]), 3);
    free(blk);
    rt_timeline_destroy(tl);
    /* None: nothing recorded, and the start handed back. */
    cr_assert_eq(rt_timeline_since(NULL, PROTO_TL_DATA, 0, 12.5), 12.5);
    cr_assert_null(rt_timeline_copy(NULL, &c));
    cr_assert_eq(c.n, 0);
    rt_timeline_reset(NULL);
    rt_timeline_destroy(NULL);
}

Test(timeline, a_trainer_records_each_step_when_asked_and_nothing_otherwise)
{
    ttrain f;
    ttrain_open(&f, "mlp");
    rt_dataset sets[2];
    ttrain_random_set(&sets[0], 640, 1, 28, 28, 10, 1);
    ttrain_random_set(&sets[1], 100, 1, 28, 28, 10, 2);
    rt_train_opts o = {.batch = 64,
                       .optim = {.kind = RT_OPT_SGD, .lr = 0.01f},
                       .seed = 1,
                       .train_set = &sets[0],
                       .test_set = &sets[1]};
    char err[512] = "";
    for (int on = 0; on < 2; on++) {
        o.timeline = on;
        rt_trainer *t;
        cr_assert_eq(rt_trainer_create(f.mod.task->model, f.dev, &o, &t, err, sizeof err),
                     0, "%s", err);
        cr_assert_eq(rt_trainer_timeline(t) != NULL, on);
        rt_epoch_stats st;
        for (int e = 0; e < 2; e++) {
            cr_assert_eq(rt_trainer_epoch(t, &st, NULL, NULL, err, sizeof err), 0, "%s",
                         err);
            if (!on)
                continue;
            /* Each epoch's own: 10 steps, each a batch waited for, a
             * forward+backward and an optimizer step; one evaluation. */
            rt_timeline_events v;
            rt_timeline_view(rt_trainer_timeline(t), &v);
            int count[PROTO_TL_KINDS] = {0};
            for (size_t i = 0; i < v.n; i++)
                count[proto_tl_kind_of(v.what[i])]++;
            cr_assert_eq(count[PROTO_TL_COMPUTE], 10);
            cr_assert_eq(count[PROTO_TL_OPTIM], 10);
            cr_assert(count[PROTO_TL_DATA] >= 10);
            cr_assert_eq(count[PROTO_TL_EVAL], 1);
            cr_assert_eq(count[PROTO_TL_BUCKET] + count[PROTO_TL_PUSH], 0);
            /* The spans lie within the epoch: compute within train time. */
            double compute = 0;
            for (size_t i = 0; i < v.n; i++)
                if (proto_tl_kind_of(v.what[i]) == PROTO_TL_COMPUTE)
                    compute += (double)v.dur_ns[i] / 1e9;
            cr_assert(compute > 0 && compute <= st.train_s, "%g s of %g s", compute,
                      st.train_s);
        }
        rt_trainer_destroy(t);
    }
    ttrain_free_set(&sets[0]);
    ttrain_free_set(&sets[1]);
    ttrain_close(&f);
    tcom_assert_no_leaks();
}
