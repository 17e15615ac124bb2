/* tests/runs — runs_find names a run by its whole id even when that id
 * begins another, by the one id a prefix begins, and refuses a prefix that
 * begins several. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "cluster/runs/runs.h"
#include "harness.h"

TestSuite(runs_find, .init = runs_home_make, .fini = runs_home_remove);

static void run_dir(const char *id)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/runs", runs_home);
    mkdir(path, 0700);
    snprintf(path, sizeof path, "%s/runs/%s", runs_home, id);
    cr_assert_eq(mkdir(path, 0700), 0, "%s", path);
}

static const char *found(const char *name)
{
    static char dir[4200];
    char err[256] = "";
    cr_assert_eq(runs_find(runs_home, name, dir, sizeof dir, err, sizeof err), 0,
                 "%s: %s", name, err);
    const char *slash = strrchr(dir, '/');
    return slash ? slash + 1 : dir;
}

Test(runs_find, a_whole_id_a_unique_prefix_and_last_each_name_one_run)
{
    run_dir("20261128-0710-a");
    run_dir("20261128-0710-ab");
    run_dir("20261128-0712-c");
    cr_expect_str_eq(found("20261128-0710-a"), "20261128-0710-a",
                     "an id that begins another is still itself");
    cr_expect_str_eq(found("20261128-0710-ab"), "20261128-0710-ab");
    cr_expect_str_eq(found("20261128-0712"), "20261128-0712-c");
    cr_expect_str_eq(found("last"), "20261128-0712-c");
    char dir[4200], err[256] = "";
    cr_expect_eq(runs_find(runs_home, "20261128-07", dir, sizeof dir, err, sizeof err),
                 FERRY_EINVAL);
    cr_expect(strstr(err, "more than one run"), "%s", err);
    cr_expect_eq(runs_find(runs_home, "20261129", dir, sizeof dir, err, sizeof err),
                 FERRY_ENOENT);
}
