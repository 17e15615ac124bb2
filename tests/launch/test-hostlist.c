/* conf_hostlist_expand: Slurm's compressed host lists, expanded as
 * scontrol expands them, and every malformed list refused by position. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cases.h"
#include "tlaunch.h"

#define N_GOOD (sizeof HL_GOOD / sizeof HL_GOOD[0])
#define N_BAD  (sizeof HL_BAD / sizeof HL_BAD[0])

T_TEST(hostlist, every_case_expands_as_scontrol_does)
{
    char got[1024];
    for (size_t i = 0; i < N_GOOD; i++)
        cr_expect_str_eq(t_expand(HL_GOOD[i].list, got, sizeof got), HL_GOOD[i].hosts,
                         "'%s'", HL_GOOD[i].list);
}

T_TEST(hostlist, every_malformed_list_is_refused_naming_the_text_and_position)
{
    char got[1024];
    for (size_t i = 0; i < N_BAD; i++) {
        t_expand(HL_BAD[i].list, got, sizeof got);
        cr_expect(strncmp(got, "ERROR: ", 7) == 0, "'%s' was taken: %s", HL_BAD[i].list,
                  got);
        cr_expect(strstr(got, HL_BAD[i].message) != NULL, "'%s': got '%s', expected '%s'",
                  HL_BAD[i].list, got, HL_BAD[i].message);
    }
}

T_TEST(hostlist, a_range_of_exactly_the_cap_is_taken)
{
    conf_hosts h;
    char err[CONF_ERR_LEN];
    cr_assert_eq(conf_hostlist_expand("n[0-65535]", &h, err, sizeof err), 0, "%s", err);
    cr_expect_eq(h.n, CONF_HOSTLIST_MAX);
    cr_expect_str_eq(h.names[0], "n0");
    cr_expect_str_eq(h.names[9999], "n9999");
    cr_expect_str_eq(h.names[65535], "n65535");
    conf_hosts_fini(&h);
    cr_expect_null(h.names);
    conf_hosts_fini(&h); /* twice, and NULL, are harmless */
    conf_hosts_fini(NULL);
}

T_TEST(hostlist, names_longer_than_dns_allows_are_refused)
{
    char list[300], got[1024];
    memset(list, 'a', 254);
    list[254] = '\0';
    t_expand(list, got, sizeof got);
    cr_expect(strstr(got, "a host name longer than 253 characters at character 1"), "%s",
              got);
    /* 250 letters and a range: the names grow past the limit from n[1000]. */
    memset(list, 'a', 250);
    strcpy(list + 250, "[998-1000]");
    t_expand(list, got, sizeof got);
    cr_expect(strstr(got, "a host name longer than 253 characters at character 1"), "%s",
              got);
    list[250] = '\0';
    strcat(list, "[7]");
    t_expand(list, got, sizeof got);
    cr_expect(strncmp(got, "aaa", 3) == 0 && strlen(got) == 251, "%s", got);
}

T_TEST(hostlist, a_long_list_is_named_by_its_start_with_the_position_first)
{
    char list[2000], got[1024];
    size_t n = 0;
    for (int i = 0; i < 150; i++)
        n += (size_t)snprintf(list + n, sizeof list - n, "node%d,", i);
    strcpy(list + n, "bad]");
    t_expand(list, got, sizeof got);
    char want[64];
    snprintf(want, sizeof want, "closes no '[' at character %zu", n + 4);
    cr_expect(strstr(got, want), "%s", got);
    cr_expect(strstr(got, "'node0,node1,"), "%s", got);
    cr_expect(strstr(got, "...'"), "a long list is cut: %s", got);
}

T_TEST(hostlist, a_control_or_non_ascii_byte_is_refused_by_its_value)
{
    char got[1024];
    t_expand("n\xc3\xa9", got, sizeof got);
    cr_expect(strstr(got, "an unexpected byte 0xc3 at character 2"), "%s", got);
    t_expand("n1\n", got, sizeof got);
    cr_expect(strstr(got, "an unexpected byte 0x0a at character 3"), "%s", got);
}

T_TEST(hostlist, blanks_around_commas_separate_as_slurm_allows)
{
    char got[1024];
    cr_expect_str_eq(t_expand(" n1 , n[2-3]\t", got, sizeof got), "n1 n2 n3");
}
