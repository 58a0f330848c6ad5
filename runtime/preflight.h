/* preflight.h — will a run's buffers fit in the memory StarPU may use? Checked before any task
 * runs, so that a too small STARPU_LIMIT_CPU_MEM (or a too large --batch) ends in one clear
 * message instead of a hang.
 *
 * Why a check of our own: StarPU allocates the buffers of home-less handles (activations, input
 * chunks: dnn_plan's lazy vectors) when a task first needs them. On a memory node without room
 * it waits for other buffers to be evicted; ours have no other copy and cannot be, so the task
 * waits forever ("Not enough memory left on node NUMA 0 ... StarPU will cope by trying to purge").
 * Every buffer of a plan stays allocated once its first step ran, so all of them must fit.
 */
#ifndef DNN_PREFLIGHT_H
#define DNN_PREFLIGHT_H
#include <stddef.h>

#include "model.h"

/* Bytes of the buffers StarPU allocates for p (its home-less handles), as registered. */
double dnn_plan_starpu_bytes(const dnn_plan *p);

/* Checks that the training plan (NULL for eval only), one per-CPU-worker copy of every gradient
 * (training: STARPU_REDUX), and the evaluation plan that dnn_evaluate will create
 * (eval_batch > 0; made and dropped here to measure it) fit in what StarPU may allocate in main
 * memory (STARPU_LIMIT_CPU_MEM, else 90% of the machine's). Returns 0, or -1 with one line in
 * err. Skipped (0) when CUDA workers exist: activations may then live in GPU memory only. */
int dnn_preflight_memory(dnn_model *m, const dnn_plan *train_plan, int eval_batch, int eval_chunks, char *err,
			 size_t errlen);
#endif
