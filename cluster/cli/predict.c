/* `ferry predict MODULE.so --params FILE`: the model of a module run
 * forward with the parameters a run saved (--save), over new samples (any
 * file of the model's shape, labels or not, normalised as the run's were,
 * with what the file keeps of the run's data), the run's own held-out
 * split, or the test set it trains against by default; on worker 0 of the
 * running cluster or, with --local, in this process on the cpu; a line a
 * sample: the class (by name when the run's labels were names) and its
 * probabilities, or the regression outputs. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ferry/ferry.h>

#include "cli.h"
#include "json.h"
#include "proto/proto.h"
#include "proto/train_spec.h"
#include "runtime/device/device.h"
#include "runtime/runtime.h"
#include "runtime/train/tensors.h"
#include "runtime/train/train.h"

static const char usage[] =
    "usage: ferry predict MODULE.so --params FILE [OPTIONS]\n"
    "\n"
    "Runs the model of MODULE.so forward with the parameters in FILE (what\n"
    "`ferry submit --save FILE` wrote) and writes a line a sample: for a\n"
    "classifier the predicted class (by name when the run's labels were\n"
    "names) and the probability of each class, for a regressor its outputs\n"
    "(CSV, with a header). With labels it also says the accuracy. Samples\n"
    "are normalised as the run normalised its own (FILE says how). Runs on\n"
    "worker 0 of the cluster under $FERRY_HOME, or with --local in this\n"
    "process on the cpu.\n"
    "\n"
    "options:\n"
    "      --params FILE       the parameters (safetensors), required\n"
    "      --data PATH         the samples: every one of PATH (.npy, .npz, CSV,\n"
    "                          IDX, HDF5), labels optional (an .npy or IDX file\n"
    "                          alone, an .npz with x alone, a CSV of the\n"
    "                          model's columns alone); with --test-data, that\n"
    "                          file's instead; with --test-split F, the run's\n"
    "                          held-out part of PATH (with its --seed);\n"
    "                          --labels, --test-labels, --x-key, --y-key,\n"
    "                          --label as `ferry submit` takes them. Default:\n"
    "                          the test set of the model's own data set\n"
    "      --out FILE          the lines go to FILE instead of stdout\n"
    "      --batch N           samples a forward pass (default 256)\n"
    "      --local             run here, on the cpu, without a cluster (the\n"
    "                          module runs in this process)\n"
    "      --json              one JSON object on stdout at the end (the lines\n"
    "                          then need --out)\n" CLI_REMOTE_HELP
    "  -h, --help              this text\n"
    "\n"
    "A FILE saved by an earlier ferry, which does not say how the run\n"
    "normalised, predicts only on the run's own test set: --data and the\n"
    "options the run was given.\n";

typedef struct predicting {
    const char *module, *params, *out;
    long batch;
    bool local, json;
    proto_train_spec spec; /* the data options */
    char paths[4][4096];   /* its files, made absolute */
} predicting;

/* The training options that say which data a run read: predict takes
 * them as submit does, from the one table. */
static const proto_train_option data_options[] = {
    PROTO_TRAIN_OPT_data_dir,    PROTO_TRAIN_OPT_test_data, PROTO_TRAIN_OPT_test_split,
    PROTO_TRAIN_OPT_labels,      PROTO_TRAIN_OPT_test_labels, PROTO_TRAIN_OPT_x_key,
    PROTO_TRAIN_OPT_y_key,       PROTO_TRAIN_OPT_label,     PROTO_TRAIN_OPT_normalize,
    PROTO_TRAIN_OPT_seed,
};
#define N_DATA_OPTIONS (sizeof data_options / sizeof data_options[0])
enum { O_PARAMS = 256, O_OUT, O_BATCH, O_LOCAL, O_JSON, O_DATA };

/* A path the workers read, made absolute: they run elsewhere. */
static int absolute(const char **path, char *buf, size_t len)
{
    if (!*path || !(*path)[0] || (*path)[0] == '/')
        return 0;
    char cwd[2048];
    if (!getcwd(cwd, sizeof cwd) || (size_t)snprintf(buf, len, "%s/%s", cwd, *path) >= len)
        return FERRY_EINVAL;
    *path = buf;
    return 0;
}

