/* The options of a training run, declared once: each row below gives the
 * option's field, its `ferry submit` flag (and short letter), its type, its
 * default, its bounds or its names, what the refusal says a value must be,
 * its lines in `ferry submit --help`, the --help section it is listed in,
 * and whether it travels to the workers in the TrainBegin message (field of
 * the same name): always, only to the ranks of a run of more than one
 * (PEERS), or never (LOCAL).
 *
 * From the table come the struct both sides hold (proto_train_spec), the
 * defaults, the parsing and bounds of a flag's value, the options' --help,
 * and the TrainBegin's option fields, packed and unpacked by one function
 * each. Adding an option is a row here, a field in ferry.proto when it
 * travels, and the code that uses it. */
#ifndef FERRY_PROTO_TRAIN_SPEC_H
#define FERRY_PROTO_TRAIN_SPEC_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "proto.h"

/* The smallest all-reduce chunk: each chunk is one call between workers,
 * a fixed ~0.1-0.3 ms here whatever its size, so 64-byte chunks made one
 * epoch of the mlp take 300 s instead of 2. */
#define PROTO_TRAIN_MIN_CHUNK_BYTES 16384
/* What a worker takes for an option sent as 0 (its --help says so). */
#define PROTO_TRAIN_WORKER_BATCH        128
#define PROTO_TRAIN_WORKER_CHUNK_BYTES  1048576
#define PROTO_TRAIN_WORKER_BUCKET_BYTES 26214400 /* DDP's bucket_cap_mb, 25 MiB */
#define PROTO_TRAIN_WORKER_TIMEOUT_MS   30000
#define PROTO_TRAIN_WORKER_TAU          4
#define PROTO_TRAIN_STR(x)              PROTO_TRAIN_STR_(x)
#define PROTO_TRAIN_STR_(x)             #x

/* A cluster's most workers (config's CONF_MAX_WORKERS). */
#define PROTO_TRAIN_MAX_WORKERS 256

/* Where an option goes: to every rank, to the ranks of a run of more than
 * one only, or nowhere (the submitting side's own). */
typedef enum proto_train_travel {
    PROTO_TRAIN_ALWAYS,
    PROTO_TRAIN_PEERS,
    PROTO_TRAIN_LOCAL,
} proto_train_travel;

/* The --help sections an option is listed in; ASYNC's options are refused
 * in the other modes. */
typedef enum proto_train_group {
    PROTO_TRAIN_TRAINING,
    PROTO_TRAIN_DISTRIBUTED,
    PROTO_TRAIN_ASYNC,
} proto_train_group;

/* X(field, short letter or 0, flag, type, default, low, high, names,
 *   expected, the value's name in --help, help (lines split by \n), group,
 *   travels)
 * Types: INT (long, low..high), U64 (uint64_t, low..high), DOUBLE
 * (low..high), NAME (one of `names`, NULL-terminated), TEXT (any string).
 * A default of 0 or NULL sends 0 or "": the workers' own default. */
