/* A model's parameters and buffers as named tensors, the shape they take
 * outside a worker: read back at the end of a run (--save) and laid into
 * the flat buffers at its start (--init-from). The flat buffers are the
 * trainer's: the model's tensors in its order, each on a 16-float boundary
 * (ferry_model_layout()); outside, they lie one after another. */
#ifndef FERRY_RUNTIME_TRAIN_TENSORS_H
#define FERRY_RUNTIME_TRAIN_TENSORS_H

#include <stddef.h>
#include <stdint.h>

#include <ferry/model.h>

#include "proto/train_spec.h"

/* Named tensors one after another: proto's (the form they travel in). */
typedef proto_tensors rt_tensors;

/* The model's state as one flat buffer: its parameters as the trainer
 * lays them out (ferry_model_layout), then its buffers likewise
 * (ferry_model_buffers_layout; none for most models). Its length. */
size_t rt_tensors_state_len(const ferry_model_t *m);

/* Lays `in` into a new flat state for model `m` (*flat, malloc'd,
 * rt_tensors_state_len(m) floats, padding zero). Every tensor of the
 * model, parameter or buffer, must be there by name with its shape, and
 * nothing else: FERRY_EINVAL otherwise, with `err` naming the tensor and
 * both shapes. Returns 0, FERRY_EINVAL or FERRY_ENOMEM. */
int rt_tensors_to_flat(const ferry_model_t *m, const rt_tensors *in, float **flat,
                       char *err, size_t errlen);

/* The model's tensors, parameters then buffers, read out of the flat state
 * `flat` into *out, whose arrays are malloc'd and freed by
 * rt_tensors_free() (names point at the model's). Returns 0 or
 * FERRY_ENOMEM. */
int rt_tensors_from_flat(const ferry_model_t *m, const float *flat, rt_tensors *out);

struct rt_trainer;
/* What a run saves (--save): the parameters `params` (host, as
 * rt_trainer_params reads them) and this rank's buffers, as named tensors
 * into *out (rt_tensors_free). 0, FERRY_ENOMEM or the device's FERRY_E*. */
int rt_trainer_tensors(struct rt_trainer *t, const float *params, rt_tensors *out);
void rt_tensors_free(rt_tensors *t);

/* "784x128" for a tensor's 4 dimensions ("scalar" when it has none). */
void rt_tensors_shape_str(const uint32_t shape[4], char *buf, size_t len);

#endif
