/* A checkpoint file: everything a run needs to continue bit-for-bit, in
 * one file that is written whole or not at all. Read by the workers that
 * continue from it and by `ferry checkpoint show` and `ferry submit
 * --resume` on the submitting side, which is why its format lives apart
 * from the trainer that writes it (checkpoint.c).
 *
 *   FERRY-CHECKPOINT 1\n           the magic and the format's version
 *   KEY VALUE\n ...                the header (RT_CKPT_FIELDS), text
 *   end\n
 *   state                          the parameters then the model's buffers,
 *                                  as safetensors (what --save writes):
 *                                  state_bytes bytes
 *   optimizer                      its moments as float32, each plen values
 *                                  in the trainer's layout: optim_bytes bytes
 *   sha256 HEX\n                   SHA-256 of every byte before this line
 *
 * An async run's checkpoint is a set of files, one a shard, each written
 * by the rank that holds the shard: version 2, the header's keys followed
 * by RT_CKPT_ASYNC_FIELDS, the state section the shard's values (float32,
 * shard_hi - shard_lo of them, no safetensors header), the optimizer
 * section its moments for that slice, and the header's generator and data
 * position those of the writing rank.
 *
 * A file that is short, long, altered anywhere or of another format is
 * refused before any of its values is used. */
#ifndef FERRY_RUNTIME_TRAIN_CKPT_FILE_H
#define FERRY_RUNTIME_TRAIN_CKPT_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RT_CKPT_MAGIC  "FERRY-CHECKPOINT 1\n"
/* An async run's shard: version 2, RT_CKPT_ASYNC_FIELDS after the others. */
#define RT_CKPT_MAGIC2 "FERRY-CHECKPOINT 2\n"
#define RT_CKPT_PREFIX "checkpoint-"
#define RT_CKPT_SUFFIX ".ckpt"
/* The most a header may take: a file that claims more is not one. */
#define RT_CKPT_MAX_HEADER 65536

/* X(type, field, meaning): the header's keys in their order. U64 and I64
 * are numbers, F64 a double (written to round-trip), TXT one word. */
#define RT_CKPT_FIELDS(X)                                                                \
    X(TXT, model, "the task whose model it is")                                          \
    X(TXT, ferry_version, "the ferry that wrote it")                                     \
    X(I64, written, "when, in seconds since 1970 (UTC)")                                 \
    X(U64, params, "parameters that count (padding excluded)")                           \
    X(U64, state_floats, "parameters and buffers in the state")                          \
    X(U64, plen, "the trainer's flat parameters, padding included")                      \
    X(U64, epoch, "epochs finished")                                                     \
    X(U64, epoch_step, "steps of the next epoch already taken")                          \
    X(U64, steps, "optimizer steps in all")                                              \
    X(U64, seed, "--seed: the parameters' and the data order's")                         \
    X(I64, batch, "--batch, the global batch")                                           \
    X(I64, epochs, "--epochs, the run's length")                                         \
    X(I64, world, "the ranks that trained")                                              \
    X(TXT, optimizer, "sgd or adam")                                                     \
    X(F64, lr, "--lr")                                                                   \
    X(F64, momentum, "--momentum")                                                       \
    X(F64, weight_decay, "--weight-decay")                                               \
    X(I64, cosine, "1: the cosine schedule, 0: constant")                                \
    X(I64, optim_t, "the optimizer's steps (Adam's bias correction)")                    \
    X(I64, optim_m, "1: the optimizer section holds a first moment")                     \
    X(I64, optim_v, "1: it holds a second moment (or sgd's momentum)")                   \
    X(U64, rng0, "the model's generator, xoshiro256** state word 0")                     \
    X(U64, rng1, "word 1")                                                               \
    X(U64, rng2, "word 2")                                                               \
    X(U64, rng3, "word 3")                                                               \
    X(U64, rng_spare, "its waiting normal's bits")                                       \
    X(I64, rng_has_spare, "1: a normal is waiting")                                      \
    X(U64, state_bytes, "the state section's bytes")                                     \
    X(U64, optim_bytes, "the optimizer section's bytes")

