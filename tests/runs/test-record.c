/* tests/runs — a run's record written and read back: the options by flag,
 * an event a line, the status of a run that ended, failed, or was cut off,
 * and every way a record another tool broke is refused by line. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "cluster/runs/runs.h"
#include "harness.h"

TestSuite(runs_record, .init = runs_home_make, .fini = runs_home_remove);

static runs_log *open_one(const char *task, bool classifier)
{
    cluster_train_opts o = {.classifier = classifier};
    proto_train_spec_defaults(&o.spec);
    o.spec.lr = 0.125;
    runs_log *l = NULL;
    char err[256] = "";
    cr_assert_eq(runs_open(runs_home, "m.so", task, &o, &l, err, sizeof err), 0, "%s",
                 err);
    return l;
}

static void epoch(runs_log *l, unsigned n, double loss, double acc)
{
    /* 8 steps an epoch: a point every 2 */
    static const double curve[] = {0.9, 0.8, 0.7, 0.65};
    cluster_train_epoch e = {.epoch = n,
                             .train_loss = loss + 0.1,
                             .test_loss = loss,
                             .test_accuracy = acc,
                             .samples = 1000,
                             .samples_per_s = 500,
                             .train_s = 2,
                             .loss_curve = curve,
                             .n_loss_curve = 4,
                             .loss_curve_every = 2};
    runs_epoch(l, &e);
}

Test(runs_record, a_finished_run_reads_back_epoch_by_epoch_with_its_options)
{
    runs_log *l = open_one("mlp", true);
    char dir[4200];
    snprintf(dir, sizeof dir, "%s", runs_dir(l));
    cluster_train_started s = {.mode = "sync", .workers = 2, .device = "cpu"};
    runs_started(l, &s);
    epoch(l, 1, 0.5, 0.8);
    epoch(l, 2, 0.4, 0.85);
    runs_close(l, 0, NULL);

    runs_run r;
    char err[256] = "";
    cr_assert_eq(runs_load(dir, &r, err, sizeof err), 0, "%s", err);
    cr_assert_str_eq(r.status, "finished");
    cr_assert_str_eq(r.task, "mlp");
    cr_assert_str_eq(r.mode, "sync");
    cr_assert_eq(r.workers, 2);
    cr_assert_eq(r.n, 2);
    /* 1000 samples at the default batch of 128: 8 steps an epoch */
    cr_assert_eq(r.points[0].step, 8);
    cr_assert_eq(r.points[1].step, 16);
    cr_assert_float_eq(r.points[1].test_loss, 0.4, 1e-9);
    cr_assert_float_eq(r.points[1].test_accuracy, 0.85, 1e-9);
    /* the loss through the steps: each point at the step it ends on, its
     * time within the epoch's 2 s of training */
    cr_assert_eq(r.n_steps, 8);
    cr_assert_eq(r.steps[0].step, 2);
    cr_assert_eq(r.steps[3].step, 8);
    cr_assert_eq(r.steps[4].step, 10);
    cr_assert_float_eq(r.steps[1].loss, 0.8, 1e-9);
    cr_assert_float_eq(r.steps[3].wall_s - r.steps[1].wall_s, 1.0, 1e-6);
    cr_assert_float_eq(r.steps[7].wall_s, r.points[1].wall_s, 1e-6);
    runs_run_fini(&r);

    /* every option by its flag, defaults included */
    char path[4300];
    snprintf(path, sizeof path, "%s/run.json", dir);
    json_t *run = json_load_file(path, 0, NULL);
    cr_assert(run);
    json_t *o = json_object_get(run, "options");
    cr_assert_float_eq(json_real_value(json_object_get(o, "lr")), 0.125, 1e-12);
    cr_assert_eq(json_integer_value(json_object_get(o, "epochs")), 5);
    cr_assert_str_eq(json_string_value(json_object_get(o, "optimizer")), "sgd");
    json_decref(run);
}

Test(runs_record, a_failed_run_keeps_its_reason_and_a_regressor_no_accuracy)
{
    runs_log *l = open_one("linreg", false);
    char dir[4200];
    snprintf(dir, sizeof dir, "%s", runs_dir(l));
    epoch(l, 1, 2.5, 0.0);
    runs_close(l, FERRY_EUNAVAIL, "worker 1 lost");
    runs_run r;
    char err[256] = "";
    cr_assert_eq(runs_load(dir, &r, err, sizeof err), 0, "%s", err);
    cr_assert_str_eq(r.status, "failed");
    cr_assert_str_eq(r.why, "worker 1 lost");
    cr_assert(isnan(r.points[0].test_accuracy));
    runs_run_fini(&r);
}