#define PROTO_TRAIN_SPEC(X)                                                              \
    X(epochs, 'e', "epochs", INT, 5, 1, 100000, NULL,                                    \
      "a number of epochs from 1 to 100000", "E", "epochs (default 5)", TRAINING,        \
      ALWAYS)                                                                            \
    X(batch, 'b', "batch", INT, 128, 1, 1 << 20, NULL, "a batch size from 1 to 1048576", \
      "B", "samples a step (default 128)", TRAINING, ALWAYS)                             \
    X(optimizer, 0, "optimizer", NAME, "sgd", 0, 0, PROTO_TRAIN_NAMES("sgd", "adam"),    \
      "sgd or adam", "NAME", "sgd or adam (default sgd)", TRAINING, ALWAYS)              \
    X(lr, 0, "lr", DOUBLE, 0, 1e-12, 1e6, NULL,                                          \
      "a positive learning rate from 1e-12 to 1e6", "LR",                                \
      "learning rate (default 0.05 for sgd, 0.001 for adam)", TRAINING, ALWAYS)          \
    X(schedule, 0, "schedule", NAME, "cosine", 0, 0,                                     \
      PROTO_TRAIN_NAMES("cosine", "constant"), "cosine or constant", "NAME",             \
      "cosine (the learning rate decays to 0 over the run;\nthe default) or constant",   \
      TRAINING, ALWAYS)                                                                  \
    X(momentum, 0, "momentum", DOUBLE, 0.9, 0, 0.999999, NULL, "a momentum in [0, 1)",   \
      "M", "sgd momentum (default 0.9)", TRAINING, ALWAYS)                               \
    X(weight_decay, 0, "weight-decay", DOUBLE, 0, 0, 1e6, NULL,                          \
      "a weight decay from 0 to 1e6", "WD", "L2 weight decay (default 0)", TRAINING,     \
      ALWAYS)                                                                            \
    X(seed, 0, "seed", U64, 1, 0, LONG_MAX, NULL,                                        \
      "a seed from 0 to 9223372036854775807", "S",                                       \
      "seeds the parameters and the shuffle (default 1)", TRAINING, ALWAYS)              \
    X(data_dir, 0, "data", TEXT, NULL, 0, 0, NULL, NULL, "PATH",                         \
      "the training data: a file of your own (.npy,\n"                                   \
      ".npz, CSV, TSV, IDX, HDF5), or the directory\n"                                   \
      "where the workers find Fashion-MNIST (default\n"                                  \
      "/usr/share/datasets/fashion-mnist); a relative\n"                                 \
      "PATH is taken from the current directory",                                        \
      TRAINING, ALWAYS)                                                                  \
    X(precision, 0, "precision", NAME, "fp32", 0, 0,                                     \
      PROTO_TRAIN_NAMES("fp32", "tf32", "bf16"), "fp32, tf32 or bf16", "P",              \
      "fp32 (the default), tf32 (a GPU's TF32 tensor\n"                                  \
      "cores) or bf16; the cpu takes fp32 only",                                         \
      TRAINING, ALWAYS)                                                                  \
    X(mode, 0, "mode", NAME, NULL, 0, 0, PROTO_TRAIN_NAMES("sync", "async", "single"),   \
      "sync, async or single", "MODE",                                                   \
      "sync: synchronous data parallelism, each worker\n"                                \
      "computing the gradient of its slice of every\n"                                   \
      "global batch, summed by a ring all-reduce between\n"                              \
      "the workers (the default with more than one\n"                                    \
      "worker); async: a parameter server sharded over\n"                                \
      "the workers, each worker pulling, computing and\n"                                \
      "pushing without waiting for the others; single:\n"                                \
      "worker 0 alone",                                                                  \
      DISTRIBUTED, PEERS)                                                                \
    X(workers, 0, "workers", INT, 0, 1, PROTO_TRAIN_MAX_WORKERS, NULL,                   \
      "a number of workers from 1 to 256 (a cluster's most)", "K",                       \
      "train on the first K workers (default: all)", DISTRIBUTED, LOCAL)                 \
    X(grad_compression, 0, "grad-compression", NAME, "none", 0, 0,                       \
      PROTO_TRAIN_NAMES("none", "lz4", "fp16"), "none, lz4 or fp16", "C",                \
      "none (default), lz4 (chunks that compress),\n"                                    \
      "or fp16 (gradients travel as half floats)",                                       \
      DISTRIBUTED, PEERS)                                                                \
    X(chunk_bytes, 0, "chunk-bytes", INT, 0, PROTO_TRAIN_MIN_CHUNK_BYTES, 256L << 20,    \
      NULL,                                                                              \
      "a chunk size from 16384 bytes (16 KiB) to 256 MiB: each chunk is one call "       \
      "between workers, and smaller chunks make every step thousands of calls",          \
      "N",                                                                               \
      "all-reduce chunk, each one call between workers\n"                                \
      "(default " PROTO_TRAIN_STR(                                                       \
          PROTO_TRAIN_WORKER_CHUNK_BYTES) ", at "                                        \
                                          "least"                                        \
                                          " " PROTO_TRAIN_STR(                           \
                                              PROTO_TRAIN_MIN_CHUNK_BYTES) ")",          \
      DISTRIBUTED, PEERS)                                                                \
    X(bucket_bytes, 0, "bucket-bytes", INT, 0, 64, 1L << 30, NULL,                       \
      "a bucket size from 64 bytes to 1 GiB", "N",                                       \
      "gradient bucket started while backward runs\n"                                    \
      "(default " PROTO_TRAIN_STR(PROTO_TRAIN_WORKER_BUCKET_BYTES) ", DDP's 25 MiB)",    \
      DISTRIBUTED, PEERS)                                                                \
    X(timeout_ms, 0, "timeout-ms", INT, 0, 100, 24L * 3600 * 1000, NULL,                 \
      "a timeout from 100 ms to a day", "N",                                             \
      "a worker silent this long mid-step fails the step\n"                              \
      "(default " PROTO_TRAIN_STR(PROTO_TRAIN_WORKER_TIMEOUT_MS) ")",                    \
      DISTRIBUTED, PEERS)                                                                \
    X(algo, 0, "algo", NAME, "downpour", 0, 0,                                           \
      PROTO_TRAIN_NAMES("downpour", "dynsgd", "easgd"), "downpour, dynsgd or easgd",     \
      "NAME",                                                                            \
      "downpour (default: gradients pushed to the shards,\n"                             \
      "which step the optimizer), dynsgd (the same, each\n"                              \
      "step divided by its staleness + 1) or easgd\n"                                    \
      "(elastic averaging with the shards' centre)",                                     \
      ASYNC, PEERS)                                                                      \
    X(staleness, 0, "staleness", INT, -1, 0, 1L << 30, NULL,                             \
      "a number of steps from 0 to 1073741824", "K",                                     \
      "a worker more than K of its steps ahead of the\n"                                 \
      "slowest waits (0: lock-step; default unbounded)",                                 \
      ASYNC, PEERS)                                                                      \
    X(ps_shards, 0, "ps-shards", INT, 0, 1, 4096, NULL,                                  \
      "a number of shards from 1 to 4096", "S",                                          \
      "parameter shards, held by worker s mod K (default:\n"                             \
      "one per worker)",                                                                 \
      ASYNC, PEERS)                                                                      \
    X(push_every, 0, "push-every", INT, 0, 1, 1L << 20, NULL,                            \
      "a number of steps from 1 to 1048576", "N",                                        \
      "gradients of N batches summed into one push\n"                                    \
      "(default 1)",                                                                     \
      ASYNC, PEERS)                                                                      \
    X(pull_every, 0, "pull-every", INT, 0, 1, 1L << 20, NULL,                            \
      "a number of steps from 1 to 1048576", "N", "steps between pulls (default 1)",     \
      ASYNC, PEERS)                                                                      \
    X(alpha, 0, "alpha", DOUBLE, 0, 1e-9, 0.999999, NULL,                                \
      "an elastic coefficient in (0, 1)", "A",                                           \
      "easgd's elastic coefficient (default 0.9 / workers)", ASYNC, PEERS)               \
    X(tau, 0, "tau", INT, 0, 1, 1L << 20, NULL, "a number of steps from 1 to 1048576",   \
      "T",                                                                               \
      "easgd's steps between exchanges (default " PROTO_TRAIN_STR(                       \
          PROTO_TRAIN_WORKER_TAU) ")",                                                   \
      ASYNC, PEERS)                                                                      \
    X(test_data, 0, "test-data", TEXT, NULL, 0, 0, NULL, NULL, "FILE",                   \
      "the test set, a file as --data's (default: a\n"                                   \
      "held-out part of --data)",                                                        \
      TRAINING, ALWAYS)                                                                  \
    X(test_split, 0, "test-split", DOUBLE, 0, 0.001, 0.9, NULL,                          \
      "a fraction from 0.001 to 0.9", "F",                                               \
      "the fraction of --data held out for testing,\n"                                   \
      "drawn by --seed (default 0.1)",                                                   \
      TRAINING, ALWAYS)                                                                  \
    X(labels, 0, "labels", TEXT, NULL, 0, 0, NULL, NULL, "FILE",                         \
      "the labels of an .npy or IDX --data", TRAINING, ALWAYS)                           \
    X(test_labels, 0, "test-labels", TEXT, NULL, 0, 0, NULL, NULL, "FILE",               \
      "the labels of an .npy or IDX --test-data", TRAINING, ALWAYS)                      \
    X(x_key, 0, "x-key", TEXT, NULL, 0, 0, NULL, NULL, "NAME",                           \
      "the samples' array in an .npz or HDF5 file\n(default x)", TRAINING, ALWAYS)       \
    X(y_key, 0, "y-key", TEXT, NULL, 0, 0, NULL, NULL, "NAME",                           \
      "the labels' array in an .npz or HDF5 file\n(default y)", TRAINING, ALWAYS)        \
    X(label, 0, "label", TEXT, NULL, 0, 0, NULL, NULL, "NAME",                           \
      "a CSV's label column (default: label, target,\n"                                  \
      "class or y, else the last)",                                                      \
      TRAINING, ALWAYS)                                                                  \
    X(normalize, 0, "normalize", NAME, "standard", 0, 0,                                 \
      PROTO_TRAIN_NAMES("standard", "minmax", "none"), "standard, minmax or none",       \
      "HOW",                                                                             \
      "standard (zero mean, unit variance; the default),\n"                              \
      "minmax (onto [0, 1]) or none, per channel of an\n"                                \
      "image, else per feature, from the training set",                                  \
      TRAINING, ALWAYS)                                                                  \
    X(save, 0, "save", TEXT, NULL, 0, 0, NULL, NULL, "FILE",                             \
      "write the final parameters to FILE as safetensors\n"                              \
      "(named float32 tensors, read by numpy and PyTorch)",                              \
      TRAINING, LOCAL)                                                                   \
    X(init_from, 0, "init-from", TEXT, NULL, 0, 0, NULL, NULL, "FILE",                   \
      "start from the parameters saved in FILE (every\n"                                 \
      "tensor of the model, by name and shape)",                                         \
      TRAINING, LOCAL)                                                                   \
    X(checkpoint_dir, 0, "checkpoint-dir", TEXT, NULL, 0, 0, NULL, NULL, "DIR",          \
      "write checkpoints into DIR (every worker's path\n"                                \
      "to it, as --data's; a relative DIR is taken from\n"                               \
      "the current directory)",                                                          \
      TRAINING, ALWAYS)                                                                  \
    X(checkpoint_every, 0, "checkpoint-every", TEXT, NULL, 0, 0, NULL, NULL, "N",        \
      "a checkpoint every N steps, or every N seconds\n"                                 \
      "with Ns (default: at each epoch's end)",                                          \
      TRAINING, ALWAYS)                                                                  \
    X(keep, 0, "keep", INT, 2, 1, 10000, NULL,                                           \
      "a number of checkpoints from 1 to 10000", "K",                                    \
      "keep the newest K checkpoints (default 2)", TRAINING, ALWAYS)                     \
    X(resume, 0, "resume", TEXT, NULL, 0, 0, NULL, NULL, "DIR",                          \
      "continue from the newest valid checkpoint in DIR\n"                               \
      "(the others are skipped, each with a warning)",                                   \
      TRAINING, ALWAYS)                                                                  \
    X(timeline, 0, "timeline", TEXT, NULL, 0, 0, NULL, NULL, "FILE",                     \
      "write what every worker does, step by step, to\n"                                 \
      "FILE as a trace (Chrome trace-event JSON: open it\n"                              \
      "in Perfetto or chrome://tracing)",                                                \
      TRAINING, LOCAL)                                                                   \
    X(stall_warn, 0, "stall-warn", TEXT, NULL, 0, 0, NULL, NULL, "DURATION",             \
      "report which workers hold the others up once the\n"                               \
      "training makes no progress this long (500ms, 30s,\n"                              \
      "2m; 0: never; default: the cluster file's\n"                                      \
      "stall_warn_ms, 60 s)",                                                            \
      DISTRIBUTED, LOCAL)                                                                \
    X(stall_abort, 0, "stall-abort", TEXT, NULL, 0, 0, NULL, NULL, "DURATION",           \
      "end the run with that report as its error once no\n"                              \
      "progress lasts this long (default: the cluster\n"                                 \
      "file's stall_abort_ms, off)",                                                     \
      DISTRIBUTED, LOCAL)                                                                \
    X(max_restarts, 0, "max-restarts", INT, 3, 0, 1000, NULL,                            \
      "a number of restarts from 0 to 1000", "R",                                        \
      "sync mode: when a worker is lost, roll every rank\n"                              \
      "back to the last checkpoint and go on, at most R\n"                               \
      "times (default 3; 0: a lost worker ends the run)",                                \
      DISTRIBUTED, LOCAL)                                                                \
    X(min_workers, 0, "min-workers", INT, 0, 1, PROTO_TRAIN_MAX_WORKERS, NULL,           \
      "a number of workers from 1 to 256", "M",                                          \
      "sync mode: a worker that cannot come back, or does\n"                             \
      "not answer when the run begins, is left out and the\n"                            \
      "run goes on while M or more remain (the global\n"                                 \
      "batch kept; default: all of them), taking it in at\n"                             \
      "a checkpoint once it answers",                                                    \
      DISTRIBUTED, LOCAL)

