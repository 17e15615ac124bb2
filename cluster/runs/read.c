/* A run's record read back (`ferry runs`, `ferry plot`), checked line by
 * line: a record another tool broke is refused, never drawn as garbage. */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jansson.h>

#include "base/base.h"
#include "runs.h"

static char *dup_or_null(const char *s)
{
    return s ? strdup(s) : NULL;
}

static int load_run_json(const char *dir, runs_run *r, json_int_t *pid, char *err,
                         size_t errlen)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/run.json", dir);
    json_error_t je;
    json_t *run = json_load_file(path, 0, &je);
    if (!run) {
        struct stat st;
        if (stat(path, &st) != 0)
            return base_errf(err, errlen, FERRY_ENOENT, "%s: no run recorded there", dir);
        return base_errf(err, errlen, FERRY_ECORRUPT, "%s: line %d: %s", path, je.line,
                         je.text);
    }
    const char *module = NULL, *task = NULL;
    json_t *options = NULL;
    double began = 0;
    int rc = 0;
    if (json_unpack_ex(run, &je, 0, "{s?s, s?s, s:o, s:I, s:F}", "module", &module,
                       "task", &task, "options", &options, "pid", pid, "began",
                       &began) != 0)
        rc = base_errf(err, errlen, FERRY_ECORRUPT, "%s: %s", path, je.text);
    else {
        r->module = dup_or_null(module);
        r->task = dup_or_null(task);
        r->began = began;
        json_int_t epochs = 0;
        json_unpack(options, "{s?I}", "epochs", &epochs);
        r->epochs = (long)epochs;
    }
    json_decref(run);
    return rc;
}

/* The epoch just added's loss curve, if it has one: each entry at the
 * step it ends on, its time interpolated over the epoch's training time
 * (which ends eval_s before the event was written). */
static int add_curve(runs_run *r, json_t *ev, const char *path, int line, char *err,
                     size_t errlen)
{
    json_t *curve = json_object_get(ev, "loss_curve"), *loss = NULL;
    if (!curve)
        return 0;
    json_int_t every = 0;
    double train_s = 0, eval_s = 0;
    json_unpack(ev, "{s?F, s?F}", "train_s", &train_s, "eval_s", &eval_s);
    if (json_unpack(curve, "{s:I, s:o}", "every", &every, "loss", &loss) != 0 ||
        every < 1 || !json_is_array(loss))
        return base_errf(err, errlen, FERRY_ECORRUPT,
                         "%s: line %d: a loss_curve without its every and loss", path,
                         line);
    const runs_point *p = &r->points[r->n - 1];
    uint64_t from = r->n > 1 ? r->points[r->n - 2].step : 0;
    uint64_t steps = p->step > from ? p->step - from : 1;
    double end = p->wall_s - eval_s, begin = end - train_s;
    size_t k = json_array_size(loss);
    runs_step *more = realloc(r->steps, (r->n_steps + k) * sizeof *more);
    if (!more)
        return base_errf(err, errlen, FERRY_ENOMEM, "%s: no memory", path);
    r->steps = more;
    for (size_t i = 0; i < k; i++) {
        json_t *v = json_array_get(loss, i);
        if (!json_is_number(v))
            continue; /* a loss that was not a number: no point */
        uint64_t at =
            (uint64_t)every * (i + 1) < steps ? (uint64_t)every * (i + 1) : steps;
        r->steps[r->n_steps++] =
            (runs_step){.step = from + at,
                        .wall_s = begin + train_s * (double)at / (double)steps,
                        .loss = json_number_value(v)};
    }
    return 0;
}

static int add_point(runs_run *r, json_t *ev, const char *path, int line, char *err,
                     size_t errlen)
{
    runs_point p = {0};
    json_t *acc = NULL;
    json_int_t epoch = 0, step = 0;
    json_error_t je;
    if (json_unpack_ex(ev, &je, 0, "{s:I, s:I, s:F, s:F, s:F, s:o, s:F}", "epoch", &epoch,
                       "step", &step, "wall_s", &p.wall_s, "train_loss", &p.train_loss,
                       "test_loss", &p.test_loss, "test_accuracy", &acc, "samples_per_s",
                       &p.samples_per_s) != 0)
        return base_errf(err, errlen, FERRY_ECORRUPT, "%s: line %d: an epoch: %s", path,
                         line, je.text);
    if (epoch < 1 || step < 0 || (acc && !json_is_number(acc) && !json_is_null(acc)))
        return base_errf(err, errlen, FERRY_ECORRUPT,
                         "%s: line %d: an epoch whose numbers are out of range", path,
                         line);
    p.epoch = (unsigned)epoch;
    p.step = (uint64_t)step;
    p.test_accuracy = json_is_number(acc) ? json_number_value(acc) : NAN;
    runs_point *more = realloc(r->points, (r->n + 1) * sizeof *more);
    if (!more)
        return base_errf(err, errlen, FERRY_ENOMEM, "%s: no memory", path);
    r->points = more;
    r->points[r->n++] = p;
    return add_curve(r, ev, path, line, err, errlen);
}

