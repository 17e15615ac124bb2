/* `ferry submit MODULE.so`: check the module in a child process (inspect.c),
 * then either train its model from here or run its driver in a child
 * process (drive.c) that ships it to every worker: plugin code never runs
 * in this process. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ferry/ferry.h>

#include "cli.h"
#include "cli_plugin.h"
#include "runtime/train/train.h"

static const char usage[] =
    "usage: ferry submit MODULE.so [OPTIONS] [-- ARGS...]\n"
    "\n"
    "Ships the task module to every worker of the cluster running under\n"
    "$FERRY_HOME (once per worker: modules are content-addressed), then:\n"
    "  - a module with a driver: runs the driver here, with ARGS;\n"
    "  - a module with a model and no driver: trains the model, on every\n"
    "    worker together (sync) or on worker 0 alone, printing a line an\n"
    "    epoch (loss, test accuracy, samples/s).\n"
    "Exits 0 when the driver or the training succeeds.\n"
    "\n"
    "options:\n"
    "      --json              one JSON object on stdout at the end (progress\n"
    "                          lines go to stderr)\n"
    "      --load-timeout-ms MS  how long loading the module here to check it\n"
    "                          may take, constructors included (default 10000)\n"
    "  -h, --help              this text\n"
    "  -V, --version           ferry's version\n"
    "\n"
    "training (a module with a model):\n"
    "  -e, --epochs E          epochs (default 5)\n"
    "  -b, --batch B           samples a step (default 128)\n"
    "      --optimizer NAME    sgd or adam (default sgd)\n"
    "      --lr LR             learning rate (default 0.05 for sgd, 0.001 for adam)\n"
    "      --schedule NAME     cosine (the learning rate decays to 0 over the run;\n"
    "                          the default) or constant\n"
    "      --momentum M        sgd momentum (default 0.9)\n"
    "      --weight-decay WD   L2 weight decay (default 0)\n"
    "      --seed S            seeds the parameters and the shuffle (default 1)\n"
    "      --data DIR          where the workers find Fashion-MNIST (default\n"
    "                          /usr/share/datasets/fashion-mnist); a relative\n"
    "                          DIR is taken from the current directory\n"
    "      --precision P       fp32 (the default), tf32 (a GPU's TF32 tensor\n"
    "                          cores) or bf16; the cpu takes fp32 only\n"
    "\n"
    "distributed training:\n"
    "      --mode MODE         sync: synchronous data parallelism, each worker\n"
    "                          computing the gradient of its slice of every\n"
    "                          global batch, summed by a ring all-reduce between\n"
    "                          the workers (the default with more than one\n"
    "                          worker); async: a parameter server sharded over\n"
    "                          the workers, each worker pulling, computing and\n"
    "                          pushing without waiting for the others; single:\n"
    "                          worker 0 alone\n"
    "      --workers K         train on the first K workers (default: all)\n"
    "      --grad-compression C  none (default), lz4 (chunks that compress),\n"
    "                          or fp16 (gradients travel as half floats)\n"
    "      --chunk-bytes N     all-reduce chunk, each one call between workers\n"
    "                          (default 1048576, at least 16384)\n"
    "      --bucket-bytes N    gradient bucket started while backward runs\n"
    "                          (default 26214400, DDP's 25 MiB)\n"
    "      --timeout-ms N      a worker silent this long mid-step fails the step\n"
    "                          (default 30000)\n"
    "\n"
    "async mode (--mode async):\n"
    "      --algo NAME         downpour (default: gradients pushed to the shards,\n"
    "                          which step the optimizer), dynsgd (the same, each\n"
    "                          step divided by its staleness + 1) or easgd\n"
    "                          (elastic averaging with the shards' centre)\n"
    "      --staleness K       a worker more than K of its steps ahead of the\n"
    "                          slowest waits (0: lock-step; default unbounded)\n"
    "      --ps-shards S       parameter shards, held by worker s mod K (default:\n"
    "                          one per worker)\n"
    "      --push-every N      gradients of N batches summed into one push\n"
    "                          (default 1)\n"
    "      --pull-every N      steps between pulls (default 1)\n"
    "      --alpha A           easgd's elastic coefficient (default 0.9 / workers)\n"
    "      --tau T             easgd's steps between exchanges (default 4)\n";

enum {
    OPT_LOAD_TIMEOUT = 254,
    OPT_SCHEDULE = 255,
    OPT_OPTIMIZER = 256,
    OPT_LR,
    OPT_MOMENTUM,
    OPT_WEIGHT_DECAY,
    OPT_SEED,
    OPT_DATA,
    OPT_PRECISION,
    OPT_MODE,
    OPT_WORKERS,
    OPT_GRAD_COMPRESSION,
    OPT_CHUNK_BYTES,
    OPT_BUCKET_BYTES,
    OPT_TIMEOUT_MS,
    OPT_ALGO,
    OPT_STALENESS,
    OPT_PS_SHARDS,
    OPT_PUSH_EVERY,
    OPT_PULL_EVERY,
    OPT_ALPHA,
    OPT_TAU,
};

/* Whether s is one of the NULL-terminated names. */
static bool one_of(const char *s, const char *const *names)
{
    for (; *names; names++)
        if (strcmp(s, *names) == 0)
            return true;
    return false;
}