Test(runs_record, a_run_with_no_end_is_running_while_its_submitter_lives_else_interrupted)
{
    runs_log *l = open_one("mlp", true);
    char dir[4200];
    snprintf(dir, sizeof dir, "%s", runs_dir(l));
    epoch(l, 1, 0.5, 0.8);
    runs_run r;
    char err[256] = "";
    cr_assert_eq(runs_load(dir, &r, err, sizeof err), 0, "%s", err);
    cr_assert_str_eq(r.status, "running"); /* this process wrote it */
    runs_run_fini(&r);
    runs_close(l, 0, NULL);

    /* a record whose submitter is gone: no pid is that large (pid_max) */
    char path[4300];
    snprintf(path, sizeof path, "%s/run.json", dir);
    runs_write(path, "{\"options\":{},\"pid\":999999999,\"began\":1}\n");
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    runs_write(path, "{\"event\":\"started\",\"mode\":\"sync\",\"workers\":1}\n");
    cr_assert_eq(runs_load(dir, &r, err, sizeof err), 0, "%s", err);
    cr_assert_str_eq(r.status, "interrupted");
    runs_run_fini(&r);
}

static void refused(const char *metrics, const char *want)
{
    runs_log *l = open_one("mlp", true);
    char dir[4200], path[4300];
    snprintf(dir, sizeof dir, "%s", runs_dir(l));
    runs_close(l, 0, NULL);
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    runs_write(path, metrics);
    runs_run r;
    char err[512] = "";
    cr_assert_eq(runs_load(dir, &r, err, sizeof err), FERRY_ECORRUPT, "%s", metrics);
    cr_assert(strstr(err, want) && strstr(err, "metrics.jsonl"), "%s\nwanted: %s", err,
              want);
}

Test(runs_record, a_broken_record_is_refused_naming_its_line)
{
    refused("{\"event\":\"started\"}\nnot json\n", "line 2: ");
    refused("[1,2]\n", "line 1: not an object with an \"event\"");
    refused("{\"event\":\"epoch\",\"epoch\":1}\n", "line 1: an epoch: ");
    refused("{\"event\":\"epoch\",\"epoch\":0,\"step\":1,\"wall_s\":1,\"train_loss\":1,"
            "\"test_loss\":1,\"test_accuracy\":null,\"samples_per_s\":1}\n",
            "line 1: an epoch whose numbers are out of range");
}

Test(runs_record, a_line_still_being_written_is_not_read)
{
    runs_log *l = open_one("mlp", true);
    char dir[4200], path[4300];
    snprintf(dir, sizeof dir, "%s", runs_dir(l));
    runs_close(l, 0, NULL);
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    runs_write(
        path, "{\"event\":\"started\",\"mode\":\"sync\",\"workers\":1}\n{\"event\":\"ep");
    runs_run r;
    char err[256] = "";
    cr_assert_eq(runs_load(dir, &r, err, sizeof err), 0, "%s", err);
    cr_assert_eq(r.n, 0);
    runs_run_fini(&r);
}

Test(runs_record, runs_are_found_by_id_prefix_or_last_and_an_ambiguous_prefix_is_refused)
{
    runs_log *a = open_one("alpha", true), *b = open_one("beta", true);
    char ida[RUNS_ID_MAX], idb[RUNS_ID_MAX];
    snprintf(ida, sizeof ida, "%s", runs_id(a));
    snprintf(idb, sizeof idb, "%s", runs_id(b));
    runs_close(a, 0, NULL);
    runs_close(b, 0, NULL);
    char **ids;
    size_t n;
    cr_assert_eq(runs_ids(runs_home, &ids, &n), 0);
    cr_assert_eq(n, 2);
    runs_ids_free(ids, n);

    char dir[4200], err[256] = "";
    cr_assert_eq(runs_find(runs_home, ida, dir, sizeof dir, err, sizeof err), 0, "%s",
                 err);
    cr_assert(strstr(dir, ida));
    /* both began this second: their common start names neither */
    char common[RUNS_ID_MAX];
    size_t k = 0;
    while (ida[k] && ida[k] == idb[k])
        k++;
    snprintf(common, sizeof common, "%.*s", (int)k, ida);
    cr_assert_eq(runs_find(runs_home, common, dir, sizeof dir, err, sizeof err),
                 FERRY_EINVAL);
    cr_assert(strstr(err, "more than one run"), "%s", err);
    cr_assert_eq(runs_find(runs_home, "nosuch", dir, sizeof dir, err, sizeof err),
                 FERRY_ENOENT);
    cr_assert(strstr(err, "no such run"), "%s", err);
    cr_assert_eq(runs_find(runs_home, "last", dir, sizeof dir, err, sizeof err), 0);
    cr_assert(strstr(dir, ida) || strstr(dir, idb), "%s", dir);
}
