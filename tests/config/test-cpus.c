/* conf_cpus_parse, conf_cpus_format and conf_cpus_share: the CPU lists a
 * supervisor binds its local workers with. */
#include <string.h>

#include "tconf.h"

static cpu_set_t set_of(const char *list)
{
    cpu_set_t s;
    cr_assert_eq(conf_cpus_parse(list, &s), 0, "'%s' does not parse", list);
    return s;
}

static void expect_format(const cpu_set_t *s, const char *want)
{
    char buf[256];
    cr_expect_str_eq(conf_cpus_format(buf, sizeof buf, s), want);
}

T_TEST(conf_cpus, lists_parse_and_format_back_with_ranges_folded)
{
    cpu_set_t s = set_of("0-3,8");
    cr_expect_eq(CPU_COUNT(&s), 5);
    cr_expect(CPU_ISSET(0, &s) && CPU_ISSET(3, &s) && CPU_ISSET(8, &s) && !CPU_ISSET(4, &s));
    expect_format(&s, "0-3,8");
    s = set_of("5,1,2,3");
    expect_format(&s, "1-3,5");
    s = set_of("7");
    expect_format(&s, "7");
    s = set_of("4-4");
    expect_format(&s, "4");
    CPU_ZERO(&s);
    expect_format(&s, "");
}

T_TEST(conf_cpus, malformed_lists_are_einval)
{
    static const char *const bad[] = {"",   "a",  "3-1", "1,",  ",1",     "1-",
                                      "-1", "1 ", " 1",  "0-x", "1048576", "1,,2"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cpu_set_t s;
        cr_expect_eq(conf_cpus_parse(bad[i], &s), FERRY_EINVAL, "'%s' parsed", bad[i]);
    }
    cpu_set_t s;
    cr_expect_eq(conf_cpus_parse(NULL, &s), FERRY_EINVAL);
}

T_TEST(conf_cpus, a_short_buffer_keeps_whole_entries)
{
    cpu_set_t s = set_of("0-3,8,10-12");
    char buf[8];
    cr_expect_str_eq(conf_cpus_format(buf, sizeof buf, &s), "0-3,8");
}

static void expect_share(const char *avail, size_t n, const char *const *want)
{
    cpu_set_t a = set_of(avail);
    for (size_t i = 0; i < n; i++) {
        cpu_set_t mine;
        char buf[64];
        conf_cpus_share(&a, i, n, &mine);
        cr_expect_str_eq(conf_cpus_format(buf, sizeof buf, &mine), want[i],
                         "worker %zu of %zu on %s", i, n, avail);
    }
}

T_TEST(conf_cpus, workers_share_the_cpus_in_consecutive_runs_or_round_robin)
{
    expect_share("0-15", 4, (const char *const[]){"0-3", "4-7", "8-11", "12-15"});
    expect_share("0-4", 2, (const char *const[]){"0-2", "3-4"});
    expect_share("0-1", 2, (const char *const[]){"0", "1"});
    expect_share("0-1", 1, (const char *const[]){"0-1"});
    /* More workers than CPUs: round robin, as mpirun --bind-to core. */
    expect_share("0-1", 4, (const char *const[]){"0", "1", "0", "1"});
    /* What a taskset left: its CPUs, not the machine's. */
    expect_share("2,5,7", 3, (const char *const[]){"2", "5", "7"});
    expect_share("4-7", 2, (const char *const[]){"4-5", "6-7"});
    cpu_set_t none, mine;
    CPU_ZERO(&none);
    conf_cpus_share(&none, 0, 2, &mine);
    cr_expect_eq(CPU_COUNT(&mine), 0);
}
