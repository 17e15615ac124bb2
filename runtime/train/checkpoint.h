/* Checkpoints of a trainer (checkpoint.c): written by rank 0 from what it
 * holds, every N steps, every N seconds or at each epoch's end, and read
 * back by every rank of a run that continues from one. */
#ifndef FERRY_RUNTIME_TRAIN_CHECKPOINT_H
#define FERRY_RUNTIME_TRAIN_CHECKPOINT_H

#include "ckpt_file.h"
#include "runtime/ps/ps.h"
#include "trainer_int.h"

/* Once the trainer has its parameters and optimizer: continues from
 * t->o.resume when given (the parameters, the model's buffers, the
 * optimizer, the step, the epoch and the generator), and on rank 0 gets
 * ready to write into t->o.ckpt_dir. Returns 0 or FERRY_E* with `err`. */
int rt_ckpt_setup(rt_trainer *t, char *err, size_t errlen);

/* Steps of the epoch starting now that a continued run already took (0
 * but for the first epoch after a checkpoint written mid-epoch). Clears
 * them. */
uint64_t rt_ckpt_take_skip(rt_trainer *t);

/* After each step of epoch `r` and after each epoch (the evaluation
 * done): writes a checkpoint when one is due. A write that fails fails
 * the run: a checkpoint asked for and not written is not silent. */
int rt_ckpt_after_step(rt_trainer *t, const rt_epoch_run *r);
int rt_ckpt_after_epoch(rt_trainer *t, char *err, size_t errlen);

/* The newest checkpoint written since the last call into buf ("" when
 * none), for the epoch's reply. */
void rt_ckpt_take_written(rt_trainer *t, char *buf, size_t len);

void rt_ckpt_free(rt_trainer *t);

/* The header's fields every checkpoint has, as `t` stands now. */
void rt_ckpt_fill_head(const rt_trainer *t, const char *model, rt_ckpt_head *h,
                       uint64_t epoch_step);

/* The model's generator as header `h` recorded it. */
void rt_ckpt_restore_rng(rt_trainer *t, const rt_ckpt_head *h);

/* ---- async mode (ckpt_async.c): each rank writes the shards it holds ---------- */

typedef struct rt_ckpt_async rt_ckpt_async;

/* From t->o's checkpoint options (while they are set: during the mode's
 * begin): *out NULL when the run writes none. Returns 0 or FERRY_E* with
 * `err` (an interval in seconds: the ranks could not agree on the set). */
int rt_ckpt_async_setup(rt_trainer *t, rt_ckpt_async **out, char *err, size_t errlen);
/* Global steps between checkpoints (0: at each epoch's end). */
uint64_t rt_ckpt_async_every(const rt_ckpt_async *c);
/* Writes this rank's shards of the set `steps` (global batches the shards
 * had taken, the same number on every rank), with this rank's data
 * position and generator, then prunes its older sets but the newest
 * --keep. Returns 0 or FERRY_E* with `err`. */
int rt_ckpt_async_write(rt_ckpt_async *c, rt_trainer *t, uint64_t steps, int data_epoch,
                        uint64_t data_step, char *err, size_t errlen);
void rt_ckpt_async_free(rt_ckpt_async *c);

/* What a rank continues from: its shards' states, and its own data
 * position and generator when a file of the set was its own. */
typedef struct rt_ckpt_async_start {
    rt_ps_shard_state *shards;
    int n;
    bool have_pos;
    int data_epoch;
    uint64_t data_step;
} rt_ckpt_async_start;

/* Reads the set t->o.resume belongs to (the file of any of its shards):
 * the shards this rank holds, checked against this model, and sets the
 * trainer's epoch, steps and generator. Returns 0 or FERRY_E* with `err`
 * naming the file and why. */
int rt_ckpt_async_load(rt_trainer *t, rt_ckpt_async_start *out, char *err, size_t errlen);
void rt_ckpt_async_start_free(rt_ckpt_async_start *s);

#endif
