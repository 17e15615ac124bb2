/* The local Slurm cluster of tests/slurm, through local-slurm.sh. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tcommon.h"
#include "tslurm.h"

char TS_DIR[256];
static char conf[300];

static char *slurp(FILE *f)
{
    size_t cap = 1 << 16, len = 0, n;
    char *buf = malloc(cap);
    cr_assert(buf);
    while ((n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += n;
        if (cap - len < 4096) {
            buf = realloc(buf, cap *= 2);
            cr_assert(buf);
        }
    }
    buf[len] = '\0';
    return buf;
}

static bool on_path(const char *prog)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "command -v %s >/dev/null 2>&1", prog);
    return system(cmd) == 0;
}

void ts_up(void)
{
    if (geteuid() != 0)
        cr_skip_test("slurmd and slurmctld run as root here: run the test as root");
    if (!on_path("slurmctld"))
        tcom_skip_missing("slurmctld", "a local Slurm cluster");
    if (!on_path("slurmd"))
        tcom_skip_missing("slurmd", "a local Slurm cluster");
    if (!on_path("sbatch"))
        tcom_skip_missing("slurm-client", "sbatch");
    snprintf(TS_DIR, sizeof TS_DIR, "/tmp/ferry-slurm-XXXXXX");
    cr_assert(mkdtemp(TS_DIR));
    char cmd[600];
    snprintf(cmd, sizeof cmd, "%s up %s 2>&1", getenv("FERRY_TEST_SLURM_SH"), TS_DIR);
    FILE *f = popen(cmd, "r");
    cr_assert(f);
    char *out = slurp(f);
    int rc = pclose(f);
    cr_assert(rc == 0, "the local Slurm cluster did not come up:\n%s", out);
    snprintf(conf, sizeof conf, "%s/slurm.conf", TS_DIR);
    setenv("SLURM_CONF", conf, 1);
    free(out);
}

void ts_down(void)
{
    if (!TS_DIR[0])
        return;
    char cmd[600];
    snprintf(cmd, sizeof cmd, "%s down %s", getenv("FERRY_TEST_SLURM_SH"), TS_DIR);
    if (system(cmd) != 0)
        fprintf(stderr, "tests/slurm: %s failed\n", cmd);
    tcom_rm_tree(TS_DIR);
    TS_DIR[0] = '\0';
}

char *ts_sh(const char *cmd)
{
    char full[8192];
    snprintf(full, sizeof full, "(%s) 2>&1", cmd);
    FILE *f = popen(full, "r");
    cr_assert(f);
    char *out = slurp(f);
    pclose(f);
    return out;
}

char *ts_batch(int nodes, const char *script, int timeout_s)
{
    char path[300], out[300], cmd[1200];
    snprintf(path, sizeof path, "%s/job.sh", TS_DIR);
    snprintf(out, sizeof out, "%s/job.out", TS_DIR);
    FILE *f = fopen(path, "w");
    cr_assert(f);
    fprintf(f,
            "#!/bin/bash\nexport FERRY=%s TASKS=%s FERRY_HOME=%s/home\n"
            "cd %s\n%s\n",
            getenv("FERRY_TEST_BIN"), getenv("FERRY_TEST_TASKS"), TS_DIR, TS_DIR, script);
    cr_assert(fclose(f) == 0);
    snprintf(cmd, sizeof cmd, "timeout %d sbatch --wait --quiet -N%d -o %s %s 2>&1",
             timeout_s, nodes, out, path);
    char *said = ts_sh(cmd);
    f = fopen(out, "r");
    cr_assert(f, "the batch job wrote no output; sbatch said: %s", said);
    char *text = slurp(f);
    fclose(f);
    free(said);
    return text;
}

bool ts_has(const char *out, const char *text)
{
    return strstr(out, text) != NULL;
}
