/* runtime/data — the samples a trainer feeds its model.
 *
 *   idx.c      IDX files (LeCun's format), gzip-compressed or not, via zlib
 *   fmnist.c   Fashion-MNIST from a directory of the four .gz files,
 *              normalised to zero mean and unit variance
 *   linear.c   a synthetic regression set with a known answer (linreg)
 *   loader.c   sharding by rank, per-epoch shuffling from a seed, and a
 *              prefetch thread that gathers the next batch while the model
 *              computes on the current one; shard.c: a rank's own part of
 *              a file read in place, and its block shuffle
 *   devset.c   the loader's device side: a set copied to a device once,
 *              batches gathered there; where a set goes (the budget)
 *   stage.c    the device side of a set too large for that: pinned
 *              buffers, copies on a second queue
 *   dataset.c  a set by name, or a user's file named where a directory goes
 *   load.c     a user's files made a training and a test set (a seeded
 *              split, or a test file), normalised (normalize.c) and
 *              described (describe.c); spec.c: from the training options
 *   source.c   a file's format from its first bytes, else its name
 *   npy.c npz.c idx_array.c csv.c csv_number.c h5.c
 *              the readers: NumPy (an .npy and a stored .npz member read in
 *              place from a mapping), IDX of any type, CSV/TSV (libcsv),
 *              HDF5 (libhdf5, when built; h5_off.c otherwise)
 *   array.c    arrays as files hold them, converted to float as read
 *   assemble.c shapes, samples and labels of a user's set
 *   memory.c   the aligned blocks a set's arrays live in; freeing a set
 *   samples.c  a prediction's samples: one file, labels or not, as a run
 *              saw its data (its shape, classes and normalisation)
 *   rng.c      the seeded generator the shuffles and the linear set draw
 *              from (data_int.h)
 *
 * Every error names the file and what is wrong with it. */
#ifndef FERRY_RUNTIME_DATA_H
#define FERRY_RUNTIME_DATA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ferry/device.h>
#include <ferry/model.h>

/* The seeded generator the shuffles, the synthetic set and a model's
 * initialisation draw from, so that a seed means the same numbers on every
 * machine and every rank. */
/* xoshiro256** seeded through splitmix64, with Box-Muller normals. Small,
 * fast and the same everywhere, unlike rand(3). Not for cryptography. */
typedef struct rt_rng {
    uint64_t s[4];
    double spare; /* Box-Muller draws two normals; the second waits here */
    bool has_spare;
} rt_rng;

/* Seeds `r` from (seed, stream): distinct streams of one seed are
 * independent sequences (the loader uses the epoch as the stream). */
void rt_rng_seed(rt_rng *r, uint64_t seed, uint64_t stream);
uint64_t rt_rng_next(rt_rng *r);
/* Uniform in [0, bound), without modulo bias; 0 when bound is 0. */
uint64_t rt_rng_below(rt_rng *r, uint64_t bound);
/* Uniform in (0, 1]: never 0, so log() of it is finite. */
double rt_rng_uniform(rt_rng *r);
/* Standard normal N(0, 1). */
double rt_rng_normal(rt_rng *r);

/* Where Debian's dataset-fashion-mnist puts the files. */
#define RT_FMNIST_DIR "/usr/share/datasets/fashion-mnist"

/* n samples in host memory: x is n x features floats; then either labels
 * (n int32, a classification set) or targets (n x outputs floats). */
