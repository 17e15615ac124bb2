/* tests/runtime — a call's log lines as the worker keeps them for the
 * reply: in order, up to the bound, then one entry with the count of the
 * others; each line cut to its longest, made safe for a terminal and kept
 * valid UTF-8. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/runtime_int.h"

Test(rt_tasklog, lines_past_the_bound_are_counted_in_a_last_entry)
{
    rt_tasklog l;
    rt_tasklog_init(&l);
    char line[32];
    for (int i = 0; i < RT_TASKLOG_LINES + 123; i++) {
        snprintf(line, sizeof line, "line %d", i);
        rt_tasklog_add(&l, line);
    }
    char **lines = NULL;
    size_t n = rt_tasklog_list(&l, &lines);
    cr_assert_eq(n, RT_TASKLOG_LINES + 1);
    cr_assert_str_eq(lines[0], "line 0");
    snprintf(line, sizeof line, "line %d", RT_TASKLOG_LINES - 1);
    cr_assert_str_eq(lines[RT_TASKLOG_LINES - 1], line);
    cr_assert_str_eq(lines[RT_TASKLOG_LINES], "\x1f"
                                              "123");
    rt_tasklog_fini(&l);
}

Test(rt_tasklog, a_few_lines_come_without_a_count)
{
    rt_tasklog l;
    rt_tasklog_init(&l);
    rt_tasklog_add(&l, "one");
    rt_tasklog_add(&l, "two");
    char **lines = NULL;
    cr_assert_eq(rt_tasklog_list(&l, &lines), 2);
    cr_assert_str_eq(lines[1], "two");
    rt_tasklog_fini(&l);

    rt_tasklog_init(&l);
    cr_assert_eq(rt_tasklog_list(&l, &lines), 0, "nothing logged, nothing sent");
    rt_tasklog_fini(&l);
}

Test(rt_tasklog, the_bytes_are_bounded_too)
{
    rt_tasklog l;
    rt_tasklog_init(&l);
    char *big = malloc(RT_TASKLOG_LINE_MAX + 500);
    cr_assert(big);
    memset(big, 'x', RT_TASKLOG_LINE_MAX + 499);
    big[RT_TASKLOG_LINE_MAX + 499] = '\0';
    int fit = RT_TASKLOG_BYTES / RT_TASKLOG_LINE_MAX;
    for (int i = 0; i < fit + 5; i++)
        rt_tasklog_add(&l, big);
    free(big);
    char **lines = NULL;
    size_t n = rt_tasklog_list(&l, &lines);
    cr_assert_eq(n, (size_t)fit + 1);
    cr_assert_eq(strlen(lines[0]), RT_TASKLOG_LINE_MAX, "a long line is cut");
    cr_assert_str_eq(lines[fit], "\x1f"
                                 "5");
    rt_tasklog_fini(&l);
}

Test(rt_tasklog, control_bytes_become_spaces_and_bad_utf8_a_question_mark)
{
    rt_tasklog l;
    rt_tasklog_init(&l);
    rt_tasklog_add(&l, "a\x1b[2Jb\r\nc\x7f"
                       "d \xff\xfe caf\xc3\xa9 \xe2\x82");
    rt_tasklog_add(&l, "\x1f"
                       "7 is no count");
    char **lines = NULL;
    cr_assert_eq(rt_tasklog_list(&l, &lines), 2);
    cr_assert_str_eq(lines[0], "a [2Jb  c d ?? caf\xc3\xa9 ??");
    cr_assert_str_eq(lines[1], " 7 is no count");
    rt_tasklog_fini(&l);
}

/* What a failed call sends: the latest lines that fit, the list's and then
 * the tail's in the order logged, and a count of all the others. */
static proto_call_reply *tail_of(rt_tasklog *l, size_t max)
{
    proto_bytes b;
    cr_assert_eq(rt_tasklog_pack_tail(l, max, &b), 0);
    proto_call_reply *r = NULL;
    cr_assert_eq(proto_call_reply_unpack(b.data, b.len, &r), 0);
    proto_bytes_fini(&b);
    return r;
}

Test(rt_tasklog, a_failure_sends_the_latest_lines_that_fit_and_counts_the_rest)
{
    rt_tasklog l;
    rt_tasklog_init(&l);
    char line[1000];
    int total = RT_TASKLOG_LINES + RT_TASKLOG_TAIL + 40;
    for (int i = 0; i < total; i++) {
        snprintf(line, sizeof line, "line %d %0900d", i, 0);
        rt_tasklog_add(&l, line);
    }
    proto_call_reply *r = tail_of(&l, 4096); /* four lines of ~910 bytes fit */
    cr_assert_eq(r->n_log_lines, 5);
    char want[32];
    snprintf(want, sizeof want, "line %d 0", total - 4);
    cr_assert(!strncmp(r->log_lines[0], want, strlen(want)), "%.20s", r->log_lines[0]);
    snprintf(want, sizeof want, "line %d 0", total - 1);
    cr_assert(!strncmp(r->log_lines[3], want, strlen(want)), "%.20s", r->log_lines[3]);
    snprintf(want, sizeof want, "\x1f%d", total - 4);
    cr_assert_str_eq(r->log_lines[4], want);
    proto_free(r);
    rt_tasklog_fini(&l);

    rt_tasklog_init(&l); /* within the bound: the list's own lines */
    rt_tasklog_add(&l, "first");
    rt_tasklog_add(&l, "why it failed");
    r = tail_of(&l, 4096);
    cr_assert_eq(r->n_log_lines, 2);
    cr_assert_str_eq(r->log_lines[1], "why it failed");
    proto_free(r);
    rt_tasklog_fini(&l);
}