#define PROTO_TRAIN_NAMES(...) ((const char *const[]){__VA_ARGS__, NULL})

#define PROTO_TRAIN_CTYPE_INT    long
#define PROTO_TRAIN_CTYPE_U64    uint64_t
#define PROTO_TRAIN_CTYPE_DOUBLE double
#define PROTO_TRAIN_CTYPE_NAME   const char *
#define PROTO_TRAIN_CTYPE_TEXT   const char *

/* The options' fields, for a struct that holds them (cluster_train_opts
 * reaches them by name and as one proto_train_spec). */
#define PROTO_TRAIN_FIELD(field, s, flag, type, ...) PROTO_TRAIN_CTYPE_##type field;
#define PROTO_TRAIN_FIELDS                           PROTO_TRAIN_SPEC(PROTO_TRAIN_FIELD)

/* A run's options. Strings are borrowed: from the command line on the
 * submitting side, from the unpacked message on a worker's. */
typedef struct proto_train_spec {
    PROTO_TRAIN_FIELDS
} proto_train_spec;

/* The options' indices in the table. */
typedef enum proto_train_option {
#define PROTO_TRAIN_ID(field, ...) PROTO_TRAIN_OPT_##field,
    PROTO_TRAIN_SPEC(PROTO_TRAIN_ID)
#undef PROTO_TRAIN_ID
        PROTO_TRAIN_OPTIONS
} proto_train_option;

