/* embed.h — token + position embedding (GPT-2's wte and wpe):
 *
 *   y[s,t] = wte[id[s,t]] + wpe[t]          ids (N,T) floats holding exact integers in [0, V),
 *                                             wte (V,C), wpe (T,C), y (N,T,C) token-major
 *   backward: dwte[id[s,t]] += dy[s,t]; dwpe[t] += dy[s,t]; no gradient for the ids
 *
 * The backward is a scatter-add: several tokens of a chunk may share an id. Its sums run in a
 * fixed order on every device, so a run is the same bits whatever the scheduler: each row of
 * dwte and dwpe is added to in token order (row r = s*T + t increasing), one add at a time, on
 * the CPU and on CUDA alike (no atomics), so the two give the same bits.
 *
 * An id that is not an integer in [0, V) (also NaN) makes the forward record a worker error
 * (dnn_worker_error: "embed: token id X of row R is not an integer in [0, V)") and write NaN
 * into that row; the backward skips such rows. Nothing reads out of bounds on any input. */
#ifndef DNN_EMBED_H
#define DNN_EMBED_H
#include <starpu.h>
#include <stddef.h>

#include "dnn_codelet.h"
#include "formulas.h"

typedef struct {
	int N, T; // samples in the chunk, tokens per sample: N*T rows
	int V, C; // vocabulary, channels
} dnn_embed_args;

/* 1 when id is an integer in [0, V) (NaN and infinities are not). */
DNN_FORMULA int dnn_embed_id_ok(float id, int V)
{
	return id >= 0.0f && id < (float)V && id == floorf(id);
}

/* Forward; returns the first bad row's index (its y row is NaN, the other rows computed), or -1. */
long dnn_embed_forward_cpu(float *y, const float *ids, const float *wte, const float *wpe, const dnn_embed_args *a);
/* dwte (V,C) +=, dwpe (T,C) +=, in token order; rows with bad ids are skipped. */
void dnn_embed_backward_cpu(float *dwte, float *dwpe, const float *ids, const float *dy, const dnn_embed_args *a);

/* fwd (R ids, R wte, R wpe, W y); bwd (R ids, R dy, RW|REDUX dwte, RW|REDUX dwpe per grad_mode) */
extern struct starpu_codelet cl_embed_fwd, cl_embed_bwd;
int dnn_insert_embed_fwd(const dnn_task_opts *o, const dnn_embed_args *a, starpu_data_handle_t ids,
			 starpu_data_handle_t wte, starpu_data_handle_t wpe, starpu_data_handle_t y);
int dnn_insert_embed_bwd(const dnn_task_opts *o, const dnn_embed_args *a, starpu_data_handle_t ids,
			 starpu_data_handle_t dy, starpu_data_handle_t dwte, starpu_data_handle_t dwpe, int grad_mode);

#ifdef DNN_HAVE_CUDA
#ifdef __cplusplus
extern "C" {
#endif
void dnn_embed_fwd_cuda(void *buffers[], void *cl_arg);
void dnn_embed_bwd_cuda(void *buffers[], void *cl_arg);
#ifdef __cplusplus
}
#endif
#endif
#endif