/* Version 2 (an async run's shard) only. */
#define RT_CKPT_ASYNC_FIELDS(X)                                                          \
    X(I64, shard, "the shard this file holds")                                           \
    X(I64, shards, "the shards of the set (each its own file)")                          \
    X(U64, shard_lo, "its first float of the flat parameters")                           \
    X(U64, shard_hi, "one past its last")                                                \
    X(U64, shard_version, "the pushes it had applied")                                   \
    X(U64, samples, "the samples it had taken (the run's progress)")                     \
    X(I64, rank, "the rank that held it and wrote it")                                   \
    X(I64, data_epoch, "that rank's shuffle of the training data")                       \
    X(U64, data_step, "its batches of that shuffle taken")

#define RT_CKPT_CT_U64 uint64_t
#define RT_CKPT_CT_I64 int64_t
#define RT_CKPT_CT_F64 double
#define RT_CKPT_CT_TXT char *

typedef struct rt_ckpt_head {
#define RT_CKPT_MEMBER(type, field, meaning) RT_CKPT_CT_##type field;
    RT_CKPT_FIELDS(RT_CKPT_MEMBER)
    RT_CKPT_ASYNC_FIELDS(RT_CKPT_MEMBER)
#undef RT_CKPT_MEMBER
} rt_ckpt_head;

/* The file's bytes `h` (its text fields one word each, no spaces), the
 * state and the optimizer section, into *out (malloc'd, *len bytes).
 * Returns 0, FERRY_EINVAL for a text field that is not one word, or
 * FERRY_ENOMEM. */
int rt_ckpt_encode(const rt_ckpt_head *h, const void *state, const void *optim,
                   uint8_t **out, size_t *len);

/* A file read back and checked: its header (text fields pointing into
 * `buf`), its header's text as written, and its sections. */
typedef struct rt_ckpt_file {
    rt_ckpt_head h;
    const char *text; /* the header's lines, NUL-terminated */
    const uint8_t *state, *optim;
    char sha256[65];
    uint8_t *buf; /* private: the file */
    char *parsed; /* private: the header split into the fields' strings */
} rt_ckpt_file;

/* Reads and checks `path`. Returns 0, or FERRY_ECORRUPT (empty, truncated,
 * altered, not a checkpoint), FERRY_ENOENT or another FERRY_E* with `why`
 * saying what is wrong (without the file's name). */
int rt_ckpt_read(const char *path, rt_ckpt_file *f, char *why, size_t whylen);
void rt_ckpt_file_free(rt_ckpt_file *f);

/* --checkpoint-every's value: "N" steps into *steps or "Ns" seconds into
 * *secs (the other 0); NULL or "": both 0, each epoch's end. Returns 0, or
 * FERRY_EINVAL for anything else (RT_CKPT_EVERY_EXPECTED says what). */
#define RT_CKPT_EVERY_EXPECTED                                                           \
    "expected a number of steps N or of seconds Ns, from 1 to 1e9"
int rt_ckpt_parse_every(const char *s, uint64_t *steps, double *secs);

/* "checkpoint-%012llu.ckpt" for `steps`: names sort as their steps do. */
void rt_ckpt_name(uint64_t steps, char *buf, size_t len);
/* Whether `name` is a whole run's checkpoint file name (not a shard's, not
 * a leftover temporary). */
bool rt_ckpt_is_name(const char *name);

/* "checkpoint-%012llu.shard-%04d-of-%04d.ckpt": shard `shard` of the set
 * written when the shards had taken `steps` global batches. */
void rt_ckpt_shard_name(uint64_t steps, int shard, int shards, char *buf, size_t len);
/* Whether `name` is a shard's checkpoint file name; its parts when so. */
bool rt_ckpt_is_shard_name(const char *name, uint64_t *steps, int *shard, int *shards);

/* The checkpoint files of directory `dir` by name, newest first (*names
 * malloc'd, each entry too; rt_ckpt_names_free). Returns the count, or
 * -errno. */
int rt_ckpt_list(const char *dir, char ***names);
/* The same, of the shards' checkpoint files (an async run's). */
int rt_ckpt_list_shards(const char *dir, char ***names);
void rt_ckpt_names_free(char **names, int n);

#endif