#define ONE_OF(s, ...) one_of(s, (const char *const[]){__VA_ARGS__, NULL})

/* Sets *out from arg, a number in lo..hi; else returns `bad`. */
static const char *set_int(const char *arg, long lo, long hi, int *out, const char *bad)
{
    long v;
    if (!base_parse_long(arg, lo, hi, &v))
        return bad;
    *out = (int)v;
    return NULL;
}

/* Sets the training option c (epochs, batch, the optimizer and its
 * schedule, seed, data, precision) from arg. Returns what a value must be
 * when arg is not one (*name: the option's), else NULL. */
static const char *set_training(int c, const char *arg, cluster_train_opts *o,
                                const char **name)
{
    long v;
    switch (c) {
    case 'e':
        *name = "--epochs";
        return set_int(arg, 1, 100000, &o->epochs, "a number of epochs from 1 to 100000");
    case 'b':
        *name = "--batch";
        return set_int(arg, 1, 1 << 20, &o->batch, "a batch size from 1 to 1048576");
    case OPT_OPTIMIZER:
        *name = "--optimizer";
        o->optimizer = arg;
        return ONE_OF(arg, "sgd", "adam") ? NULL : "sgd or adam";
    case OPT_SCHEDULE:
        *name = "--schedule";
        o->schedule = arg;
        return ONE_OF(arg, "cosine", "constant") ? NULL : "cosine or constant";
    case OPT_LR:
        *name = "--lr";
        return base_parse_double(arg, 1e-12, 1e6, &o->lr)
                   ? NULL
                   : "a positive learning rate from 1e-12 to 1e6";
    case OPT_MOMENTUM:
        *name = "--momentum";
        return base_parse_double(arg, 0, 0.999999, &o->momentum) ? NULL
                                                            : "a momentum in [0, 1)";
    case OPT_WEIGHT_DECAY:
        *name = "--weight-decay";
        return base_parse_double(arg, 0, 1e6, &o->weight_decay)
                   ? NULL
                   : "a weight decay from 0 to 1e6";
    case OPT_SEED:
        *name = "--seed";
        if (!base_parse_long(arg, 0, LONG_MAX, &v))
            return "a seed from 0 to 9223372036854775807";
        o->seed = (uint64_t)v;
        return NULL;
    case OPT_DATA:
        o->data_dir = arg;
        return NULL;
    default: /* OPT_PRECISION */
        *name = "--precision";
        o->precision = arg;
        return ONE_OF(arg, "fp32", "tf32", "bf16") ? NULL : "fp32, tf32 or bf16";
    }
}

/* The same for how workers train together: the mode, how many, and the
 * all-reduce's compression, chunks, buckets and timeout. */
static const char *set_distributed(int c, const char *arg, cluster_train_opts *o,
                                   const char **name)
{
    switch (c) {
    case OPT_MODE:
        *name = "--mode";
        o->mode = arg;
        return ONE_OF(arg, "sync", "async", "single") ? NULL : "sync, async or single";
    case OPT_WORKERS:
        *name = "--workers";
        return set_int(arg, 1, CONF_MAX_WORKERS, &o->workers,
                       "a number of workers from 1 to 256 (a cluster's most)");
    case OPT_GRAD_COMPRESSION:
        *name = "--grad-compression";
        o->grad_compression = arg;
        return ONE_OF(arg, "none", "lz4", "fp16") ? NULL : "none, lz4 or fp16";
    case OPT_CHUNK_BYTES:
        *name = "--chunk-bytes";
        if (!base_parse_long(arg, RT_TRAIN_MIN_CHUNK_BYTES, 256L << 20, &o->chunk_bytes))
            return "a chunk size from 16384 bytes (16 KiB) to 256 MiB: each chunk is "
                   "one call between workers, and smaller chunks make every step "
                   "thousands of calls";
        return NULL;
    case OPT_BUCKET_BYTES:
        *name = "--bucket-bytes";
        return base_parse_long(arg, 64, 1L << 30, &o->bucket_bytes)
                   ? NULL
                   : "a bucket size from 64 bytes to 1 GiB";
    default: /* OPT_TIMEOUT_MS */
        *name = "--timeout-ms";
        return base_parse_long(arg, 100, 24L * 3600 * 1000, &o->timeout_ms)
                   ? NULL
                   : "a timeout from 100 ms to a day";
    }
}