/* An option of the data table: its value set in p->spec. */
static int data_option(predicting *p, int i)
{
    proto_train_option opt = data_options[i];
    const char *bad = proto_train_spec_set(&p->spec, opt, optarg);
    if (bad) {
        cli_err("predict", "--%s %s: %s", proto_train_rows[opt].flag, optarg, bad);
        return CLI_USAGE;
    }
    return -1;
}

static int parse_options(int argc, char **argv, predicting *p)
{
    struct option longs[8 + N_DATA_OPTIONS] = {
        {"params", required_argument, NULL, O_PARAMS},
        {"out", required_argument, NULL, O_OUT},
        {"batch", required_argument, NULL, O_BATCH},
        {"local", no_argument, NULL, O_LOCAL},
        {"json", no_argument, NULL, O_JSON},
        {"help", no_argument, NULL, 'h'},
    };
    for (size_t i = 0; i < N_DATA_OPTIONS; i++)
        longs[6 + i] = (struct option){proto_train_rows[data_options[i]].flag,
                                       required_argument, NULL, O_DATA + (int)i};
    optind = 1;
    opterr = 0;
    int c, status = -1;
    while (status < 0 && (c = getopt_long(argc, argv, "h", longs, NULL)) != -1) {
        if (c == O_PARAMS)
            p->params = optarg;
        else if (c == O_OUT)
            p->out = optarg;
        else if (c == O_LOCAL)
            p->local = true;
        else if (c == O_JSON)
            p->json = true;
        else if (c == O_BATCH && !base_parse_long(optarg, 1, 1 << 16, &p->batch)) {
            cli_err("predict", "--batch %s: a number of samples from 1 to 65536", optarg);
            status = CLI_USAGE;
        } else if (c >= O_DATA && c < O_DATA + (int)N_DATA_OPTIONS) {
            status = data_option(p, c - O_DATA);
        } else if (c == 'h') {
            fputs(usage, stdout);
            status = CLI_OK;
        } else if (c != O_BATCH) {
            cli_err("predict", "%s: unknown option or missing value\n\n%s",
                    argv[optind - 1], usage);
            status = CLI_USAGE;
        }
    }
    return status;
}

static int parse(int argc, char **argv, predicting *p)
{
    proto_train_spec_defaults(&p->spec);
    int status = parse_options(argc, argv, p);
    if (status >= 0)
        return status;
    if (optind != argc - 1 || !p->params) {
        cli_err("predict", "%s\n\n%s",
                optind != argc - 1 ? "one MODULE.so is needed" : "--params FILE is needed",
                usage);
        return CLI_USAGE;
    }
    if (p->json && !p->out) {
        cli_err("predict", "--json prints a summary: the lines need --out FILE");
        return CLI_USAGE;
    }
    p->module = argv[optind];
    const char **files[4] = {&p->spec.data_dir, &p->spec.test_data, &p->spec.labels,
                             &p->spec.test_labels};
    for (int i = 0; i < 4; i++)
        if (absolute(files[i], p->paths[i], sizeof p->paths[i])) {
            cli_err("predict", "%s: cannot make it an absolute path", *files[i]);
            return CLI_FAIL;
        }
    return -1;
}

/* In this process, on the cpu. */
static int run_local(const predicting *p, const cluster_tensors *t,
                     const proto_predict_req *saved, rt_prediction *out, bool *classifier,
                     char *device, size_t dlen, char *err, size_t errlen)
{
    rt_module m;
    char *abs = realpath(p->module, NULL);
    int rc = abs ? rt_module_open(&m, abs, cli_base_name(p->module), err, errlen)
                 : base_errf(err, errlen, FERRY_ENOENT, "%s: %s", p->module, strerror(errno));
    free(abs);
    if (rc)
        return rc;
    ferry_device_t *dev = NULL;
    if (!m.task->model)
        rc = base_errf(err, errlen, FERRY_EINVAL, "%s: task '%s' has no model",
                       p->module, m.task->name);
    else
        rc = rt_cpu_open(&dev, err, errlen);
    if (rc == 0) {
        snprintf(device, dlen, "%s", dev->description);
        *classifier = m.task->model->kind == FERRY_MODEL_CLASSIFIER;
        rc = rt_predict(m.task->model, dev, t, &p->spec, saved, (int)p->batch, out, err,
                        errlen);
    }
    if (dev)
        rt_cpu_close(dev);
    rt_module_close(&m);
    return rc;
}

