/* `ferry submit MODULE.so`: check the module in a child process (inspect.c),
 * then either train its model from here or run its driver in a child
 * process (drive.c) that ships it to every worker: plugin code never runs
 * in this process. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ferry/ferry.h>

#include "cli.h"
#include "runtime/data/data.h"
#include "cli_plugin.h"
#include "runtime/train/ckpt_file.h"

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
    "  -q, --quiet             do not show what the task logs on the workers\n"
    "                          (shown on stderr as \"[rank R] ...\", a burst of\n"
    "                          50 lines, then at most 20 a second per worker)\n"
    "      --load-timeout-ms MS  how long loading the module here to check it\n"
    "                          may take, constructors included (default "
    "10000)\n"
    "      --ship-data         send the files --data, --test-data, --labels and\n"
    "                          --test-labels name to the workers that lack them\n"
    "                          (no shared disk needed); each keeps them in its\n"
    "                          data cache, by content\n" CLI_REMOTE_HELP
    "  -h, --help              this text\n"
    "  -V, --version           ferry's version\n";

_Static_assert(PROTO_TRAIN_MAX_WORKERS == CONF_MAX_WORKERS,
               "--workers takes as many as a cluster has");

enum {
    OPT_LOAD_TIMEOUT = 254,
    OPT_SHIP_DATA = 253,
    /* The spec's options without a letter: their index from here. */
    OPT_SPEC = 256,
};

/* The option of getopt's value `c`, or -1 if it is none of the spec's. */
static int spec_option(int c)
{
    for (int i = 0; i < PROTO_TRAIN_OPTIONS; i++)
        if (c == (proto_train_rows[i].letter ? proto_train_rows[i].letter : OPT_SPEC + i))
            return i;
    return -1;
}

static void print_usage(void)
{
    static const char *const sections[] = {
        [PROTO_TRAIN_TRAINING] = "training (a module with a model):",
        [PROTO_TRAIN_DISTRIBUTED] = "distributed training:",
        [PROTO_TRAIN_ASYNC] = "async mode (--mode async):",
    };
    fputs(usage, stdout);
    for (int g = PROTO_TRAIN_TRAINING; g <= PROTO_TRAIN_ASYNC; g++) {
        printf("\n%s\n", sections[g]);
        proto_train_spec_help(stdout, (proto_train_group)g);
    }
}

/* The options that apply to one mode or algorithm only, given with
 * another (`async_only`: the first async option given, or -1). Returns -1
 * to go on, or the exit status (said). */
static int check_combinations(cluster_train_opts *o, int async_only, bool lr_given)
{
    bool async = o->mode && strcmp(o->mode, "async") == 0;
    if (async_only >= 0 && !async) {
        cli_err("submit", "--%s applies to --mode async only",
                proto_train_rows[async_only].flag);
        return CLI_USAGE;
    }
    if (async && (o->alpha != 0 || o->tau != 0) && strcmp(o->algo, "easgd") != 0) {
        cli_err("submit", "%s applies to --algo easgd only",
                o->alpha != 0 ? "--alpha" : "--tau");
        return CLI_USAGE;
    }
    bool ckpt =
        (o->checkpoint_dir && o->checkpoint_dir[0]) || (o->resume && o->resume[0]);
    if (o->ship_data && (!o->data_dir || !o->data_dir[0])) {
        cli_err(
            "submit",
            "--ship-data sends what --data (and --test-data, --labels, --test-labels) "
            "name: name the data (this host's Fashion-MNIST is --data %s)",
            RT_FMNIST_DIR);
        return CLI_USAGE;
    }
    uint64_t steps;
    double secs;
    if (rt_ckpt_parse_every(o->checkpoint_every, &steps, &secs) == 0 && async &&
        secs > 0) {
        cli_err("submit",
                "--checkpoint-every %s: an async run's ranks write their shards "
                "every N global steps or at each epoch's end, not by time",
                o->checkpoint_every);
        return CLI_USAGE;
    }
    if (rt_ckpt_parse_every(o->checkpoint_every, &steps, &secs) != 0) {
        cli_err("submit", "--checkpoint-every: %s, got '%s'", RT_CKPT_EVERY_EXPECTED,
                o->checkpoint_every);
        return CLI_USAGE;
    }
    if (o->checkpoint_every && o->checkpoint_every[0] && !ckpt) {
        cli_err("submit", "--checkpoint-every applies with --checkpoint-dir or --resume");
        return CLI_USAGE;
    }
    if (!lr_given)
        o->lr = strcmp(o->optimizer, "adam") == 0 ? 0.001 : 0.05;
    return -1;
}

