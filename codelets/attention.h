/* attention.h — causal multi-head self-attention (GPT-2's), without its projections:
 *
 *   qkv (N,T,3C): per token [q (C) | k (C) | v (C)] (nanoGPT's c_attn output); head h (of H) uses
 *   channels [h*D, (h+1)*D) of each block, D = C/H.
 *   y (N,T,C): y[t][h*D + d] = sum_{s<=t} P[t][s] v[s][h*D + d],
 *              P[t][.] = softmax_{s<=t}(q[t].k[s] / sqrt(D))     (heads concatenated in order)
 *   lse (N,H,T): log sum_{s<=t} exp(q[t].k[s] / sqrt(D)), saved by the training forward.
 *   backward (FlashAttention's): Dt = dy[t].y[t] (per head), P recomputed from q, k and lse,
 *     dv[s] = sum_t P[t][s] dy[t]; dP[t][s] = dy[t].v[s]; dS = P (dP - Dt) / sqrt(D);
 *     dq[t] = sum_s dS[t][s] k[s]; dk[s] = sum_t dS[t][s] q[t]; all into dqkv (=|+=).
 *
 * CPU: tiles of DNN_ATT_BQ queries x DNN_ATT_BK keys (OpenBLAS SGEMMs on the tiles, or in bf16 our
 * vdpbf16ps kernel, dnn_gemm_bf16_pairs; AVX2 exp and row loops where the CPU has them) with an
 * online softmax, so no T x T matrix is ever held: a
 * task's scratch is dnn_attention_scratch_floats(T, D), the tiles plus one head's packed q, k, v
 * (and dy, dk, dv) blocks, linear in T. The loops run in a fixed order (no atomics), so results
 * do not depend on threads or runs.
 * CUDA: cuBLAS strided-batched SGEMMs over the heads of a sample (scores, then probabilities times
 * v; the backward likewise), with the T x T matrices of as many heads as fit in the worker's
 * workspace (DNN_CUDA_WORKSPACE_MB) at a time. */
#ifndef DNN_ATTENTION_H
#define DNN_ATTENTION_H
#include <starpu.h>
#include <stddef.h>

#include "dnn_codelet.h"

#define DNN_ATT_BQ 64 /* queries per tile */
#define DNN_ATT_BK 64 /* keys per tile */

typedef struct {
	int N;             // samples
	int T;             // tokens per sample
	int C;             // output channels (the input has 3C)
	int H;             // heads; D = C / H
	int save_lse;      // forward: 1 = write lse (a third buffer; training), 0 = not (eval)
	int accumulate_dx; // backward: 0 = dqkv = ..., 1 = dqkv += ...
	int bf16;          // 1: the tiles' GEMMs in bf16 with fp32 sums (gemm_bf16.h); softmax and sums fp32
	int y_bf16;        // 1 (bf16 only): y stored in bf16 (uint16_t; the CUDA functions refuse it): the
			   // forward rounds it (dnn_bf16_convert), the backward's D_t reads it widened
	int x_bf16;        // 1 (bf16 only): qkv stored in bf16 (uint16_t), packed per head with no rounding
			   // (the values the fp32 qkv's per-head rounding gave); dqkv stays fp32
} dnn_attention_args;

/* Floats of the scratch the CPU kernels need (forward or backward) for T tokens and head size D:
 * 6 T D in fp32, at most 7.5 (T + 1) (D + 1) + 48 (D + 1) in bf16 (dnn_gemm_bf16_pairs' operands),
 * + O(tile^2), never T x T. */
size_t dnn_attention_scratch_floats(int T, int D);
/* FLOPs of the forward (2 per multiply-add, the causal half of the two products; the softmax
 * not counted): 2 N T^2 C; the backward's five products: 5 N T^2 C (dnn_attention_flops_bwd). */
double dnn_attention_flops_fwd(const dnn_attention_args *a);
double dnn_attention_flops_bwd(const dnn_attention_args *a);

/* y (N,T,C) (float, or uint16_t bf16 with a->y_bf16), lse (N,H,T) or NULL, qkv (N,T,3C) (float, or
 * bf16 with a->x_bf16); scratch:
 * dnn_attention_scratch_floats(T, C/H) floats. */
int dnn_attention_forward_cpu(void *y, float *lse, const void *qkv, const dnn_attention_args *a, float *scratch);
/* Both return 0, or -1 when a bf16 GEMM cannot run (gemm_bf16.h; y_bf16 without bf16).
 * dqkv (N,T,3C) =|+= (a->accumulate_dx), qkv (N,T,3C), y (N,T,C) (as the forward's), dy (N,T,C),
 * lse (N,H,T). */
int dnn_attention_backward_cpu(float *dqkv, const void *qkv, const void *y, const float *dy, const float *lse,
			       const dnn_attention_args *a, float *scratch);
/* Whether the CPU kernels use their AVX2 loops (1) or the portable ones (0): on = 1 takes AVX2
 * when the CPU has AVX2 and FMA. Returns the choice. The default is on. For tests. */
int dnn_attention_set_simd(int on);

/* fwd (R qkv, W y[, W lse with a->save_lse]); bwd (R qkv, R y, R dy, R lse, W|RW dqkv) */
extern struct starpu_codelet cl_attention_fwd, cl_attention_bwd;
int dnn_insert_attention_fwd(const dnn_task_opts *o, const dnn_attention_args *a, starpu_data_handle_t qkv,
			     starpu_data_handle_t y, starpu_data_handle_t lse);
int dnn_insert_attention_bwd(const dnn_task_opts *o, const dnn_attention_args *a, starpu_data_handle_t qkv,
			     starpu_data_handle_t y, starpu_data_handle_t dy, starpu_data_handle_t lse,
			     starpu_data_handle_t dqkv);

#ifdef DNN_HAVE_CUDA
#ifdef __cplusplus
extern "C" {
#endif
void dnn_attention_fwd_cuda(void *buffers[], void *cl_arg);
void dnn_attention_bwd_cuda(void *buffers[], void *cl_arg);
#ifdef __cplusplus
}
#endif
#endif
#endif
