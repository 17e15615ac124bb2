/* --init-from and --save: a run's parameters read from, and written to, a
 * safetensors file (cluster/params/), so that what a run learned outlives
 * it and another tool can read it. */
#include <stdio.h>
#include <string.h>

#include <ferry/ferry.h>

#include "cli.h"

int cli_params_init(const cluster_train_opts *o, params_file *f)
{
    memset(f, 0, sizeof *f);
    if (!o->init_from || !o->init_from[0])
        return 0;
    char err[1024];
    int rc = params_load(o->init_from, f, err, sizeof err);
    if (rc)
        cli_err("submit", "--init-from: %s", err);
    return rc;
}

int cli_params_save(const cluster_train_opts *o, const char *task,
                    const cluster_train_result *res)
{
    if (!o->save || !o->save[0])
        return 0;
    char acc[32], loss[32], epochs[32];
    snprintf(acc, sizeof acc, "%.6f", res->last.test_accuracy);
    snprintf(loss, sizeof loss, "%.6f", res->last.test_loss);
    snprintf(epochs, sizeof epochs, "%ld", o->epochs);
    params_meta meta[7 + PARAMS_DATA_META] = {
        {"format", "ferry"},
        {"ferry_version", ferry_version()},
        {"model", task},
        {"epochs", epochs},
        {"data", res->started.data ? res->started.data : ""},
        {"test_loss", loss},
    };
    size_t n_meta = 6;
    if (o->classifier) /* a classifier's only */
        meta[n_meta++] = (params_meta){"test_accuracy", acc};
    char *text[PARAMS_DATA_META];
    int rc = params_data_meta(res->begin, meta + n_meta, text);
    char err[1024];
    if (rc < 0) {
        cli_err("submit", "--save: no memory for the metadata");
        return rc;
    }
    rc = params_save(o->save, &res->tensors, meta, n_meta + (size_t)rc, err, sizeof err);
    params_data_meta_free(text);
    if (rc) {
        cli_err("submit", "--save: %s", err);
        return rc;
    }
    fprintf(o->json ? stderr : stdout, "saved %zu tensors (%zu values) to %s\n",
            res->tensors.n, res->tensors.floats, o->save);
    return 0;
}