typedef enum proto_train_type {
    PROTO_TRAIN_INT,
    PROTO_TRAIN_U64,
    PROTO_TRAIN_DOUBLE,
    PROTO_TRAIN_NAME,
    PROTO_TRAIN_TEXT,
} proto_train_type;

/* One row of the table, for code that walks the options. */
typedef struct proto_train_row {
    const char *flag; /* without its dashes */
    char letter;      /* the short option, or 0 */
    proto_train_type type;
    long ilo, ihi;            /* INT and U64 */
    double dlo, dhi;          /* DOUBLE */
    const char *const *names; /* NAME */
    const char *expected;     /* NULL: TEXT, any value */
    const char *value, *help; /* the value's name and help in --help */
    proto_train_group group;
    proto_train_travel travels;
} proto_train_row;

extern const proto_train_row proto_train_rows[PROTO_TRAIN_OPTIONS];

/* The defaults of every option. */
void proto_train_spec_defaults(proto_train_spec *s);

/* Sets option `opt` from `arg` (kept, not copied). Returns NULL, or what a
 * value must be when `arg` is not one (the row's `expected`). */
const char *proto_train_spec_set(proto_train_spec *s, proto_train_option opt,
                                 const char *arg);

/* Writes the --help lines of `group`'s options. */
void proto_train_spec_help(FILE *f, proto_train_group group);

