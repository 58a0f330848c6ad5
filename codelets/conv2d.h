/* conv2d.h — 2-D convolution (groups=1), NCHW, float32, with an optional per-channel bias
 * (a->bias = 1: the forward then adds b (K) to y, as bias.h's forward, and the backward-filter
 * accumulates db += sum of dy over N, P, Q, as bias.h's backward, in the same task;
 * graph/ops/conv.c uses it for a conv with bias=1 when graph/fuse.c fuses them (DNN_FUSE=2);
 * otherwise such a conv is conv2d + bias_fwd / bias_bwd tasks).
 *
 * Shapes: x (N,C,H,W), w (K,C,R,S), y (N,K,P,Q) with
 *   P = (H + 2*pad - dilation*(R-1) - 1)/stride + 1, Q likewise with W and S.
 * Gradients follow llm.c: dw += (accumulate, the handle is STARPU_REDUX);
 * dx is overwritten when accumulate_dx == 0 and added to when accumulate_dx == 1.
 */
#ifndef DNN_CONV2D_H
#define DNN_CONV2D_H
#include <starpu.h>
#include <stdint.h>

#include "dnn_codelet.h"

typedef struct {
	int N, C, H, W;     // input
	int K, R, S;        // output channels, kernel height, kernel width
	int stride, pad, dilation;
	int P, Q;           // output height, width (filled by dnn_conv2d_args_finish)
	int accumulate_dx;  // backward-data: 0 = dx = ..., 1 = dx += ...
	int bias;           // fwd and bwd_filter take a 4th buffer: b (K) (R) / db (K) (+=, as dw)
	int algo;           // dnn_conv_algo below: the CPU algorithm [0: auto] (the plan's DNN_CONV_ALGO)
	int bf16;           // 1 (--precision bf16): every CPU path's products of bf16-rounded operands, fp32 sums
	                    // (gemm_bf16.h); x, w, y and the gradients stay fp32 tensors, the bias sums fp32
	int x_bf16;         // 1: x is stored in bf16 (uint16_t, the plan's bf16 activations, graph/model.h y_bf16),
	                    // rounded as dnn_bf16_convert: fwd and bwd_filter read it so (CPU only; needs bf16)
	int y_bf16;         // 1: the forward writes y in bf16 (uint16_t, the plan's y_bf16 of the conv), each element
	                    // the fp32 value the same path writes without it (the sum, plus the bias) rounded as
	                    // dnn_bf16_convert, in the path's own epilogue (CPU only; needs bf16)
} dnn_conv2d_args;

/* Computes P and Q; returns 0, or -1 when the shapes give an empty output or when x or y holds
 * more than INT_MAX elements (cuDNN's tensor descriptors take int sizes; graph/ops/conv.c
 * rejects such a chunk at plan time with a message). */
int dnn_conv2d_args_finish(dnn_conv2d_args *a);
/* --precision bf16 on a CUDA worker (conv2d.cu): a task's bf16 copies of its two inputs (n0, n1 elements) and of
 * its output (n2) in the worker's scratch (dnn_cuda_scratch), the inputs each 256-byte aligned: the second input
 * at *off1 bytes, the output at *off2; returns the bytes asked. */
static inline size_t dnn_conv2d_bf16_copies(size_t n0, size_t n1, size_t n2, size_t *off1, size_t *off2)
{
	*off1 = (n0 * sizeof(uint16_t) + 255) & ~(size_t)255;
	*off2 = *off1 + ((n1 * sizeof(uint16_t) + 255) & ~(size_t)255);
	return *off2 + n2 * sizeof(uint16_t);
}
/* The bytes conv2d.cu's pass asks of the scratch for a's chunk: phase 0 forward (x, w -> y), 1 backward data
 * (dy, w -> dx), 2 backward filter (x, dy -> dw); 0 without a->bf16 (fp32 asks for none). */
static inline size_t dnn_conv2d_bf16_scratch_bytes(const dnn_conv2d_args *a, int phase)
{
	const size_t nx = (size_t)a->N * a->C * a->H * a->W, nw = (size_t)a->K * a->C * a->R * a->S;
	const size_t ny = (size_t)a->N * a->K * a->P * a->Q;
	size_t o1, o2;
	if (!a->bf16)
		return 0;
	return phase == 0 ? dnn_conv2d_bf16_copies(nx, nw, ny, &o1, &o2)
	       : phase == 1 ? dnn_conv2d_bf16_copies(ny, nw, nx, &o1, &o2)
			    : dnn_conv2d_bf16_copies(nx, ny, nw, &o1, &o2);
}
double dnn_conv2d_flops_fwd(const dnn_conv2d_args *a); // 2*N*K*P*Q*C*R*S

/* CPU kernels (im2col + OpenBLAS sgemm, direct loops or Winograd F(2x2, 3x3) / F(4x4, 3x3); single-threaded,
 * the caller is one worker). x: fp32, or bf16 (uint16_t) values behind the pointer when a->x_bf16 (forward and
 * backward filter); y: fp32, or bf16 (uint16_t) values when a->y_bf16 (forward; the bias is then always added by
 * the kernel, before the rounding: dnn_conv2d_forward_bias_cpu returns 1). */