/* The same for async mode's: the algorithm, staleness, shards, push and
 * pull intervals, and EASGD's alpha and tau. */
static const char *set_async(int c, const char *arg, cluster_train_opts *o,
                             const char **name)
{
    static const char steps[] = "a number of steps from 1 to 1048576";
    switch (c) {
    case OPT_ALGO:
        *name = "--algo";
        o->algo = arg;
        return ONE_OF(arg, "downpour", "dynsgd", "easgd") ? NULL
                                                          : "downpour, dynsgd or easgd";
    case OPT_STALENESS:
        *name = "--staleness";
        return base_parse_long(arg, 0, 1L << 30, &o->staleness)
                   ? NULL
                   : "a number of steps from 0 to 1073741824";
    case OPT_PS_SHARDS:
        *name = "--ps-shards";
        return base_parse_long(arg, 1, 4096, &o->ps_shards)
                   ? NULL
                   : "a number of shards from 1 to 4096";
    case OPT_PUSH_EVERY:
        *name = "--push-every";
        return base_parse_long(arg, 1, 1L << 20, &o->push_every) ? NULL : steps;
    case OPT_PULL_EVERY:
        *name = "--pull-every";
        return base_parse_long(arg, 1, 1L << 20, &o->pull_every) ? NULL : steps;
    case OPT_ALPHA:
        *name = "--alpha";
        return base_parse_double(arg, 1e-9, 0.999999, &o->alpha)
                   ? NULL
                   : "an elastic coefficient in (0, 1)";
    default: /* OPT_TAU */
        *name = "--tau";
        return base_parse_long(arg, 1, 1L << 20, &o->tau) ? NULL : steps;
    }
}

/* The options that apply to one mode or algorithm only, given with
 * another. Returns -1 to go on, or the exit status (said). */
static int check_combinations(cluster_train_opts *o, bool lr_given)
{
    bool async = o->mode && strcmp(o->mode, "async") == 0;
    if (o->async_only && !async) {
        cli_err("submit", "%s applies to --mode async only", o->async_only);
        return CLI_USAGE;
    }
    if (async && (o->alpha != 0 || o->tau != 0) && strcmp(o->algo, "easgd") != 0) {
        cli_err("submit", "%s applies to --algo easgd only",
                o->alpha != 0 ? "--alpha" : "--tau");
        return CLI_USAGE;
    }
    if (!lr_given)
        o->lr = strcmp(o->optimizer, "adam") == 0 ? 0.001 : 0.05;
    return -1;
}

static const struct option longs[] = {
    {"json", no_argument, NULL, 'j'},
    {"load-timeout-ms", required_argument, NULL, OPT_LOAD_TIMEOUT},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {"epochs", required_argument, NULL, 'e'},
    {"batch", required_argument, NULL, 'b'},
    {"optimizer", required_argument, NULL, OPT_OPTIMIZER},
    {"lr", required_argument, NULL, OPT_LR},
    {"schedule", required_argument, NULL, OPT_SCHEDULE},
    {"momentum", required_argument, NULL, OPT_MOMENTUM},
    {"weight-decay", required_argument, NULL, OPT_WEIGHT_DECAY},
    {"seed", required_argument, NULL, OPT_SEED},
    {"data", required_argument, NULL, OPT_DATA},
    {"precision", required_argument, NULL, OPT_PRECISION},
    {"mode", required_argument, NULL, OPT_MODE},
    {"workers", required_argument, NULL, OPT_WORKERS},
    {"grad-compression", required_argument, NULL, OPT_GRAD_COMPRESSION},
    {"chunk-bytes", required_argument, NULL, OPT_CHUNK_BYTES},
    {"bucket-bytes", required_argument, NULL, OPT_BUCKET_BYTES},
    {"timeout-ms", required_argument, NULL, OPT_TIMEOUT_MS},
    {"algo", required_argument, NULL, OPT_ALGO},
    {"staleness", required_argument, NULL, OPT_STALENESS},
    {"ps-shards", required_argument, NULL, OPT_PS_SHARDS},
    {"push-every", required_argument, NULL, OPT_PUSH_EVERY},
    {"pull-every", required_argument, NULL, OPT_PULL_EVERY},
    {"alpha", required_argument, NULL, OPT_ALPHA},
    {"tau", required_argument, NULL, OPT_TAU},
    {NULL, 0, NULL, 0},
};