static int take_event(runs_run *r, json_t *ev, const char *path, int line, char *err,
                      size_t errlen)
{
    const char *event = NULL;
    if (!json_is_object(ev) || json_unpack(ev, "{s:s}", "event", &event) != 0)
        return base_errf(err, errlen, FERRY_ECORRUPT,
                         "%s: line %d: not an object with an \"event\"", path, line);
    if (strcmp(event, "epoch") == 0)
        return add_point(r, ev, path, line, err, errlen);
    if (strcmp(event, "started") == 0) {
        const char *mode = NULL, *device = NULL;
        int workers = 0;
        json_unpack(ev, "{s?s, s?s, s?i}", "mode", &mode, "device", &device, "workers",
                    &workers);
        free(r->mode);
        free(r->device);
        r->mode = dup_or_null(mode);
        r->device = dup_or_null(device);
        r->workers = workers;
    } else if (strcmp(event, "end") == 0) {
        const char *status = NULL, *why = NULL;
        json_unpack(ev, "{s?s, s?s}", "status", &status, "why", &why);
        r->status = status && strcmp(status, "finished") == 0 ? "finished" : "failed";
        free(r->why);
        r->why = dup_or_null(why);
    }
    return 0; /* an event of a later version: skipped */
}

static int load_metrics(const char *dir, runs_run *r, char *err, size_t errlen)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    FILE *f = fopen(path, "r");
    if (!f)
        return base_errf(err, errlen, errno == ENOENT ? FERRY_ENOENT : FERRY_EIO,
                         "cannot read %s: %s", path, strerror(errno));
    char *text = NULL;
    size_t cap = 0;
    int rc = 0, line = 0;
    ssize_t len;
    while (rc == 0 && (len = getline(&text, &cap, f)) >= 0) {
        line++;
        if (len > 0 && text[len - 1] != '\n')
            break; /* a line being written now: not yet part of the record */
        json_error_t je;
        json_t *ev = json_loadb(text, (size_t)len, 0, &je);
        if (!ev)
            rc = base_errf(err, errlen, FERRY_ECORRUPT, "%s: line %d: %s", path, line,
                           je.text);
        else
            rc = take_event(r, ev, path, line, err, errlen);
        json_decref(ev);
    }
    free(text);
    fclose(f);
    return rc;
}

int runs_load(const char *dir, runs_run *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    const char *slash = strrchr(dir, '/');
    snprintf(out->id, sizeof out->id, "%s", slash ? slash + 1 : dir);
    json_int_t pid = 0;
    int rc = load_run_json(dir, out, &pid, err, errlen);
    if (rc == 0)
        rc = load_metrics(dir, out, err, errlen);
    if (rc) {
        runs_run_fini(out);
        return rc;
    }
    if (!out->status) /* no end: its submitter still at it, or gone */
        out->status = pid > 0 && (kill((pid_t)pid, 0) == 0 || errno == EPERM)
                          ? "running"
                          : "interrupted";
    return 0;
}

void runs_run_fini(runs_run *r)
{
    free(r->module);
    free(r->task);
    free(r->mode);
    free(r->device);
    free(r->why);
    free(r->points);
    free(r->steps);
    memset(r, 0, sizeof *r);
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int runs_ids(const char *home_dir, char ***ids, size_t *n)
{
    *ids = NULL;
    *n = 0;
    char runs[4096];
    snprintf(runs, sizeof runs, "%s/runs", home_dir);
    DIR *d = opendir(runs);
    if (!d)
        return 0;
    struct dirent *e;
    int rc = 0;
    while (rc == 0 && (e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char **more = realloc(*ids, (*n + 1) * sizeof *more);
        char *id = strdup(e->d_name);
        if (!more || !id) {
            free(id);
            if (more)
                *ids = more;
            rc = FERRY_ENOMEM;
            break;
        }
        *ids = more;
        (*ids)[(*n)++] = id;
    }
    closedir(d);
    if (rc) {
        runs_ids_free(*ids, *n);
        *ids = NULL;
        *n = 0;
        return rc;
    }
    if (*n)
        qsort(*ids, *n, sizeof **ids, by_name);
    return 0;
}

void runs_ids_free(char **ids, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(ids[i]);
    free(ids);
}

int runs_find(const char *home_dir, const char *name, char *dir, size_t len, char *err,
              size_t errlen)
{
    struct stat st;
    if (strchr(name, '/') && stat(name, &st) == 0 && S_ISDIR(st.st_mode)) {
        snprintf(dir, len, "%s", name);
        return 0;
    }
    char **ids;
    size_t n;
    if (runs_ids(home_dir, &ids, &n) != 0)
        return base_errf(err, errlen, FERRY_ENOMEM, "no memory");
    const char *found = strcmp(name, "last") == 0 && n ? ids[n - 1] : NULL;
    const char *begun = NULL; /* the first id `name` begins */
    int matches = 0;          /* how many it begins */
    size_t name_len = strlen(name);
    /* An id that is `name` whole wins over any it merely begins. */
    for (size_t i = 0; !found && i < n; i++) {
        if (strcmp(ids[i], name) == 0)
            found = ids[i];
        else if (strncmp(ids[i], name, name_len) == 0 && !matches++)
            begun = ids[i];
    }
    if (!found && matches == 1)
        found = begun;
    int rc = 0;
    if (found)
        snprintf(dir, len, "%s/runs/%s", home_dir, found);
    else if (matches > 1)
        rc = base_errf(err, errlen, FERRY_EINVAL,
                       "%s: more than one run's id begins so (`ferry runs` lists them)",
                       name);
    else
        rc = base_errf(err, errlen, FERRY_ENOENT,
                       "%s: no such run under %s/runs (`ferry runs` lists them)", name,
                       home_dir);
    runs_ids_free(ids, n);
    return rc;
}
