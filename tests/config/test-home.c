/* conf_home, conf_home_path and conf_mkdirs. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tconf.h"

T_TEST(conf_home, ferry_home_wins_over_home)
{
    char buf[512];
    setenv("FERRY_HOME", "/srv/cluster-a", 1);
    setenv("HOME", "/home/someone", 1);
    cr_assert_eq(conf_home(buf, sizeof buf), 0);
    cr_expect_str_eq(buf, "/srv/cluster-a");
}

T_TEST(conf_home, without_ferry_home_it_is_dot_ferry_in_home)
{
    char buf[512];
    unsetenv("FERRY_HOME");
    setenv("HOME", "/home/someone", 1);
    cr_assert_eq(conf_home(buf, sizeof buf), 0);
    cr_expect_str_eq(buf, "/home/someone/.ferry");
    setenv("FERRY_HOME", "", 1); /* empty counts as unset */
    cr_assert_eq(conf_home(buf, sizeof buf), 0);
    cr_expect_str_eq(buf, "/home/someone/.ferry");
}

T_TEST(conf_home, neither_variable_set_is_enoent)
{
    char buf[512];
    unsetenv("FERRY_HOME");
    unsetenv("HOME");
    cr_expect_eq(conf_home(buf, sizeof buf), FERRY_ENOENT);
}

T_TEST(conf_home, a_relative_ferry_home_is_made_absolute_without_trailing_slash)
{
    char buf[512], expect[600];
    cr_assert_eq(chdir(T_DIR), 0);
    setenv("FERRY_HOME", "state/", 1);
    cr_assert_eq(conf_home(buf, sizeof buf), 0);
    snprintf(expect, sizeof expect, "%s/state", T_DIR);
    cr_expect_str_eq(buf, expect);
    setenv("FERRY_HOME", "/srv/x//", 1);
    cr_assert_eq(conf_home(buf, sizeof buf), 0);
    cr_expect_str_eq(buf, "/srv/x");
    setenv("FERRY_HOME", "/", 1);
    cr_assert_eq(conf_home(buf, sizeof buf), 0);
    cr_expect_str_eq(buf, "/");
}

T_TEST(conf_home, a_buffer_too_small_is_erange)
{
    char buf[8];
    setenv("FERRY_HOME", "/1234567", 1);
    cr_expect_eq(conf_home(buf, sizeof buf), FERRY_ERANGE);
    setenv("FERRY_HOME", "/123456", 1);
    cr_expect_eq(conf_home(buf, sizeof buf), 0);
    cr_expect_str_eq(buf, "/123456");
}

T_TEST(conf_home, home_path_joins_with_one_slash)
{
    char buf[64];
    cr_assert_eq(conf_home_path(buf, sizeof buf, "/h", "logs/worker-0.log"), 0);
    cr_expect_str_eq(buf, "/h/logs/worker-0.log");
    cr_assert_eq(conf_home_path(buf, sizeof buf, "/h/", "/token"), 0);
    cr_expect_str_eq(buf, "/h/token");
    cr_assert_eq(conf_home_path(buf, sizeof buf, "/", "lock"), 0);
    cr_expect_str_eq(buf, "/lock");
    cr_expect_eq(conf_home_path(buf, 8, "/home", "lock"), FERRY_ERANGE);
    cr_expect_eq(conf_home_path(buf, 11, "/home", "lock"), 0);
    cr_expect_str_eq(buf, "/home/lock");
}

T_TEST(conf_home, mkdirs_creates_parents_and_keeps_what_exists)
{
    char dir[512], file[512];
    struct stat st;
    t_path(dir, sizeof dir, "a/b//c/");
    cr_assert_eq(conf_mkdirs(dir, 0700), 0);
    cr_assert_eq(stat(dir, &st), 0);
    cr_expect(S_ISDIR(st.st_mode));
    cr_expect_eq(st.st_mode & 0777, 0700);
    cr_expect_eq(conf_mkdirs(dir, 0700), 0, "again: nothing to do");
    t_path(dir, sizeof dir, "a");
    cr_expect_eq(conf_mkdirs(dir, 0700), 0);
    cr_expect_eq(conf_mkdirs("/", 0700), 0);

    t_write("f", "x", 0600);
    t_path(file, sizeof file, "f/sub");
    cr_expect_eq(conf_mkdirs(file, 0700), -ENOTDIR);
    t_path(file, sizeof file, "f");
    cr_expect_eq(conf_mkdirs(file, 0700), -ENOTDIR);
}