void dnn_conv2d_forward_cpu(float *y, const float *x, const float *w, const dnn_conv2d_args *a);
/* y = conv(x, w), and + bias (per output channel; NULL: none) in the same pass where the conv
 * takes the direct path (added in its store, the same floats as conv then bias.c's pass): returns
 * 1 when the bias was added (or nothing more can be done: the scratch failed, an error recorded),
 * 0 when the caller still has to add it. */
int dnn_conv2d_forward_bias_cpu(float *y, const float *x, const float *w, const float *bias, const dnn_conv2d_args *a);
void dnn_conv2d_backward_data_cpu(float *dx, const float *dy, const float *w, const dnn_conv2d_args *a);
void dnn_conv2d_backward_filter_cpu(float *dw, const float *x, const float *dy, const dnn_conv2d_args *a);

/* The CPU algorithm of 3x3, stride-1, undilated convs (forward, backward data through the
 * flipped forward conv, and backward filter), dnn_conv2d_args.algo: AUTO picks Winograd F(2x2, 3x3) where it
 * measured faster than im2col, IM2COL and WINOGRAD force one, WINOGRAD4 forces F(4x4, 3x3) for the forward and
 * backward data (the weight gradient stays F(2x2, 3x3)) (Winograd needs an AVX2+FMA CPU; without one, im2col
 * runs). Default AUTO (0); the plan sets the environment's DNN_CONV_ALGO=im2col|winograd|winograd4|auto
 * (graph/exec_config.h) in the args of every conv task. */
/* ONEDNN forces oneDNN's bf16 convolution primitives (codelets/conv2d_onednn.c) for every pass under --precision bf16
 * (auto takes them where conv2d_algo.c's ONEDNN_CONV_RULE says); in fp32, or where oneDNN is off or absent, it is
 * auto. */
typedef enum {
	DNN_CONV_ALGO_AUTO,
	DNN_CONV_ALGO_IM2COL,
	DNN_CONV_ALGO_WINOGRAD,
	DNN_CONV_ALGO_WINOGRAD4,
	DNN_CONV_ALGO_ONEDNN
} dnn_conv_algo;
/* 1 when the CPU kernel runs this conv's pass (0 forward, 1 backward data, 2 backward filter)
 * as Winograd under a->algo. */
int dnn_conv2d_cpu_uses_winograd(const dnn_conv2d_args *a, int pass);
/* The same as the output tile size m of F(m x m, 3x3): 2 or 4, or 0 when not Winograd. */
int dnn_conv2d_cpu_winograd_tile(const dnn_conv2d_args *a, int pass);

/* 1 when the CPU kernel runs this pass (0 forward, 1 backward data, 2 backward filter) through oneDNN's bf16
 * convolution primitive (ONEDNN, or auto by its rule, under a->bf16 where oneDNN runs). */
int dnn_conv2d_cpu_uses_onednn(const dnn_conv2d_args *a, int pass);
/* Frees the calling thread's oneDNN conv primitives (each CPU worker at shutdown); the next call makes them anew. */
void dnn_conv2d_onednn_release(void);

/* Codelets: fwd (R x, R w, W y[, R b]); bwd_data (R dy, R w, W|RW dx);
 * bwd_filter (R x, R dy, REDUX dw[, REDUX db]); the [bracketed] buffer when a->bias. */
extern struct starpu_codelet cl_conv2d_fwd, cl_conv2d_bwd_data, cl_conv2d_bwd_filter;

/* Insert helpers; the args struct is copied into the task. dw_mode is STARPU_REDUX (training)
 * or STARPU_RW (tests). dx's mode follows a->accumulate_dx. */
int dnn_insert_conv2d_fwd(const dnn_task_opts *o, const dnn_conv2d_args *a, starpu_data_handle_t x, starpu_data_handle_t w,
			   starpu_data_handle_t y);
int dnn_insert_conv2d_bwd_data(const dnn_task_opts *o, const dnn_conv2d_args *a, starpu_data_handle_t dy,
				starpu_data_handle_t w, starpu_data_handle_t dx);
int dnn_insert_conv2d_bwd_filter(const dnn_task_opts *o, const dnn_conv2d_args *a, starpu_data_handle_t x,
				  starpu_data_handle_t dy, starpu_data_handle_t dw, int dw_mode);
/* The same with the bias (a->bias must be 1): b (K) / db (K), db in dw_mode too. */
int dnn_insert_conv2d_bias_fwd(const dnn_task_opts *o, const dnn_conv2d_args *a, starpu_data_handle_t x, starpu_data_handle_t w,
				starpu_data_handle_t b, starpu_data_handle_t y);
int dnn_insert_conv2d_bias_bwd_filter(const dnn_task_opts *o, const dnn_conv2d_args *a, starpu_data_handle_t x,
				       starpu_data_handle_t dy, starpu_data_handle_t dw, starpu_data_handle_t db,
				       int dw_mode);
#endif
