/* schedule.h — what a training step uses besides the parameters: its samples (the epoch's
 * seeded permutation) and its learning rate (the schedule). Pure functions of their arguments,
 * so a resumed run repeats an uninterrupted one exactly. */
#ifndef DNN_SCHEDULE_H
#define DNN_SCHEDULE_H
#include <stdint.h>

/* Learning rate at `step` (0-based) of a run of `total` steps: `lr` when cosine is 0 (or total
 * <= 0), else the cosine decay 0.5 * lr * (1 + cos(pi * step / total)): lr at step 0, lr/2 at
 * total/2, 0 at total. */
float dnn_scheduled_lr(float lr, int cosine, long step, long total);

/* With a linear warm-up over the first `warmup` steps: peak * (step + 1) / warmup for step <
 * warmup (peak at step warmup - 1), then dnn_scheduled_lr over the remaining total - warmup steps
 * (cosine: peak at step warmup, decaying to 0 at total). warmup <= 0 is dnn_scheduled_lr. */
float dnn_warm_lr(float peak, int cosine, long step, long total, long warmup);

/* The linear scaling rule (Goyal et al. 2017): lr given for a global batch of ref_batch, used at
 * global_batch: lr * global_batch / ref_batch (ref_batch <= 0: lr). */
float dnn_scaled_lr(float lr, int global_batch, int ref_batch);

/* perm[0..n) := the sample order of `epoch` (0-based). It depends only on (seed, epoch): not on
 * chunks, workers, ranks or scheduler. */
void dnn_epoch_permutation(int *perm, int n, uint64_t seed, int epoch);
#endif
