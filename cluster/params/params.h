/* cluster/params — what a run learned, in a file other tools read: a
 * model's parameters as safetensors (Hugging Face's format: an 8-byte
 * little-endian header length, a JSON header naming each tensor's dtype,
 * shape and byte range, then the raw values), which numpy, PyTorch and
 * the safetensors library read as they are. Only float32 tensors are
 * written and read; the header's __metadata__ (strings only, as the format
 * says) carries the model's name, ferry's version, the test accuracy and
 * whatever a prediction needs to apply the same preprocessing:
 *
 *   format         "ferry"
 *   ferry_version  the version that wrote it
 *   model          the task's name
 *   epochs, test_loss, test_accuracy (a classifier's), data (what the run
 *                  read, its first progress line)
 *   normalize      how the samples were normalised: "standard" or
 *                  "minmax" (from the training set), "none", or a named
 *                  set's published constants ("fashion-mnist")
 *   norm_shift, norm_scale
 *                  JSON lists of numbers: x = (raw - shift) * scale, one
 *                  pair per feature, or per channel for images (raw: the
 *                  numbers as the file holds them, Fashion-MNIST's pixels
 *                  0..255); [] when none
 *   class_names    a JSON list: a CSV's string labels, label i's at [i]
 *                  ([] when the labels were numbers)
 *   input          a JSON list [channels, height, width]: the sample shape
 *                  the model took
 *   outputs        the model's outputs (classes or regression outputs)
 *
 * A file without "normalize" was saved by an earlier ferry. */
#ifndef FERRY_CLUSTER_PARAMS_H
#define FERRY_CLUSTER_PARAMS_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/train/tensors.h"

/* Named float32 tensors one after another: a model's parameters outside
 * the workers, the same shape as the runtime's (runtime/train/tensors.h). */
typedef rt_tensors cluster_tensors;

/* One entry of the header's __metadata__. */
typedef struct params_meta {
    const char *key, *value;
} params_meta;

/* The most a header may take: a file that claims more is refused before
 * anything is allocated for it. */
#define PARAMS_MAX_HEADER (64u << 20)

/* Writes `t` and `meta` (n_meta entries) to `path`, replacing it whole (a
 * reader never sees half a file). Returns 0, or FERRY_E* with `err` saying
 * why. */
int params_save(const char *path, const cluster_tensors *t, const params_meta *meta,
                size_t n_meta, char *err, size_t errlen);

/* A file read back: its tensors in the header's order and its metadata. */
typedef struct params_file {
    cluster_tensors t;
    size_t n_meta;
    params_meta *meta;
    void *own; /* private */
} params_file;

/* Reads `path`. A file that is not safetensors, a tensor that is not
 * float32 or has more than 4 dimensions, byte ranges that do not match
 * the shapes or lie beyond the file: FERRY_ECORRUPT (or FERRY_EINVAL for a
 * dtype or rank ferry does not take), with `err` naming the file and what
 * is wrong. Returns 0, FERRY_ENOENT, FERRY_ECORRUPT, FERRY_EINVAL or
 * FERRY_ENOMEM. */
int params_load(const char *path, params_file *out, char *err, size_t errlen);

/* The value of metadata `key`, or NULL. */
const char *params_meta_get(const params_file *f, const char *key);

void params_file_free(params_file *f);

/* ---- how a run saw its data (data_meta.c) ---------------------------------- */

struct proto_train_begin_reply;
struct proto_predict_req;

/* The entries from "normalize" to "outputs" above. */
#define PARAMS_DATA_META 6

/* Fills meta[0..PARAMS_DATA_META) from rank 0's begin reply `b`, their
 * values in text[PARAMS_DATA_META] (params_data_meta_free). Returns the
 * entries filled (0 when `b` says nothing of the data) or FERRY_ENOMEM. */
int params_data_meta(const struct proto_train_begin_reply *b, params_meta *meta,
                     char **text);
void params_data_meta_free(char **text);

/* Fills the saved-data fields of `q` (PROTO_SAVED_DATA_FIELDS, and data)
 * from file `f` (read from `path`): strings borrowed from `f`, arrays in
 * *owned (free() it). A file without them leaves q->normalize NULL.
 * Returns 0, FERRY_ECORRUPT (a value that is not what the key holds) or
 * FERRY_ENOMEM, with err naming the file and the key. */
int params_data_read(const params_file *f, const char *path, struct proto_predict_req *q,
                     void **owned, char *err, size_t errlen);

#endif