typedef struct rt_dataset {
    size_t n;
    int features; /* floats a sample (c * h * w) */
    int c, h, w;  /* a sample's shape */
    int classes;  /* labels lie in [0, classes); 0 for a regression set */
    int outputs;  /* floats of target a sample; 0 for a classification set */
    float *x;
    int32_t *labels;
    float *targets;
    /* The parameters the set was drawn from, when known (the linear set:
     * its weights, then its bias); NULL otherwise. */
    float *answer;
    size_t answer_n;
    /* A set read from a user's file: */
    char **class_names; /* string labels' names, label i's at [i]; or NULL */
    int n_class_names;
    /* What normalisation did: x = (raw - shift) * scale, per norm_n
     * channels (c for images) or features; NULL when none. */
    float *norm_shift, *norm_scale;
    int norm_n;
    char *about; /* what was read, one line for the first progress line */
    /* A set read in place from a memory-mapped .npy: x is NULL and the
     * loader converts (and normalises, by norm_*) each sample as it
     * gathers it, so that no copy of the file lives in anonymous memory.
     * Sample i is row mapped_rows[i] of the file (NULL: row i). */
    struct rt_array *mapped;
    uint32_t *mapped_rows;
} rt_dataset;

/* ---- IDX ------------------------------------------------------------------ */

/* The contents of one IDX file of unsigned bytes (type 0x08), gzip or plain:
 * dims[0..ndims) and dims[0] * ... bytes of data. */
typedef struct rt_idx {
    int ndims;
    uint32_t dims[4];
    uint8_t *data;
    size_t len;
} rt_idx;

/* What a load polls between pieces of a file (a few MiB each): fn(arg)
 * true gives the load up with FERRY_ECANCELED, so that a training start
 * whose caller left does not load on for seconds. NULL (or fn NULL):
 * never. */
typedef struct rt_data_cancel {
    bool (*fn)(void *);
    void *arg;
} rt_data_cancel;

/* Reads `path`. Returns 0, or FERRY_ENOENT (missing), FERRY_ECORRUPT (bad
 * magic, type, dimension count, or fewer bytes than the header promises:
 * truncated), FERRY_EIO, FERRY_ENOMEM, with `err` naming the file. */
int rt_idx_read(const char *path, rt_idx *out, char *err, size_t errlen);
/* rt_idx_read, polling `cancel`; FERRY_ECANCELED when it says so. */
int rt_idx_read_polled(const char *path, const rt_data_cancel *cancel, rt_idx *out,
                       char *err, size_t errlen);
void rt_idx_free(rt_idx *idx);

/* ---- the sets --------------------------------------------------------------- */

/* Fashion-MNIST's training (60,000) or test (10,000) split from `dir`
 * (NULL: RT_FMNIST_DIR): images [n][1][28][28] scaled to [0, 1] and then
 * normalised with the training set's mean and standard deviation (the same
 * constants for both splits), labels 0..9. Checks that images and labels
 * agree in count. Errors as rt_idx_read, and FERRY_ENOENT says to install
 * dataset-fashion-mnist. */
int rt_fmnist_load(const char *dir, bool train, rt_dataset *out, char *err,
                   size_t errlen);
int rt_fmnist_load_polled(const char *dir, bool train, const rt_data_cancel *cancel,
                          rt_dataset *out, char *err, size_t errlen);

/* A regression set of n samples with `features` inputs and one output:
 * x ~ N(0, 1), t = x . w + b + noise * N(0, 1), where w and b are drawn from
 * `seed` too (so a train and a test set made with the same seed share them,
 * whatever their n). `which` (0: train, 1: test) picks independent samples.
 * Shape 1 x 1 x features, outputs 1, classes 0; `answer` holds w, then b.
 * FERRY_EINVAL for features < 1,
 * a negative or NaN noise, or `which` not 0 or 1; FERRY_ENOMEM. */
int rt_linear_make(size_t n, int features, float noise, uint64_t seed, int which,
                   rt_dataset *out);

/* The set `name` names: "fashion-mnist" (NULL means it too) from `dir`, or
 * "linear" (features from `features`, 8192 training / 2048 test samples,
 * noise 0.1); a `dir` that is a file is read as rt_data_source_load reads
 * it, with the defaults (and `seed` for the split). Errors as above;
 * FERRY_EINVAL for an unknown name. */
