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
/* GPU memory per CUDA worker of a training plan, computed before any task runs (each worker's
 * device holds what its chunks keep; docs/transformers.md, "Simulation"):
 *   activations: the registered buffers of one chunk (every node's output, its gradient and its
 *     saved buffer, the chunk's input and labels), the largest chunk's, times the chunks a GPU
 *     runs (ceil(chunks / GPUs));
 *   parameters (one copy per device), gradients (the chunks' partials of every gradient, one
 *     per chunk a GPU runs; one with --deterministic off's REDUX) and the optimiser's state (all
 *     of it: a device may run every update, whose state then stays there);
 *   the worker's CUDA workspace (DNN_CUDA_WORKSPACE_MB, counted by StarPU on the device);
 *   --precision bf16: each CUDA worker's scratch block of conv2d.cu's bf16 copies (x, w, dy and
 *     the pass's output, for the largest chunk: dnn_plan_cuda_scratch_bytes), also StarPU's.
 * Capacity: the smallest device's StarPU memory size (starpu_memory_get_total: the device's, or
 * STARPU_LIMIT_CUDA_MEM; in simulation the platform's). Writes one line into info (what each
 * part takes, when there are CUDA workers; "" otherwise). Returns 0 when it fits (or there is no
 * CUDA worker), else -1 with one line in err naming the largest --batch that fits at the same
 * --chunks (the global batch: per rank x ranks), or, when none does, at one chunk per GPU. */
int dnn_preflight_gpu_memory(dnn_model *m, const dnn_plan *p, char *info, size_t infolen, char *err, size_t errlen);
#endif
