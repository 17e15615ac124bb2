/* The host-list table against Slurm itself: every case through
 * `scontrol show hostnames` (slurm-client), where it is installed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cases.h"
#include "tcommon.h"
#include "tlaunch.h"

#define N_GOOD (sizeof HL_GOOD / sizeof HL_GOOD[0])
#define N_BAD  (sizeof HL_BAD / sizeof HL_BAD[0])

static bool on_path(const char *prog)
{
    const char *path = getenv("PATH");
    char buf[4096];
    for (const char *p = path; p && *p;) {
        size_t n = strcspn(p, ":");
        snprintf(buf, sizeof buf, "%.*s/%s", (int)n, p, prog);
        if (access(buf, X_OK) == 0)
            return true;
        p += n + (p[n] == ':');
    }
    return false;
}

/* scontrol reads a configuration even to expand a list: the smallest one
 * it takes (its plugin directory must exist; nothing is loaded from it). */
static char *conf_env(void)
{
    char plugins[300];
    snprintf(plugins, sizeof plugins, "%s/plugins", T_DIR);
    cr_assert(mkdir(plugins, 0700) == 0);
    char text[600];
    snprintf(text, sizeof text,
             "ClusterName=ci\nSlurmctldHost=localhost\nPluginDir=%s\n"
             "NodeName=n1 CPUs=1\nPartitionName=debug Nodes=ALL\n",
             plugins);
    char *env = NULL;
    cr_assert(asprintf(&env, "SLURM_CONF=%s", t_write("slurm.conf", text, 0600)) > 0);
    return env;
}

/* `scontrol show hostnames LIST`, its lines joined by spaces. */
static void scontrol(const char *list, char *conf, char *got, size_t len)
{
    char *argv[] = {"scontrol", "show", "hostnames", (char *)list, NULL};
    char *path = NULL, *ld = NULL;
    cr_assert(asprintf(&path, "PATH=%s", getenv("PATH")) > 0);
    const char *l = getenv("LD_LIBRARY_PATH");
    cr_assert(asprintf(&ld, "LD_LIBRARY_PATH=%s", l ? l : "") > 0);
    char *envp[] = {conf, path, ld, NULL};
    char out[8192], err[4096];
    int status = t_run_program("scontrol", argv, envp, out, sizeof out, err, sizeof err);
    free(path);
    free(ld);
    size_t n = strlen(out);
    cr_assert(n < len, "scontrol printed more than the test keeps");
    memcpy(got, out, n + 1);
    for (char *c = got; *c; c++)
        if (*c == '\n')
            *c = c[1] ? ' ' : '\0';
    if (status != 0 || strstr(out, "Invalid") || strstr(err, "Invalid"))
        snprintf(got, len, "INVALID");
}

T_TEST(scontrol, agrees_with_every_case_of_the_table)
{
    if (!on_path("scontrol"))
        tcom_skip_missing("slurm-client", "scontrol");
    char *conf = conf_env();
    char want[1024], got[1024];
    for (size_t i = 0; i < N_GOOD; i++) {
        scontrol(HL_GOOD[i].list, conf, want, sizeof want);
        cr_expect_str_eq(want, HL_GOOD[i].hosts, "scontrol on '%s'", HL_GOOD[i].list);
        cr_expect_str_eq(t_expand(HL_GOOD[i].list, got, sizeof got), want, "'%s'",
                         HL_GOOD[i].list);
    }
    for (size_t i = 0; i < N_BAD; i++) {
        if (!HL_BAD[i].slurm_refuses)
            continue;
        scontrol(HL_BAD[i].list, conf, want, sizeof want);
        cr_expect_str_eq(want, "INVALID", "scontrol takes '%s'", HL_BAD[i].list);
    }
    free(conf);
}