int rt_dataset_load(const char *name, const char *dir, bool train, int features,
                    uint64_t seed, rt_dataset *out, char *err, size_t errlen);
/* rt_dataset_load, polling `cancel` while it reads files. */
int rt_dataset_load_polled(const char *name, const char *dir, bool train, int features,
                           uint64_t seed, const rt_data_cancel *cancel, rt_dataset *out,
                           char *err, size_t errlen);

/* ---- a user's own files ---------------------------------------------------- */

/* Where a run's data comes from when it is not a named set: the options
 * --data, --labels, --test-data, --test-labels, --x-key, --y-key, --label,
 * --normalize and --test-split, and the seed of the split. */
typedef struct rt_data_source {
    const char *path;        /* the training file */
    const char *labels;      /* the labels of an .npy or IDX file (NULL: none) */
    const char *test_path;   /* the test file (NULL: a split of `path`) */
    const char *test_labels; /* the test file's labels, as `labels` */
    const char *x_key;       /* .npz member or HDF5 dataset (NULL: "x") */
    const char *y_key;       /* (NULL: "y") */
    const char *label;       /* CSV's label column (NULL: label, target,
                                class or y, else the last) */
    const char *normalize;   /* "standard" (NULL), "minmax" or "none" */
    double test_split;       /* held out when no test_path (0: RT_DATA_SPLIT) */
    uint64_t seed;           /* draws the split */
    /* The reader's shards (rt_loader_opts.shard), for a set read in place
     * with normalize "none": only their samples are checked finite, so that
     * a rank reads nothing of the file but its shards. Rank `rank` of
     * `world` reading global batches of `batch` (training) and `test_batch`
     * (evaluation); world 0: the whole set is checked. */
    int rank, world, batch, test_batch;
} rt_data_source;

/* The fraction held out for testing when neither a test file nor a split
 * is given. */
#define RT_DATA_SPLIT 0.1

/* Reads the training and test sets `s` names, each file's format known
 * from its first bytes (NumPy .npy or .npz, IDX plain or gzip, HDF5) and
 * else from its name (.csv, .tsv): samples converted to float, labels
 * (integers or names: classes) or float targets, normalised by statistics
 * of the training set alone (the same on every worker, which all read the
 * whole file; but see rt_data_source.world), `about` saying what was
 * read. Errors name the file and what
 * is wrong where (line and column, sample, byte counts); FERRY_ECORRUPT,
 * FERRY_ENOENT, FERRY_EINVAL, FERRY_ENOMEM, FERRY_ECANCELED. */
int rt_data_source_load(const rt_data_source *s, const rt_data_cancel *cancel,
                        rt_dataset *train, rt_dataset *test, char *err, size_t errlen);

/* Sample i of `ds` as floats into out[features]: from x, or converted
 * and normalised from a mapped file. */
void rt_dataset_row(const rt_dataset *ds, size_t i, float *out);

/* Whether `path` names a user's file rather than a directory
 * (Fashion-MNIST's) or nothing: anything there but a directory, or a
 * missing path whose name has an extension ("x.npy"), which its reader
 * then refuses with the path and the reason. */
bool rt_data_is_file(const char *path);

struct proto_train_spec;
/* The source a run's options name (--data and the rest): true when --data
 * names a file, to be read with rt_data_source_load; false for a named set
 * (out still filled). `sp`'s strings are borrowed. */
bool rt_data_source_from_spec(const struct proto_train_spec *sp, rt_data_source *out);

/* ---- samples to predict --------------------------------------------------- */

/* How a run saw its data, which the samples of a prediction are made to
 * match: the sample shape the model took, the normalisation (norm_n
 * groups, x = (raw - shift) * scale) and a CSV's class names. */
typedef struct rt_data_seen {
    int input[3];
    const float *shift, *scale;
    int norm_n;
    const char *const *class_names;
    int n_class_names;
} rt_data_seen;

