/* The driver's view of the cluster: the ferry_driver_ops_t a task's driver
 * gets, each member a thin wrapper over the blocking cluster calls. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster_int.h"

typedef struct drv_impl {
    cluster *cl;
    const cluster_module *m;
    /* What worker() reports, from a survey at the start; copied, because the
     * driver's own calls (barrier) replace the cluster's survey. */
    char **device, **host;
    int *pid;
    /* The result of the driver's last cluster operation that failed: when
     * the driver returns it, the cluster's error text is the reason. */
    int last_failed;
} drv_impl;

static drv_impl *impl_of(ferry_driver_t *drv)
{
    return drv->impl;
}

static int noted(drv_impl *d, int rc)
{
    if (rc)
        d->last_failed = rc;
    return rc;
}

static int drv_call(ferry_driver_t *drv, int rank, const char *function,
                    const ferry_bytes_t *in, ferry_bytes_t *out)
{
    drv_impl *d = impl_of(drv);
    return noted(d, cluster_call(d->cl, d->m, rank, function, in, out));
}

static int drv_call_all(ferry_driver_t *drv, const char *function,
                        const ferry_bytes_t *in, ferry_bytes_t *out)
{
    drv_impl *d = impl_of(drv);
    return noted(d, cluster_call_all(d->cl, d->m, function, in, out));
}

static int drv_call_any(ferry_driver_t *drv, const char *function, size_t n,
                        const ferry_bytes_t *in, ferry_bytes_t *out)
{
    drv_impl *d = impl_of(drv);
    return noted(d, cluster_call_any(d->cl, d->m, function, n, in, out, 0));
}

static int drv_barrier(ferry_driver_t *drv)
{
    drv_impl *d = impl_of(drv);
    return noted(d, cluster_barrier(d->cl));
}

static void drv_free_bytes(ferry_driver_t *drv, ferry_bytes_t *b)
{
    (void)drv;
    cluster_free_bytes(b);
}

static const char *drv_error(ferry_driver_t *drv)
{
    return cluster_error(impl_of(drv)->cl);
}

static int drv_worker(ferry_driver_t *drv, int rank, ferry_worker_info_t *info)
{
    drv_impl *d = impl_of(drv);
    if (!info || rank < 0 || (size_t)rank >= d->cl->n)
        return FERRY_EINVAL;
    memset(info, 0, sizeof *info);
    info->version = FERRY_TASK_ABI_VERSION;
    info->size = sizeof *info;
    info->rank = rank;
    info->address = d->cl->nodes[rank].target;
    info->device = d->device[rank] ? d->device[rank] : "unknown";
    info->host = d->host[rank] ? d->host[rank] : "unknown";
    info->pid = d->pid[rank];
    return 0;
}

/* One line: a newline is added unless the format ends with one. */
static void vline(FILE *f, const char *prefix, const char *fmt, va_list ap)
{
    if (!fmt) /* a plugin's mistake must not take the master down */
        return;
    if (prefix)
        fputs(prefix, f);
    vfprintf(f, fmt, ap);
    size_t len = strlen(fmt);
    if (!len || fmt[len - 1] != '\n')
        fputc('\n', f);
    fflush(f);
}

static void drv_print(ferry_driver_t *drv, const char *fmt, ...)
{
    (void)drv;
    va_list ap;
    va_start(ap, fmt);
    vline(stdout, NULL, fmt, ap);
    va_end(ap);
}

static void drv_log(ferry_driver_t *drv, int level, const char *fmt, ...)
{
    static const char *const names[] = {"error", "warning", "info", "debug"};
    const char *task = drv->argc > 0 && drv->argv ? drv->argv[0] : "driver";
    char prefix[300];
    snprintf(prefix, sizeof prefix, "ferry: %s: %s: ", task,
             level >= 0 && level <= FERRY_LOG_DEBUG ? names[level] : "log");
    fflush(stdout); /* keeps the two streams in order on a shared terminal */
    va_list ap;
    va_start(ap, fmt);
    vline(stderr, prefix, fmt, ap);
    va_end(ap);
}

static const ferry_driver_ops_t driver_ops = {
    .version = FERRY_TASK_ABI_VERSION,
    .size = sizeof(ferry_driver_ops_t),
    .call = drv_call,
    .call_all = drv_call_all,
    .call_any = drv_call_any,
    .barrier = drv_barrier,
    .free_bytes = drv_free_bytes,
    .error = drv_error,
    .worker = drv_worker,
    .print = drv_print,
    .log = drv_log,
};

/* The cluster's error after a driver returned rc: a result a failed call
 * gave it (a worker's NOT_FOUND, say) keeps that call's own text, which
 * names worker, module and function; a result of the driver's own says
 * so, beside the last failure it saw, if any. */
static void explain(cluster *cl, const drv_impl *d, int rc)
{
    const char *why = cluster_error(cl);
    if (d->last_failed == rc && why[0])
        return;
    char code[64];
    if (rc < 0)
        snprintf(code, sizeof code, "%s (%s)", ferry_err_name(rc), ferry_strerror(rc));
    else
        snprintf(code, sizeof code, "%d", rc);
    if (d->last_failed && why[0])
        cl_set_error(cl, "the driver returned %s; its last failed call: %s", code, why);
    else
        cl_set_error(cl, "the driver returned %s", code);
}

int cluster_run_driver(cluster *cl, const cluster_module *m, const ferry_task_t *task,
                       int argc, char **argv, bool json)
{
    if (!cl || !m || !task)
        return FERRY_EINVAL;
    if (!task->driver) {
        cl_set_error(cl, "module %s has no driver; it exports: %s", m->name,
                     m->functions && *m->functions ? m->functions : "(no functions)");
        return FERRY_EINVAL;
    }
    drv_impl d = {.cl = cl, .m = m};
    d.device = calloc(cl->n, sizeof *d.device);
    d.host = calloc(cl->n, sizeof *d.host);
    d.pid = calloc(cl->n, sizeof *d.pid);
    int rc = FERRY_ENOMEM;
    if (!d.device || !d.host || !d.pid)
        goto out;
    /* A worker that does not answer now still gets its address and rank;
     * its calls will name it when they fail. */
    const cluster_worker *w = NULL;
    cluster_survey(cl, false, &w);
    for (size_t i = 0; w && i < cl->n; i++) {
        if (!w[i].ping)
            continue;
        d.device[i] = strdup(w[i].ping->device);
        d.host[i] = strdup(w[i].ping->hostname);
        d.pid[i] = w[i].ping->pid;
    }

    ferry_driver_t drv = {
        .version = FERRY_TASK_ABI_VERSION,
        .size = sizeof drv,
        .world_size = (int)cl->n,
        .argc = argc,
        .argv = argv,
        .json = json,
        .ops = &driver_ops,
        .impl = &d,
    };
    rc = task->driver(&drv);
    if (rc)
        explain(cl, &d, rc);
out:
    for (size_t i = 0; i < cl->n; i++) {
        free(d.device ? d.device[i] : NULL);
        free(d.host ? d.host[i] : NULL);
    }
    free(d.device);
    free(d.host);
    free(d.pid);
    return rc;
}
