/* Replacing a file whole, private to its owner. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/base.h"
#include "tcommon.h"

static char dir[64];

static void setup(void)
{
    snprintf(dir, sizeof dir, "/tmp/ferry-base-XXXXXX");
    cr_assert(mkdtemp(dir));
}

static void teardown(void)
{
    tcom_rm_tree(dir);
}

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = calloc(1, 4096);
    *len = buf ? fread(buf, 1, 4095, f) : 0;
    fclose(f);
    return buf;
}

Test(base_atomic_file, replaces_the_file_with_mode_0600_and_leaves_no_temp, .init = setup,
     .fini = teardown)
{
    char path[128];
    snprintf(path, sizeof path, "%s/state.ini", dir);
    FILE *f = fopen(path, "w");
    cr_assert(f);
    fputs("old contents, longer than the new\n", f);
    fclose(f);
    chmod(path, 0644);

    cr_assert_eq(base_write_atomic(path, "new\n", 4, true), 0);
    size_t len = 0;
    char *text = slurp(path, &len);
    cr_assert(text);
    cr_expect_eq(len, 4);
    cr_expect_str_eq(text, "new\n");
    free(text);
    struct stat st;
    cr_assert_eq(stat(path, &st), 0);
    cr_expect_eq(st.st_mode & 0777, 0600);

    cr_assert_eq(base_write_atomic(path, "again", 5, false), 0);
    text = slurp(path, &len);
    cr_assert(text);
    cr_expect_str_eq(text, "again");
    free(text);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "test $(ls -A %s | wc -l) -eq 1", dir);
    cr_expect_eq(system(cmd), 0, "a temp file was left in %s", dir);
    tcom_assert_no_leaks();
}

Test(base_atomic_file, a_missing_directory_is_enoent, .init = setup, .fini = teardown)
{
    char path[128];
    snprintf(path, sizeof path, "%s/no/such/file", dir);
    cr_expect_eq(base_write_atomic(path, "x", 1, true), -ENOENT);
    tcom_assert_no_leaks();
}

Test(base_atomic_file, write_all_writes_every_byte)
{
    int fds[2];
    cr_assert_eq(pipe(fds), 0);
    cr_expect_eq(base_write_all(fds[1], "hello", 5), 0);
    close(fds[1]);
    char buf[8] = "";
    cr_expect_eq(read(fds[0], buf, sizeof buf), 5);
    cr_expect_str_eq(buf, "hello");
    close(fds[0]);
    cr_expect_eq(base_write_all(fds[1], "x", 1), -EBADF);
}