/* Reads every sample of s->test_path (or, when none, s->path) as a run
 * that saw its data as `seen` did: labels when the file has them (--labels
 * or --test-labels beside an .npy or IDX file, an .npz's y, a CSV's label
 * column, named by the run's class names), none otherwise (an .npy or IDX
 * file alone, an .npz with x alone, a CSV of exactly the model's columns); then
 * normalised with seen's statistics, never its own. *labelled says which;
 * an unlabelled set carries labels of 0 (the loader takes labelled sets),
 * which mean nothing. A sample of other than the model's numbers is
 * refused with both shapes (FERRY_EINVAL); errors as rt_data_source_load
 * otherwise. */
int rt_data_samples_load(const rt_data_source *s, const rt_data_seen *seen,
                         rt_dataset *out, bool *labelled, char *err, size_t errlen);

/* Normalises `ds` with a run's statistics (n groups; 0: none): in place,
 * or kept for the loader of a mapped set. FERRY_EINVAL when n groups do
 * not divide a sample, FERRY_ENOMEM. */
int rt_normalize_as(rt_dataset *ds, const float *shift, const float *scale, int n,
                    char *err, size_t errlen);

/* The name of a user's file's normalisation (--normalize `how`):
 * "standard", "minmax" or "none"; NULL for a named set, whose own constants
 * the set's name says. */
const char *rt_data_norm_kind(const char *how, bool user_file);

/* Frees x, labels, targets and answer with free() and zeroes *ds. NULL:
 * no-op. */
void rt_dataset_free(rt_dataset *ds);

/* ---- the loader ------------------------------------------------------------- */

/* One batch in host memory, valid until the next rt_loader_next(),
 * rt_loader_begin() or rt_loader_destroy(). x, labels and targets are
 * 64-byte aligned. */
typedef struct rt_batch_host {
    int n;
    const float *x;        /* NULL from an index_only loader */
    const int32_t *labels; /* NULL for a regression set (or index_only) */
    const float *targets;  /* NULL for a classification set (or index_only) */
    /* Where the batch lies in its set, for a copy of the set held elsewhere
     * (rt_devset): its samples are perm[pos .. pos + n) of the epoch's
     * permutation of `set` (perm_n entries, rewritten by the next
     * rt_loader_begin, which also changes epoch_id). */
    const rt_dataset *set;
    const uint32_t *perm;
    size_t perm_n, pos;
    uint64_t epoch_id;
} rt_batch_host;

typedef struct rt_loader_opts {
    int batch;       /* global batch: samples a step over all ranks */
    int rank, world; /* this rank takes its slice of every global batch */
    uint64_t seed;   /* the shuffle of epoch e is drawn from (seed, e) */
    bool shuffle;    /* false: dataset order (evaluation) */
    /* Batches carry their positions only (x, labels, targets NULL): the
     * samples are gathered elsewhere, from a copy of the set (rt_devset). */
    bool index_only;
    /* Each rank reads only its shard of the set (rt_loader below): for a
     * set read in place from its file, whose pages then stay the rank's
     * own. */
    bool shard;
    /* Where the batches' host buffers come from (NULL: rt_data_alloc and
     * free()): a stager's page-locked memory (rt_stager_loader_opts). The
     * allocator must outlive the loader. */
    void *(*host_alloc)(void *arg, size_t bytes);
    void (*host_free)(void *arg, void *p);
    void *host_arg;
} rt_loader_opts;

/* Global batch i of epoch e holds the samples at positions
 * [i * batch, min((i + 1) * batch, n)) of that epoch's permutation (the same
 * on every rank); rank r of W takes the r-th of W nearly equal, contiguous
 * slices of it (the first (size % W) slices one sample larger). So W ranks
 * together see exactly what one rank sees with the same global batch. The
 * last, short global batch is kept.
 *
 * With `shard`, the slices keep their sizes but rank r draws its own from
 * its shard: the contiguous run of samples its slices of an epoch add up
 * to (nothing padded, nothing dropped; every rank agrees on every
 * boundary), read in a block shuffle of (seed, rank, epoch) (shard.c). A
 * global batch is still the union of the ranks' slices, and an epoch
 * still every sample once, but which samples share a batch depends on W:
 * W ranks no longer see what one rank sees. The batches' perm is then the
 * shard's order (perm_n: the shard's size). */
