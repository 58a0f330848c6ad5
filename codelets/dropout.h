/* dropout.h — inverted dropout with a mask that is a pure function of (seed, step, sample, element).
 *
 *   train: y = x * keep / (1 - p),  keep = u(seed, step, sample, e) >= p,  u uniform in [0, 1)
 *   eval:  y = x
 *   backward: dx (=|+=) dy * keep / (1 - p), the mask drawn again (nothing is stored).
 *
 * `sample` is the sample's position in the global batch (chunk offset + rank shard offset), so
 * the mask does not depend on how the batch is cut into chunks, on the workers or on the ranks:
 * training with dropout stays chunk-invariant. u has 24 bits (exact in float): p is honoured to
 * 6e-8. The mask function is shared by the CPU and CUDA kernels (DNN_RNG_HD). */
#ifndef DNN_DROPOUT_H
#define DNN_DROPOUT_H
#include <stddef.h>
#include <stdint.h>
#include <starpu.h>

#include "dnn_codelet.h"
#include "dnn_rng.h" /* dnn_mix64: splitmix64's finaliser */

typedef struct {
	long per_sample;    // elements of one sample (C*H*W)
	int N;              // samples in the chunk
	int train;          // 0: identity (eval)
	float p;            // drop probability, [0, 1)
	int accumulate_dx;  // backward: 0 = dx = ..., 1 = dx += ...
	uint64_t seed;
	long step;
	long sample0;       // the chunk's first sample's position in the global batch
} dnn_dropout_args;

/* The key of one sample of one step; then element e is kept iff dnn_dropout_keep(key, e, p). */
static inline DNN_RNG_HD uint64_t dnn_dropout_key(uint64_t seed, long step, long sample)
{
	uint64_t k = dnn_mix64(seed + DNN_RNG_GOLDEN);
	k = dnn_mix64(k ^ (uint64_t)step);
	return dnn_mix64(k ^ (uint64_t)sample);
}

static inline DNN_RNG_HD int dnn_dropout_keep(uint64_t key, long e, float p)
{
	uint64_t h = dnn_mix64(key + DNN_RNG_GOLDEN * (uint64_t)(e + 1));
	return (float)(h >> 40) * (1.0f / 16777216.0f) >= p;
}

void dnn_dropout_forward_cpu(float *y, const float *x, const dnn_dropout_args *a);
void dnn_dropout_backward_cpu(float *dx, const float *dy, const dnn_dropout_args *a);

/* fwd (R x, W y); bwd (R dy, W|RW dx per a->accumulate_dx) */
extern struct starpu_codelet cl_dropout_fwd, cl_dropout_bwd;
int dnn_insert_dropout_fwd(const dnn_task_opts *o, const dnn_dropout_args *a, starpu_data_handle_t x,
			   starpu_data_handle_t y);
int dnn_insert_dropout_bwd(const dnn_task_opts *o, const dnn_dropout_args *a, starpu_data_handle_t dy,
			   starpu_data_handle_t dx);

#ifdef DNN_HAVE_CUDA
#ifdef __cplusplus
extern "C" {
#endif
void dnn_dropout_fwd_cuda(void *buffers[], void *cl_arg);
void dnn_dropout_bwd_cuda(void *buffers[], void *cl_arg);
#ifdef __cplusplus
}
#endif
#endif
#endif
