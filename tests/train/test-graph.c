/* The rule of step graphs (runtime/train/graph.c): when a training step is
 * captured as a device graph, replayed, or run op by op. Pure logic, so it
 * is checked here on the cpu; tests/cuda runs the captures on a GPU. The
 * "graphs" are made-up pointers: the rule never looks inside them. */
#include <criterion/criterion.h>

#include "runtime/device/device.h"
#include "runtime/train/train.h"
#include "ttrain.h"

static char bufs[8][4];
#define X(i) ((const void *)bufs[i])
#define G(i) ((void *)(bufs[i] + 1))

static rt_graph_key key(int n, int lane)
{
    return (rt_graph_key){.n = n, .x = X(lane), .labels = X(lane + 4)};
}

/* Decides for `k` and, for a capture, stores `graph` (NULL: it broke). */
static rt_graph_action step(rt_graph_plan *p, rt_graph_key k, void *graph, int *slot)
{
    void *evict = NULL;
    rt_graph_action a = rt_graph_decide(p, &k, slot, &evict);
    cr_assert_null(evict, "nothing to evict with this few keys");
    if (a == RT_GRAPH_CAPTURE)
        rt_graph_captured(p, *slot, graph);
    return a;
}

Test(graph_plan, the_env_turns_graphs_off_with_0_only)
{
    cr_assert(rt_graphs_enabled(NULL));
    cr_assert(rt_graphs_enabled(""));
    cr_assert(rt_graphs_enabled("1"));
    cr_assert(rt_graphs_enabled("yes"));
    cr_assert_not(rt_graphs_enabled("0"));
}

Test(graph_plan, off_every_step_runs_plain)
{
    rt_graph_plan p;
    rt_graph_plan_init(&p, false);
    int slot;
    for (int i = 0; i < 5; i++)
        cr_assert_eq(step(&p, key(128, 0), G(0), &slot), RT_GRAPH_PLAIN);
}

Test(graph_plan, an_epoch_warms_up_captures_replays_and_runs_its_short_batch_plain)
{
    rt_graph_plan p;
    rt_graph_plan_init(&p, true);
    int slot = -1, s2 = -1;
    /* Epoch 1: the first step chooses algorithms and grows workspaces. */
    cr_assert_eq(step(&p, key(128, 0), G(0), &slot), RT_GRAPH_PLAIN);
    cr_assert_eq(step(&p, key(128, 0), G(0), &slot), RT_GRAPH_CAPTURE);
    cr_assert_eq(rt_graph_at(&p, slot), G(0));
    for (int i = 0; i < 5; i++) {
        cr_assert_eq(step(&p, key(128, 0), NULL, &s2), RT_GRAPH_REPLAY);
        cr_assert_eq(s2, slot);
    }
    /* The last, short batch: seen once an epoch, never captured. */
    cr_assert_eq(step(&p, key(96, 0), G(1), &s2), RT_GRAPH_PLAIN);
    /* Epoch 2 replays from its first step; the short batch stays plain. */
    cr_assert_eq(step(&p, key(128, 0), NULL, &s2), RT_GRAPH_REPLAY);
    cr_assert_eq(step(&p, key(128, 0), NULL, &s2), RT_GRAPH_REPLAY);
    cr_assert_eq(step(&p, key(96, 0), G(1), &s2), RT_GRAPH_PLAIN);
}

Test(graph_plan, a_new_batch_size_warms_up_then_gets_its_own_graph)
{
    rt_graph_plan p;
    rt_graph_plan_init(&p, true);
    int a = -1, b = -1, s = -1;
    cr_assert_eq(step(&p, key(128, 0), G(0), &s), RT_GRAPH_PLAIN);
    cr_assert_eq(step(&p, key(128, 0), G(0), &a), RT_GRAPH_CAPTURE);
    cr_assert_eq(step(&p, key(64, 0), G(1), &s), RT_GRAPH_PLAIN);
    cr_assert_eq(step(&p, key(64, 0), G(1), &b), RT_GRAPH_CAPTURE);
    cr_assert_neq(a, b);
    cr_assert_eq(step(&p, key(128, 0), NULL, &s), RT_GRAPH_REPLAY);
    cr_assert_eq(s, a);
    cr_assert_eq(step(&p, key(64, 0), NULL, &s), RT_GRAPH_REPLAY);
    cr_assert_eq(s, b);
}

Test(graph_plan, staged_lanes_alternate_and_each_gets_a_graph)
{
    rt_graph_plan p;
    rt_graph_plan_init(&p, true);
    int s = -1;
    cr_assert_eq(step(&p, key(128, 0), G(0), &s), RT_GRAPH_PLAIN);
    cr_assert_eq(step(&p, key(128, 1), G(1), &s), RT_GRAPH_CAPTURE);
    cr_assert_eq(step(&p, key(128, 0), G(0), &s), RT_GRAPH_CAPTURE);
    for (int i = 0; i < 6; i++) {
        cr_assert_eq(step(&p, key(128, i % 2), NULL, &s), RT_GRAPH_REPLAY);
        cr_assert_eq(rt_graph_at(&p, s), G(i % 2));
    }
}