typedef struct rt_loader rt_loader;

/* Makes a loader over `ds` (borrowed: it must outlive the loader) and
 * starts its prefetch thread, which blocks every asynchronous signal.
 * FERRY_EINVAL for a batch < 1, a rank outside [0, world), more than
 * UINT32_MAX samples, a set with neither labels nor targets, or one of
 * host_alloc and host_free without the other; FERRY_ENOMEM.
 * rt_loader_next() is for one thread at a time. */
int rt_loader_create(const rt_dataset *ds, const rt_loader_opts *o, rt_loader **out);
/* Steps in an epoch (global batches; the same on every rank). */
size_t rt_loader_steps(const rt_loader *l);
/* Starts epoch `epoch` (0-based): the prefetch thread begins gathering its
 * first batch. May be called again at any point, mid-epoch too: the new
 * epoch starts whole. FERRY_EINVAL for a negative epoch. */
int rt_loader_begin(rt_loader *l, int epoch);
/* The next batch of this rank's slice, or NULL at the end of the epoch. A
 * rank whose slice of a global batch is empty (a global batch smaller than
 * the world) gets a batch with n = 0. Blocks until the prefetch thread has
 * it ready. */
const rt_batch_host *rt_loader_next(rt_loader *l);
/* Stops the prefetch thread and frees. NULL: no-op. */
void rt_loader_destroy(rt_loader *l);

/* ---- the loader's device side ------------------------------------------------ */

/* A copy of a set in a device's memory, with the epoch's permutation beside
 * it, from which batches are gathered on the device (a gather kernel on a
 * GPU) by the positions an index_only loader hands out: the data crosses
 * to the device once per session, not once per step. */
typedef struct rt_devset rt_devset;

/* Bytes a device copy of `ds` takes (samples, labels or targets, and the
 * permutation). */
size_t rt_devset_bytes(const rt_dataset *ds);

/* Caps the bytes a device copy of a set may take (tests force the staging
 * path with 0): a number of bytes, or with a k, M or G suffix (powers of
 * 1024). Unset or empty: half the device's free memory. */
#define RT_DEVSET_LIMIT_ENV "FERRY_DEVSET_MAX_BYTES"

/* The most bytes a device copy of a set may take: `limit` (the text of
 * RT_DEVSET_LIMIT_ENV; NULL or "": none) when given, else half of
 * `free_bytes`, the rest left to the model, its workspace and other
 * processes. 0, or FERRY_EINVAL for a limit that is not a number as
 * RT_DEVSET_LIMIT_ENV says. Pure. */
int rt_devset_budget(size_t free_bytes, const char *limit, size_t *budget);

/* Where a trainer keeps a set's samples for a device. */
typedef enum rt_data_place {
    RT_DATA_IN_PLACE,  /* the cpu: the model reads the loader's host buffers */
    RT_DATA_ON_DEVICE, /* copied once, batches gathered there (rt_devset) */
    RT_DATA_STAGED,    /* too large for that: batches gathered on the host into
                          pinned buffers and copied on a second queue while
                          the previous step computes (rt_stager) */
    RT_DATA_UPLOADED,  /* each batch uploaded by the compute queue (the
                          trainer's host_batches: the reference the others
                          are checked against) */
} rt_data_place;

/* The choice for a set of `need` bytes (rt_devset_bytes) on a device of
 * `kind` (FERRY_DEVICE_*) whose budget is `budget` (rt_devset_budget):
 * the cpu reads in place; otherwise host_batches uploads, a set within the
 * budget is held on the device, a larger one is staged. Pure. */
