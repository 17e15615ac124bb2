#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "e2e.h"
#include "e2e_ckpt.h"
#include "runtime/train/ckpt_file.h"

const char *e2e_ckpt_dir_of(const char *name)
{
    static char dirs[8][600];
    static int next;
    char *d = dirs[next++ % 8];
    snprintf(d, sizeof dirs[0], "%s/%s", e2e_home, name);
    cr_assert(mkdir(d, 0700) == 0 || access(d, W_OK) == 0, "%s", d);
    return d;
}

void e2e_ckpt_put(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    cr_assert(f, "%s", path);
    cr_assert_eq(fwrite(data, 1, len, f), len);
    fclose(f);
}

size_t e2e_ckpt_file_size(const char *path)
{
    struct stat st;
    cr_assert_eq(stat(path, &st), 0, "%s", path);
    return (size_t)st.st_size;
}

uint64_t e2e_ckpt_expect_whole(const char *dir, const char *what)
{
    char **names;
    int n = rt_ckpt_list(dir, &names);
    cr_assert(n >= 1, "%s: no checkpoint left in %s", what, dir);
    uint64_t epoch = 0;
    for (int i = 0; i < n; i++) {
        char path[1300], why[256];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        rt_ckpt_file f;
        cr_assert_eq(rt_ckpt_read(path, &f, why, sizeof why), 0, "%s: %s: %s", what, path,
                     why);
        if (i == 0)
            epoch = f.h.epoch;
        rt_ckpt_file_free(&f);
    }
    rt_ckpt_names_free(names, n);
    return epoch;
}

void e2e_ckpt_expect_resumes(const char *dir, uint64_t epoch)
{
    char epochs[32];
    snprintf(epochs, sizeof epochs, "%llu", (unsigned long long)epoch + 1);
    e2e_run r;
    e2e_ferry(&r, 120000, "submit", e2e_task("linreg"), "--epochs", epochs, "--resume",
              dir, NULL);
    E2E_EXPECT(&r, 0);
    cr_assert(e2e_has(r.err, "continuing from ") && !e2e_has(r.err, "warning"), "%s",
              r.err);
    /* Shorter than the run it continues: said. */
    cr_assert(e2e_has(r.err, "note: the checkpoint's run had --epochs 100000: this run "
                             "continues from its state with its own options"),
              "%s", r.err);
    e2e_run_fini(&r);
}
