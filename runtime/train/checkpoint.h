/* Checkpoints of a trainer (checkpoint.c): written by rank 0 from what it
 * holds, every N steps, every N seconds or at each epoch's end, and read
 * back by every rank of a run that continues from one. */
#ifndef FERRY_RUNTIME_TRAIN_CHECKPOINT_H
#define FERRY_RUNTIME_TRAIN_CHECKPOINT_H

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

#endif