Test(graph_plan, a_step_whose_capture_broke_runs_plain_from_then_on)
{
    rt_graph_plan p;
    rt_graph_plan_init(&p, true);
    int s = -1;
    cr_assert_eq(step(&p, key(128, 0), NULL, &s), RT_GRAPH_PLAIN);
    cr_assert_eq(step(&p, key(128, 0), NULL, &s), RT_GRAPH_CAPTURE);
    cr_assert_null(rt_graph_at(&p, s));
    for (int i = 0; i < 4; i++)
        cr_assert_eq(step(&p, key(128, 0), G(0), &s), RT_GRAPH_PLAIN);
}

Test(graph_plan, a_stale_graph_is_forgotten_and_captured_again)
{
    rt_graph_plan p;
    rt_graph_plan_init(&p, true);
    int s = -1;
    step(&p, key(128, 0), NULL, &s);
    cr_assert_eq(step(&p, key(128, 0), G(0), &s), RT_GRAPH_CAPTURE);
    cr_assert_eq(step(&p, key(128, 0), NULL, &s), RT_GRAPH_REPLAY);
    /* graph_run said a workspace moved. */
    cr_assert_eq(rt_graph_forget(&p, s), G(0));
    cr_assert_null(rt_graph_at(&p, s));
    cr_assert_eq(step(&p, key(128, 0), G(2), &s), RT_GRAPH_CAPTURE);
    cr_assert_eq(step(&p, key(128, 0), NULL, &s), RT_GRAPH_REPLAY);
    cr_assert_eq(rt_graph_at(&p, s), G(2));
    cr_assert_null(rt_graph_forget(&p, -1));
    cr_assert_null(rt_graph_at(&p, RT_GRAPHS));
}

Test(graph_plan, more_shapes_than_slots_evict_the_least_recently_used)
{
    rt_graph_plan p;
    rt_graph_plan_init(&p, true);
    int s = -1;
    void *evict = NULL;
    rt_graph_key k;
    /* RT_GRAPHS shapes, each warmed up and captured: slots full. */
    for (int i = 0; i < RT_GRAPHS; i++) {
        k = key(10 + i, 0);
        cr_assert_eq(rt_graph_decide(&p, &k, &s, &evict), RT_GRAPH_PLAIN);
        cr_assert_eq(rt_graph_decide(&p, &k, &s, &evict), RT_GRAPH_CAPTURE);
        cr_assert_null(evict);
        rt_graph_captured(&p, s, G(i));
    }
    /* Shape 10 used again: shape 11 is now the oldest. */
    k = key(10, 0);
    cr_assert_eq(rt_graph_decide(&p, &k, &s, &evict), RT_GRAPH_REPLAY);
    k = key(50, 0);
    cr_assert_eq(rt_graph_decide(&p, &k, &s, &evict), RT_GRAPH_PLAIN);
    cr_assert_eq(rt_graph_decide(&p, &k, &s, &evict), RT_GRAPH_CAPTURE);
    cr_assert_eq(evict, G(1), "evicted the graph of shape 11");
    rt_graph_captured(&p, s, G(5));
    k = key(11, 0);
    cr_assert_eq(rt_graph_decide(&p, &k, &s, &evict), RT_GRAPH_PLAIN);
    k = key(10, 0);
    cr_assert_eq(rt_graph_decide(&p, &k, &s, &evict), RT_GRAPH_REPLAY);
}

Test(graph_plan, an_empty_batch_runs_plain)
{
    rt_graph_plan p;
    rt_graph_plan_init(&p, true);
    int s = -1;
    cr_assert_eq(step(&p, key(0, 0), G(0), &s), RT_GRAPH_PLAIN);
    cr_assert_eq(step(&p, key(0, 0), G(0), &s), RT_GRAPH_PLAIN);
}

/* The cpu has no graphs: a trainer there runs every step plain, and says
 * so in its statistics. */
Test(graph_plan, the_cpu_trainer_never_captures)
{
    ttrain tt;
    ttrain_open(&tt, "mlp");
    rt_dataset tr, te;
    ttrain_random_set(&tr, 200, 1, 28, 28, 10, 1);
    ttrain_random_set(&te, 50, 1, 28, 28, 10, 2);
    rt_train_opts o = {.batch = 64,
                       .optim = {.kind = RT_OPT_SGD, .lr = 0.05f},
                       .seed = 1,
                       .train_set = &tr,
                       .test_set = &te};
    rt_trainer *t = NULL;
    char err[512] = "";
    cr_assert_eq(rt_trainer_create(tt.mod.task->model, tt.dev, &o, &t, err, sizeof err),
                 0, "%s", err);
    rt_epoch_stats st;
    cr_assert_eq(rt_trainer_epoch(t, &st, NULL, NULL, err, sizeof err), 0, "%s", err);
    cr_assert_eq(st.graph_steps, 0);
    cr_assert_eq(st.graph_captures, 0);
    rt_trainer_destroy(t);
    ttrain_free_set(&tr);
    ttrain_free_set(&te);
    ttrain_close(&tt);
}