/* Named float32 tensors one after another (a model's parameters): n
 * names, 4 dimensions each (unused ones 0), and `floats` values in their
 * order. */
typedef struct proto_tensors {
    size_t n;
    const char *const *names;
    const uint32_t *shapes;
    const float *values;
    size_t floats;
} proto_tensors;

/* What a rank's TrainBegin holds besides the options: the run's. */
typedef struct proto_train_begin_run {
    uint64_t session;         /* chosen by the master */
    const char *submitter;    /* who asks, for the message that refuses another */
    const uint8_t *secret;    /* the run's, secret_len bytes */
    size_t secret_len;
    uint32_t rank, world;     /* with peers only, as n_peers and peers */
    size_t n_peers;
    const char *const *peers; /* every rank's address */
    proto_tensors init; /* parameters to start from (--init-from), or none */
    bool timeline;      /* record the rank's timeline (--timeline) */
    uint32_t rejoin_epoch; /* async: a restarted rank back after it (0: none) */
} proto_train_begin_run;

/* Packs a rank's TrainBegin into out->data (malloc'd): the options of `s`
 * as proto_train_spec_pack() sets them, and `run`. Returns 0 or
 * FERRY_ENOMEM. */
int proto_train_begin_pack(const proto_train_spec *s, bool peers,
                           const proto_train_begin_run *run, proto_bytes *out);

/* A TrainBegin as a rank reads it: the options (the LOCAL ones at their
 * defaults), the run, and what the master sets on its own. Its strings and
 * the secret point into the decoded message it holds. */
typedef struct proto_train_begin {
    proto_train_spec spec;
    proto_train_begin_run run; /* its strings never NULL ("" when absent) */
    uint32_t eval_batch;       /* 0: the worker's default */
    uint32_t idle_ms;          /* 0: the worker's default */
    bool init_malformed;       /* init tensors whose shapes or bytes do not add up */
    void *msg;                 /* private: the decoded message */
} proto_train_begin;

/* Decodes a TrainBegin once. Returns 0, FERRY_ECORRUPT for bytes that are
 * not one, or FERRY_ENOMEM. */
int proto_train_begin_unpack(const void *buf, size_t len, proto_train_begin **out);

/* Wipes the secret and frees what an unpack returned. NULL: no-op. */
void proto_train_begin_free(proto_train_begin *b);

#endif
