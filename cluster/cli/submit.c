/* `ferry submit MODULE.so`: check the module here, ship it to every worker,
 * run its driver on this process with the cluster. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "runtime/runtime.h"

static const char usage[] =
    "usage: ferry submit MODULE.so [--json] [-- ARGS...]\n"
    "\n"
    "Ships the task module to every worker of the cluster running under\n"
    "$FERRY_HOME (once per worker: modules are content-addressed) and runs the\n"
    "module's driver here, with ARGS. Exits 0 when the driver succeeds.\n"
    "\n"
    "options:\n"
    "      --json     ask the driver for one JSON object on stdout\n"
    "  -h, --help     this text\n"
    "  -V, --version  ferry's version\n";

static int read_file(const char *path, void **out, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -errno;
    int rc = 0;
    if (fseek(f, 0, SEEK_END) != 0 || ftell(f) < 0) {
        rc = -errno;
        goto out;
    }
    *len = (size_t)ftell(f);
    rewind(f);
    *out = malloc(*len ? *len : 1);
    if (!*out) {
        rc = FERRY_ENOMEM;
        goto out;
    }
    if (fread(*out, 1, *len, f) != *len) {
        rc = FERRY_EIO;
        free(*out);
        *out = NULL;
    }
out:
    fclose(f);
    return rc;
}

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

int cli_submit(int argc, char **argv)
{
    /* submit's own options and the module come before "--", the driver's
     * arguments after it. */
    int dashes = argc;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0) {
            dashes = i;
            break;
        }
    }
    bool json;
    int parsed = cli_parse_json_flag(dashes, argv, usage, &json);
    if (parsed)
        return parsed < 0 ? CLI_OK : parsed;
    if (dashes - optind != 1) {
        if (dashes - optind > 1)
            cli_err("submit", "unexpected argument '%s' (task arguments go after --)",
                    argv[optind + 1]);
        else
            cli_err("submit", "which module? `ferry submit MODULE.so [-- ARGS...]`");
        return CLI_USAGE;
    }
    const char *path = argv[optind];
    /* The driver sees argv[0] = the module, then its own arguments. */
    int drv_argc = 1 + (dashes < argc ? argc - dashes - 1 : 0);
    char **drv_argv = calloc((size_t)drv_argc + 1, sizeof *drv_argv);
    if (!drv_argv)
        return CLI_FAIL;
    drv_argv[0] = (char *)path;
    for (int i = 1; i < drv_argc; i++)
        drv_argv[i] = argv[dashes + i];

    int status = CLI_FAIL;
    void *bytes = NULL;
    size_t len = 0;
    rt_module mod = {0};
    cli_running r = {0};
    cluster_module m = {0};
    char err[512] = "";
    cli_home h;
    if (cli_home_init(&h, "submit"))
        goto out;
    int rc = read_file(path, &bytes, &len);
    if (rc) {
        cli_err("submit", "cannot read %s: %s", path, ferry_strerror(rc));
        goto out;
    }
    /* Checked here first: a module that cannot load is a mistake to report
     * before anything is shipped. dlopen searches the library path for a
     * name without a slash: give it the file the user named. */
    char *abs = realpath(path, NULL);
    rc = abs ? rt_module_open(&mod, abs, base_name(path), err, sizeof err) : -errno;
    free(abs);
    if (rc) {
        if (!err[0])
            snprintf(err, sizeof err, "%s: %s", path, ferry_strerror(rc));
        cli_err("submit", "%s", err);
        goto out;
    }
    if (!mod.task->driver) {
        char fns[512];
        rt_module_list(&mod, fns, sizeof fns);
        cli_err("submit",
                "%s: task '%s' has no driver%s, so there is nothing to run; it exports "
                "the functions: %s",
                base_name(path), mod.task->name,
                mod.task->model
                    ? " (its model needs the trainers, which this ferry lacks)"
                    : " and no model",
                fns);
        status = CLI_USAGE;
        goto out;
    }
    if (cli_running_open(&r, &h, "submit", false, false))
        goto out;
    if (cluster_wait_ready(r.cl, r.conf.ping_timeout_ms * 3)) {
        cli_err("submit", "%s", cluster_error(r.cl));
        goto out;
    }
    if (cluster_load_module(r.cl, base_name(path), bytes, len, &m)) {
        cli_err("submit", "%s", cluster_error(r.cl));
        goto out;
    }
    free(bytes);
    bytes = NULL;
    rc = cluster_run_driver(r.cl, &m, mod.task, drv_argc, drv_argv, json);
    fflush(stdout);
    if (rc) {
        const char *why = cluster_error(r.cl);
        cli_err("submit", "%s: the driver failed: %s%s%s", base_name(path),
                ferry_strerror(rc), why[0] ? ": " : "", why);
        goto out;
    }
    status = CLI_OK;
out:
    cluster_module_fini(&m);
    if (r.cl)
        cli_running_close(&r);
    if (mod.handle)
        rt_module_close(&mod);
    free(bytes);
    free(drv_argv);
    return status;
}