/* Parses submit's own options in argv[0..argc). Returns -1 to go on (optind
 * is then the first operand; *trained says whether a training option was
 * given), or the exit status. */
static int parse(int argc, char **argv, cluster_train_opts *o, bool *trained,
                 long *load_ms)
{
    *o = (cluster_train_opts){.epochs = 5,
                              .batch = 128,
                              .optimizer = "sgd",
                              .schedule = "cosine",
                              .momentum = 0.9,
                              .seed = 1,
                              .grad_compression = "none",
                              .precision = "fp32",
                              .staleness = -1,
                              .algo = "downpour"};
    *trained = false;
    bool lr_given = false;
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":hVe:b:", longs, NULL)) != -1) {
        const char *bad = NULL, *name = "";
        *trained |= c != 'j' && c != 'h' && c != 'V' && c != '?' && c != ':' &&
                    c != OPT_LOAD_TIMEOUT;
        if (c == 'j') {
            o->json = true;
        } else if (c == OPT_LOAD_TIMEOUT) {
            name = "--load-timeout-ms";
            if (!base_parse_long(optarg, 100, 3600L * 1000, load_ms))
                bad = "a time from 100 ms to an hour";
        } else if (c == 'h') {
            fputs(usage, stdout);
            return CLI_OK;
        } else if (c == 'V') {
            printf("ferry %s\n", ferry_version());
            return CLI_OK;
        } else if (c == 'e' || c == 'b' || (c >= OPT_OPTIMIZER && c <= OPT_PRECISION) ||
                   c == OPT_SCHEDULE) {
            bad = set_training(c, optarg, o, &name);
            lr_given |= c == OPT_LR;
        } else if (c >= OPT_MODE && c <= OPT_TIMEOUT_MS) {
            bad = set_distributed(c, optarg, o, &name);
        } else if (c >= OPT_ALGO && c <= OPT_TAU) {
            bad = set_async(c, optarg, o, &name);
        } else {
            if (c == ':')
                cli_err("submit", "%s needs a value", argv[optind - 1]);
            else
                cli_err("submit", "unknown option '%s'", argv[optind - 1]);
            fputs("Try 'ferry submit --help'.\n", stderr);
            return CLI_USAGE;
        }
        if (bad) {
            cli_err("submit", "%s: expected %s, got '%s'", name, bad, optarg);
            return CLI_USAGE;
        }
        if (c >= OPT_ALGO && c <= OPT_TAU && !o->async_only)
            o->async_only = name;
    }
    return check_combinations(o, lr_given);
}

/* What a submit holds while it runs. */
typedef struct submitting {
    int64_t began;
    cluster_train_opts topts;
    bool training_options;
    long load_ms;
    const char *path, *shown;
    int drv_argc;
    char **drv_argv; /* the driver's: the module, then what follows "--" */
    void *bytes;     /* the module file */
    size_t len;
    char *abs; /* its absolute path */
    cli_module_info info;
    home_paths h;
} submitting;

/* submit's own options and the module come before "--", the driver's
 * arguments after it. Returns -1 to go on, or the exit status. */
static int split_args(int argc, char **argv, submitting *s)
{
    int dashes = argc;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0) {
            dashes = i;
            break;
        }
    }
    int parsed = parse(dashes, argv, &s->topts, &s->training_options, &s->load_ms);
    if (parsed >= 0)
        return parsed;
    if (dashes - optind != 1) {
        if (dashes - optind > 1)
            cli_err("submit", "unexpected argument '%s' (task arguments go after --)",
                    argv[optind + 1]);
        else
            cli_err("submit", "which module? `ferry submit MODULE.so [-- ARGS...]`");
        return CLI_USAGE;
    }
    s->path = argv[optind];
    /* The driver sees argv[0] = the module, then its own arguments. */
    s->drv_argc = 1 + (dashes < argc ? argc - dashes - 1 : 0);
    s->drv_argv = calloc((size_t)s->drv_argc + 1, sizeof *s->drv_argv);
    if (!s->drv_argv)
        return CLI_FAIL;
    s->drv_argv[0] = (char *)s->path;
    for (int i = 1; i < s->drv_argc; i++)
        s->drv_argv[i] = argv[dashes + i];
    return -1;
}

/* Reads the module and checks it loads, in a child process. Returns -1 to
 * go on, or the exit status (said). */