/* The reply of worker 0 as a prediction of our own. */
static int take_reply(const ferry_bytes_t *o, rt_prediction *out, bool *classifier,
                      char *device, size_t dlen, char *err, size_t errlen)
{
    proto_predict_reply *r;
    if (proto_predict_reply_unpack(o->data, o->len, &r))
        return base_errf(err, errlen, FERRY_EPROTO, "worker 0's reply is not a PredictReply");
    size_t n = r->samples, k = r->outputs;
    int rc = 0;
    if (k == 0 || r->values.len != n * k * sizeof(float) || (r->n_labels && r->n_labels != n))
        rc = base_errf(err, errlen, FERRY_EPROTO,
                       "worker 0 answered %zu samples of %zu outputs with %zu bytes and "
                       "%zu labels",
                       n, k, r->values.len, r->n_labels);
    else if (!(out->outputs = malloc(r->values.len + 1)) ||
             (r->n_labels && !(out->labels = malloc(n * sizeof(int32_t)))))
        rc = FERRY_ENOMEM;
    if (rc == 0) {
        memcpy(out->outputs, r->values.data, r->values.len);
        if (r->n_labels)
            memcpy(out->labels, r->labels, n * sizeof(int32_t));
        out->n = n;
        out->outputs_per = k;
        *classifier = r->classifier;
        snprintf(device, dlen, "%s", r->device);
    }
    proto_free(r);
    if (rc)
        rt_prediction_free(out);
    return rc;
}

/* On worker 0 of the running cluster. */
static int run_remote(const predicting *p, proto_predict_req *q, rt_prediction *out,
                      bool *classifier, char *device, size_t dlen, char *err, size_t errlen)
{
    home_paths h;
    if (cli_home_init(&h, "predict"))
        return FERRY_EINVAL;
    void *bytes = NULL;
    size_t len = 0;
    int rc = cli_read_module(p->module, NULL, &bytes, &len, err, errlen);
    if (rc)
        return rc;
    cli_running r = {0};
    cluster_module m = {0};
    proto_bytes spec = {0}, b = {0};
    ferry_bytes_t o = {0};
    if (cli_running_ship(&r, &h, "predict", cli_base_name(p->module), bytes, len, &m))
        rc = FERRY_ECANCELED; /* said */
    else if (proto_train_begin_pack(&p->spec, false, &(proto_train_begin_run){0}, &spec))
        rc = FERRY_ENOMEM;
    q->spec = (proto_blob){spec.data, spec.len};
    if (rc == 0 && proto_predict_req_pack(q, &b))
        rc = FERRY_ENOMEM;
    else if (rc == 0 && (rc = cluster_call(r.cl, &m, 0, "ferry.train.predict",
                                           &(ferry_bytes_t){b.data, b.len}, &o)))
        rc = base_errf(err, errlen, rc, "%s", cluster_error(r.cl));
    if (rc == 0)
        rc = take_reply(&o, out, classifier, device, dlen, err, errlen);
    cluster_free_bytes(&o);
    proto_bytes_fini(&b);
    proto_bytes_fini(&spec);
    cluster_module_fini(&m);
    cli_running_close(&r);
    free(bytes);
    return rc;
}

/* A CSV field: quoted when it holds a comma, a quote or a line break. */
static void csv_field(FILE *f, const char *prefix, const char *s)
{
    if (!strpbrk(s, ",\"\r\n")) {
        fprintf(f, "%s%s", prefix, s);
        return;
    }
    fputc('"', f);
    fputs(prefix, f);
    for (; *s; s++)
        fputs(*s == '"' ? "\"\"" : (char[2]){*s, 0}, f);
    fputc('"', f);
}

/* What the lines say a sample is: the model's kind and the class names
 * the file keeps (NULL: none). */
typedef struct outcome {
    bool classifier;
    char **names;
    size_t n_names;
} outcome;

/* The lines: a classifier's class and softmax probabilities, or the
 * outputs. Counts the right answers into *right when there are labels. */