rt_data_place rt_data_place_choose(int kind, bool host_batches, size_t need,
                                   size_t budget);
/* "in place", "on the device", "staged", "uploaded". */
const char *rt_data_place_name(rt_data_place p);
/* rt_data_place_choose for `ds` on `dev`, with the device's free memory
 * and RT_DEVSET_LIMIT_ENV; why (may be NULL) gets the sizes behind the
 * choice. 0, FERRY_EINVAL for a bad RT_DEVSET_LIMIT_ENV, or the device's
 * failure to say its free memory. */
int rt_data_place_for(ferry_device_t *dev, const rt_dataset *ds, bool host_batches,
                      rt_data_place *out, char *why, size_t whylen);

/* Copies `ds` (borrowed: it must outlive the devset) to `dev` when it fits
 * the budget (rt_devset_budget, from the device's free memory and
 * RT_DEVSET_LIMIT_ENV). FERRY_ENOSPC (with the sizes in err) when it does
 * not, FERRY_EINVAL for a bad limit, FERRY_ENOMEM, or the device's error. */
int rt_devset_create(ferry_device_t *dev, const rt_dataset *ds, rt_devset **out,
                     char *err, size_t errlen);
/* Whether the batch `hb` comes from the set this devset copies. */
bool rt_devset_serves(const rt_devset *s, const rt_batch_host *hb);
/* Gathers `hb` (from an index_only loader over the devset's set) into the
 * device buffers x (n x features) and labels or targets; the epoch's
 * permutation is uploaded when hb starts a new one. Issued on the device;
 * 0 or the device's error. */
int rt_devset_batch(rt_devset *s, const rt_batch_host *hb, float *x, int32_t *labels,
                    float *targets);
/* Frees the device memory. NULL: no-op. */
void rt_devset_destroy(rt_devset *s);

/* ---- staging: a set too large to hold on the device ------------------------- */

/* Batches of a set that stays on the host, moved to the device without
 * stalling the compute queue: the loader gathers them (on its prefetch
 * thread) into page-locked buffers the stager allocates, and each batch is
 * copied on the device's copy queue into one of STAGE_LANES device buffers
 * while the compute queue still runs the previous step (its backward pass
 * and optimizer step). A lane is reused only once the compute queue is done
 * with it. The bytes copied are the loader's, so training is bit for bit
 * what an upload gives. On a device without a copy queue (the cpu's
 * extension table has none) batches are uploaded into the lanes. */
typedef struct rt_stager rt_stager;

/* A stager for batches of at most `rows_max` samples of sets shaped like
 * `ds` (features, labels or `outputs` targets; borrowed for the shape
 * only). FERRY_EINVAL, FERRY_ENOMEM with err set. */
int rt_stager_create(ferry_device_t *dev, const rt_dataset *ds, int rows_max,
                     rt_stager **out, char *err, size_t errlen);
/* Sets o->host_alloc/host_free/host_arg so that a loader gathers into the
 * stager's page-locked memory. The stager must outlive that loader. */
void rt_stager_loader_opts(rt_stager *s, rt_loader_opts *o);
/* Copies `hb` (host, from a loader with rt_stager_loader_opts) to the next
 * lane and points b at it; the compute queue's later work waits for the
 * copy, and on return the copy has finished reading `hb` (the loader may
 * reuse it). b stays valid until the call after next. 0, FERRY_EINVAL for
 * a batch larger than rows_max or of another shape, or the device's
 * error. */
int rt_stager_batch(rt_stager *s, const rt_batch_host *hb, ferry_batch_t *b);
/* Whether batches are copied on a second queue (false: plain uploads). */
bool rt_stager_async(const rt_stager *s);
/* Frees the device memory and the marks. NULL: no-op. */
void rt_stager_destroy(rt_stager *s);

#endif
