/* tests/runs — each test's own directory, removed after it. */
#include "harness.h"

#include <ftw.h>
#include <unistd.h>

char runs_home[256];

void runs_home_make(void)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(runs_home, sizeof runs_home, "%s/ferry-runs-XXXXXX",
             tmp && *tmp ? tmp : "/tmp");
    cr_assert(mkdtemp(runs_home), "mkdtemp");
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *f)
{
    (void)st, (void)flag, (void)f;
    return remove(path);
}

void runs_home_remove(void)
{
    if (runs_home[0])
        nftw(runs_home, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}
