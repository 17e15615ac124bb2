/* Loading modules on every worker: content addressing, bad modules, the
 * token. */
#include <string.h>

#include "harness.h"

TC_TEST(cluster_load, ships_to_three_workers_then_nothing_the_second_time)
{
    tc_workers(3);
    tc_cluster(0, 0, 0);
    tc_load_faulty();
    cr_assert_eq(T.mod.shipped, 3);
    cr_assert_eq(T.mod.bytes, T.len);
    cr_assert_str_eq(T.mod.name, "faulty.so");
    cr_assert_eq(strlen(T.mod.sha256), 64);
    cr_assert(strstr(T.mod.functions, "echo") && strstr(T.mod.functions, "sleep"),
              "functions '%s'", T.mod.functions);

    cluster_module again;
    int rc = cluster_load_module(T.cl, "faulty.so", T.bytes, T.len, &again);
    cr_assert(rc == 0, "%s", cluster_error(T.cl));
    cr_assert_eq(again.shipped, 0);
    cr_assert_str_eq(again.sha256, T.mod.sha256);
    cluster_module_fini(&again);
}

TC_TEST(cluster_load, a_new_master_finds_the_module_on_the_workers)
{
    tc_workers(2);
    tc_cluster(0, 0, 0);
    tc_load_faulty();
    cluster_module_fini(&T.mod);
    cluster_destroy(T.cl);
    T.cl = NULL;

    tc_cluster(0, 0, 0);
    cluster_module m;
    int rc = cluster_load_module(T.cl, "faulty.so", T.bytes, T.len, &m);
    cr_assert(rc == 0, "%s", cluster_error(T.cl));
    cr_assert_eq(m.shipped, 0);
    cluster_module_fini(&m);
}

static void assert_refused(const char *file, const char *why)
{
    tc_workers(2);
    tc_cluster(0, 0, 0);
    tc_read_module(file);
    cluster_module m;
    int rc = cluster_load_module(T.cl, file, T.bytes, T.len, &m);
    const char *err = cluster_error(T.cl);
    cr_assert_neq(rc, 0, "%s was accepted", file);
    char who[128];
    snprintf(who, sizeof who, "worker 0 (%s): module %s", T.target[0], file);
    cr_assert(strstr(err, who), "'%s' does not name '%s'", err, who);
    cr_assert(strstr(err, why), "'%s' does not say '%s'", err, why);
    cr_assert_null(m.functions);
}

TC_TEST(cluster_load, a_file_that_is_not_elf_is_refused_by_name)
{
    assert_refused("notelf.so", "not an ELF");
}

TC_TEST(cluster_load, a_module_without_descriptor_is_refused_by_name)
{
    assert_refused("nodesc.so", "ferry_task");
}

TC_TEST(cluster_load, an_abi_mismatch_is_refused_by_name)
{
    assert_refused("badabi.so", "99");
}

TC_TEST(cluster_load, a_truncated_module_is_refused_by_name)
{
    assert_refused("truncated.so", "truncated.so");
}

TC_TEST(cluster_load, a_wrong_token_is_refused_with_a_clear_text)
{
    tc_workers(1);
    tc_cluster_token("not-the-token", 0); /* Ping needs none: ready all the same */
    tc_read_module("faulty.so");
    cluster_module m;
    int rc = cluster_load_module(T.cl, "faulty.so", T.bytes, T.len, &m);
    cr_assert_eq(rc, FERRY_EUNAUTH, "%s", ferry_err_name(rc));
    const char *err = cluster_error(T.cl);
    char who[128];
    snprintf(who, sizeof who, "worker 0 (%s)", T.target[0]);
    cr_assert(strstr(err, who) && strstr(err, "refused this cluster's token"), "%s", err);
}

TC_TEST(cluster_load, bad_arguments_are_refused)
{
    tc_workers(1);
    tc_cluster(0, 0, 0);
    cluster_module m;
    cr_assert_eq(cluster_load_module(T.cl, "x.so", NULL, 10, &m), FERRY_EINVAL);
    cr_assert_eq(cluster_load_module(T.cl, "x.so", "abc", 0, &m), FERRY_EINVAL);
    cr_assert_eq(cluster_load_module(NULL, "x.so", "abc", 3, &m), FERRY_EINVAL);
    const char *t[] = {"127.0.0.1:1"};
    cluster *cl = NULL;
    cr_assert_eq(cluster_create(t, 0, NULL, &cl), FERRY_EINVAL);
    const char *empty[] = {""};
    cr_assert_eq(cluster_create(empty, 1, NULL, &cl), FERRY_EINVAL);
    cluster_destroy(NULL);
    cr_assert_str_eq(cluster_error(NULL), "");
}