static int read_and_inspect(submitting *s)
{
    char err[1024] = "";
    /* The running cluster's limit, when its state can be read, so that a
     * module too big for it is refused before it is read; without one,
     * the "no cluster" error comes later, after the module's own checks. */
    conf_cluster limits;
    conf_defaults(&limits);
    bool have_limits = access(s->h.state, F_OK) == 0 &&
                       conf_load(&limits, s->h.state, err, sizeof err) == 0;
    err[0] = '\0';
    int rc = cli_read_module(s->path, have_limits ? &limits : NULL, &s->bytes, &s->len,
                             err, sizeof err);
    conf_fini(&limits);
    if (rc) {
        cli_err("submit", "%s", err);
        return CLI_FAIL;
    }
    /* Checked first: a module that cannot load is a mistake to report
     * before anything is shipped. dlopen searches the library path for a
     * name without a slash: give it the file the user named. */
    s->abs = realpath(s->path, NULL);
    rc = s->abs
             ? cli_inspect(s->abs, s->shown, (int)s->load_ms, &s->info, err, sizeof err)
             : -errno;
    if (rc) {
        if (!err[0])
            snprintf(err, sizeof err, "%s: %s", s->path, ferry_strerror(rc));
        cli_err("submit", "%s", err);
        return CLI_FAIL;
    }
    return -1;
}

/* A driver runs, a model trains: what was given must fit which it is.
 * Returns -1 to go on, or the exit status (said). */
static int check_kind(const submitting *s)
{
    bool train = !s->info.driver && s->info.model;
    if (!s->info.driver && !s->info.model) {
        cli_err(
            "submit",
            "%s: task '%s' has no driver and no model, so there is nothing to run; it "
            "exports the functions: %s",
            s->shown, s->info.task, s->info.functions);
        return CLI_USAGE;
    }
    if (!train && s->training_options) {
        cli_err(
            "submit",
            "%s: task '%s' has its own driver: training options do not apply (pass its "
            "arguments after --)",
            s->shown, s->info.task);
        return CLI_USAGE;
    }
    if (train && s->drv_argc > 1) {
        cli_err("submit",
                "%s: a model takes no arguments after --, only training options",
                s->shown);
        return CLI_USAGE;
    }
    return -1;
}

static int run_driver(submitting *s)
{
    cli_drive_opts d = {.home = &s->h,
                        .path = s->abs,
                        .shown = s->shown,
                        .bytes = s->bytes,
                        .len = s->len,
                        .argc = s->drv_argc,
                        .argv = s->drv_argv,
                        .json = s->topts.json};
    int status = cli_drive(&d);
    /* The driver's child saw the calls fail; whether a shutdown was
     * why is for this process to say, as for a training. */
    if (status != CLI_OK)
        cli_shutdown_explain(&s->h, "submit", s->began);
    return status;
}

static int train_here(submitting *s)
{
    int status = CLI_FAIL;
    cli_running r = {0};
    cluster_module m = {0};
    if (cli_running_ship(&r, &s->h, s->shown, s->bytes, s->len, &m) == 0) {
        free(s->bytes);
        s->bytes = NULL;
        s->topts.classifier = s->info.classifier;
        /* A training's first error is what a shutdown looked like to it (a
         * peer gone, a ping unanswered): the shutdown is said before it. */
        cli_shutdown_watch watch = {.h = &s->h, .cmd = "submit", .since_ms = s->began};
        cli_shutdown_explain_first(&watch);
        status =
            cli_train(r.cl, &m, s->shown, s->info.task, &s->topts) ? CLI_FAIL : CLI_OK;
    }
    cluster_module_fini(&m);
    if (r.cl && status != CLI_OK)
        cli_shutdown_explain(&s->h, "submit", s->began);
    if (r.cl)
        cli_running_close(&r);
    return status;
}

int cli_submit(int argc, char **argv)
{
    submitting s;
    memset(&s, 0, sizeof s);
    s.began = base_wall_ms();
    s.load_ms = 10000;
    int status = split_args(argc, argv, &s);
    if (status >= 0) {
        free(s.drv_argv);
        return status;
    }
    s.shown = cli_base_name(s.path);
    if (cli_home_init(&s.h, "submit"))
        status = CLI_FAIL;
    else if ((status = read_and_inspect(&s)) < 0 && (status = check_kind(&s)) < 0)
        status = s.info.driver ? run_driver(&s) : train_here(&s);
    cli_err_preface(NULL, NULL);
    free(s.abs);
    free(s.bytes);
    free(s.drv_argv);
    return status;
}