static int write_lines(FILE *f, const rt_prediction *pr, const outcome *oc, size_t *right)
{
    size_t k = pr->outputs_per;
    bool named = oc->n_names == k;
    *right = 0;
    fputs(oc->classifier ? "class" : "y0", f);
    for (size_t j = oc->classifier ? 0 : 1; j < k; j++)
        if (named)
            csv_field(f, ",p_", oc->names[j]);
        else
            fprintf(f, oc->classifier ? ",p%zu" : ",y%zu", j);
    fputc('\n', f);
    for (size_t i = 0; i < pr->n; i++) {
        const float *z = pr->outputs + i * k;
        if (!oc->classifier) {
            for (size_t j = 0; j < k; j++)
                fprintf(f, j ? ",%.7g" : "%.7g", z[j]);
            fputc('\n', f);
            continue;
        }
        size_t best = 0;
        for (size_t j = 1; j < k; j++)
            if (z[j] > z[best])
                best = j;
        double sum = 0;
        for (size_t j = 0; j < k; j++)
            sum += exp((double)z[j] - z[best]);
        if (named)
            csv_field(f, "", oc->names[best]);
        else
            fprintf(f, "%zu", best);
        for (size_t j = 0; j < k; j++)
            fprintf(f, ",%.6f", exp((double)z[j] - z[best]) / sum);
        fputc('\n', f);
        *right += pr->labels && pr->labels[i] == (int32_t)best;
    }
    return ferror(f) ? FERRY_EIO : 0;
}

static int report(const predicting *p, const rt_prediction *pr, const outcome *oc,
                  const char *device)
{
    bool accuracy = oc->classifier && pr->labels;
    FILE *f = p->out ? fopen(p->out, "w") : stdout;
    if (!f) {
        cli_err("predict", "cannot write %s: %s", p->out, strerror(errno));
        return CLI_FAIL;
    }
    size_t right;
    int rc = write_lines(f, pr, oc, &right);
    if (p->out && fclose(f) != 0)
        rc = FERRY_EIO;
    if (rc) {
        cli_err("predict", "cannot write %s: %s", p->out ? p->out : "the lines",
                ferry_strerror(rc));
        return CLI_FAIL;
    }
    double acc = pr->n ? (double)right / (double)pr->n : 0;
    if (p->json) {
        printf("{\"samples\":%zu,\"outputs\":%zu,\"device\":", pr->n, pr->outputs_per);
        json_str(stdout, device);
        if (accuracy)
            printf(",\"test_accuracy\":%.6f", acc);
        printf(",\"labelled\":%s,\"out\":", pr->labels ? "true" : "false");
        json_str(stdout, p->out);
        printf("}\n");
        return CLI_OK;
    }
    FILE *say = p->out ? stdout : stderr;
    fprintf(say, "predicted %zu samples on %s", pr->n, device);
    if (accuracy)
        fprintf(say, ": test_accuracy %.4f", acc);
    fprintf(say, "%s%s\n", p->out ? ", written to " : "", p->out ? p->out : "");
    return CLI_OK;
}

int cli_predict(int argc, char **argv)
{
    predicting p = {0};
    int status = parse(argc, argv, &p);
    if (status >= 0)
        return status;
    params_file pf;
    char err[1024] = "";
    if (params_load(p.params, &pf, err, sizeof err)) {
        cli_err("predict", "--params: %s", err);
        return CLI_FAIL;
    }
    /* The parameters and what the file says of the run's data, as the
     * worker takes them (run_local reads the same fields). */
    proto_predict_req q = {.n_param_names = pf.t.n,
                           .param_names = (char **)pf.t.names,
                           .n_param_shapes = 4 * pf.t.n,
                           .param_shapes = (uint32_t *)pf.t.shapes,
                           .param_values = {(uint8_t *)pf.t.values,
                                            pf.t.floats * sizeof(float)},
                           .batch = (uint32_t)p.batch};
    void *seen = NULL;
    if (params_data_read(&pf, p.params, &q, &seen, err, sizeof err)) {
        cli_err("predict", "--params: %s", err);
        params_file_free(&pf);
        return CLI_FAIL;
    }
    rt_prediction pr = {0};
    outcome oc = {.names = q.class_names, .n_names = q.n_class_names};
    char device[256] = "";
    int rc = p.local ? run_local(&p, &pf.t, &q, &pr, &oc.classifier, device, sizeof device,
                                 err, sizeof err)
                     : run_remote(&p, &q, &pr, &oc.classifier, device, sizeof device, err,
                                  sizeof err);
    if (rc == FERRY_ECANCELED && !err[0])
        status = CLI_FAIL; /* said */
    else if (rc)
        cli_err("predict", "%s", err[0] ? err : ferry_strerror(rc));
    else
        status = report(&p, &pr, &oc, device);
    rt_prediction_free(&pr);
    free(seen);
    params_file_free(&pf);
    return rc ? CLI_FAIL : status;
}