/* submit's own options, then the spec's. */
static void long_options(struct option *longs)
{
    static const struct option own[] = {
        {"json", no_argument, NULL, 'j'},
        {"quiet", no_argument, NULL, 'q'},
        {"load-timeout-ms", required_argument, NULL, OPT_LOAD_TIMEOUT},
        {"ship-data", no_argument, NULL, OPT_SHIP_DATA},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
    };
    int n = (int)(sizeof own / sizeof own[0]);
    memcpy(longs, own, sizeof own);
    for (int i = 0; i < PROTO_TRAIN_OPTIONS; i++) {
        const proto_train_row *r = &proto_train_rows[i];
        longs[n++] = (struct option){r->flag, required_argument, NULL,
                                     r->letter ? r->letter : OPT_SPEC + i};
    }
    longs[n] = (struct option){NULL, 0, NULL, 0};
}

/* Parses submit's own options in argv[0..argc). Returns -1 to go on (optind
 * is then the first operand; *trained says whether a training option was
 * given), or the exit status. */
static int parse(int argc, char **argv, cluster_train_opts *o, bool *trained,
                 long *load_ms, bool *quiet)
{
    struct option longs[6 + PROTO_TRAIN_OPTIONS + 1];
    long_options(longs);
    *o = (cluster_train_opts){0};
    proto_train_spec_defaults(&o->spec);
    *trained = false;
    bool lr_given = false;
    int async_only = -1;
    char name[64];
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":hVqe:b:", longs, NULL)) != -1) {
        const char *bad = NULL;
        int opt = spec_option(c);
        *trained |= opt >= 0;
        if (c == 'j') {
            o->json = true;
        } else if (c == 'q') {
            *quiet = true;
        } else if (c == OPT_SHIP_DATA) {
            o->ship_data = true;
        } else if (c == OPT_LOAD_TIMEOUT) {
            snprintf(name, sizeof name, "--load-timeout-ms");
            if (!base_parse_long(optarg, 100, 3600L * 1000, load_ms))
                bad = "a time from 100 ms to an hour";
        } else if (c == 'h') {
            print_usage();
            return CLI_OK;
        } else if (c == 'V') {
            printf("ferry %s\n", ferry_version());
            return CLI_OK;
        } else if (opt >= 0) {
            const proto_train_row *r = &proto_train_rows[opt];
            snprintf(name, sizeof name, "--%s", r->flag);
            bad = proto_train_spec_set(&o->spec, (proto_train_option)opt, optarg);
            lr_given |= opt == PROTO_TRAIN_OPT_lr;
            if (!bad && r->group == PROTO_TRAIN_ASYNC && async_only < 0)
                async_only = opt;
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
    }
    return check_combinations(o, async_only, lr_given);
}

/* What a submit holds while it runs. */
typedef struct submitting {
    int64_t began;
    cluster_train_opts topts;
    bool training_options;
    bool quiet;
    long load_ms;
    const char *path, *shown;
    int drv_argc;
    char **drv_argv; /* the driver's: the module, then what follows "--" */
    void *bytes;     /* the module file */
    size_t len;
    char *abs; /* its absolute path */
    char resume[4160]; /* --resume's chosen checkpoint */
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
    int parsed =
        parse(dashes, argv, &s->topts, &s->training_options, &s->load_ms, &s->quiet);
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
                        .json = s->topts.json,
                        .quiet = s->quiet};
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
    if (cli_running_ship_some(&r, &s->h, "submit", s->shown, s->bytes, s->len,
                              s->topts.min_workers, &m) == 0) {
        /* What the model logs (mc->ops->log) comes with each call's reply. */
        cluster_show_task_logs(r.cl, s->quiet ? NULL : stderr);
        free(s->bytes);
        s->bytes = NULL;
        s->topts.classifier = s->info.classifier;
        s->topts.stall_warn_ms = r.conf.stall_warn_ms;
        s->topts.stall_abort_ms = r.conf.stall_abort_ms;
        /* A training's first error is what a shutdown looked like to it (a
         * peer gone, a ping unanswered): the shutdown is said before it. */
        cli_shutdown_watch watch = {.h = &s->h, .cmd = "submit", .since_ms = s->began};
        cli_shutdown_explain_first(&watch);
        if (s->topts.ship_data && cli_ship_data(r.cl, &s->topts, s->quiet))
            status = CLI_FAIL;
        else
            status = cli_train(r.cl, &s->h, &m, s->shown, s->info.task, &s->topts)
                         ? CLI_FAIL
                         : CLI_OK;
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
    else if ((status = cli_checkpoint_dir_fresh(&s.topts)) != CLI_OK)
        ;
    else if ((status = read_and_inspect(&s)) < 0 && (status = check_kind(&s)) < 0 &&
             (!s.topts.resume || !s.topts.resume[0] ||
              (status = cli_resume_pick(&s.topts, &s.info, s.resume, sizeof s.resume)) ==
                  CLI_OK))
        status = s.info.driver ? run_driver(&s) : train_here(&s);
    cli_err_preface(NULL, NULL);
    free(s.abs);
    free(s.bytes);
    free(s.drv_argv);
    return status;
}
