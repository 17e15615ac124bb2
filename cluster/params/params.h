/* cluster/params — what a run learned, in a file other tools read: a
 * model's parameters as safetensors (Hugging Face's format: an 8-byte
 * little-endian header length, a JSON header naming each tensor's dtype,
 * shape and byte range, then the raw values), which numpy, PyTorch and
 * the safetensors library read as they are. Only float32 tensors are
 * written and read; the header's __metadata__ (strings only, as the format
 * says) carries the model's name, ferry's version, the test accuracy and
 * whatever a prediction needs to apply the same preprocessing. */
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

#endif
