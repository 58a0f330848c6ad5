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

/* perm[0..n) := the sample order of `epoch` (0-based). It depends only on (seed, epoch): not on
 * chunks, workers, ranks or scheduler. */
void dnn_epoch_permutation(int *perm, int n, uint64_t seed, int epoch);
#endif
