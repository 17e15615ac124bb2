/* The record a worker keeps of its last call that stepped, as it ended:
 * what `ferry submit` reads from the survivors to say in which step and
 * phase a lost worker left the run. */
#include <criterion/criterion.h>
#include <string.h>

#include "runtime/where.h"

Test(where_ended, the_last_stepping_call_is_kept_as_it_ended)
{
    rt_where_enter("a.so", "ferry.train.epoch");
    rt_where_step(3, 12, "forward and backward");
    rt_where_waiting("all-reduce", 2);
    rt_where_leave();
    /* A call that never stepped (a hold, a discard) does not replace it. */
    rt_where_enter("a.so", "ferry.train.end");
    rt_where_phase("ending", -1);
    rt_where_leave();
    rt_where_info e;
    cr_assert(rt_where_ended(&e));
    cr_expect_str_eq(e.function, "ferry.train.epoch");
    cr_expect_str_eq(e.phase, "all-reduce");
    cr_expect_eq(e.epoch, 3);
    cr_expect_eq(e.step, 12);
    cr_expect_eq(e.waits_for, 2);
    cr_expect(e.idle_s >= 0 && e.idle_s < 60, "ended %.3f s ago", e.idle_s);

    proto_stats_reply out = {0};
    rt_where_stats buf;
    rt_where_to_stats(&buf, &out);
    cr_expect_str_eq(out.ended_function, "ferry.train.epoch");
    cr_expect_str_eq(out.ended_phase, "all-reduce");
    cr_expect_eq(out.ended_step, 12);
    cr_expect_eq(out.ended_waits_for, 2);
}

Test(where_ended, nothing_before_a_call_stepped)
{
    rt_where_info e;
    proto_stats_reply out = {0};
    rt_where_stats buf;
    cr_expect(!rt_where_ended(&e));
    rt_where_to_stats(&buf, &out);
    cr_expect_str_eq(out.ended_function, "");
    cr_expect_eq(out.ended_step, 0);
}
