/* conv2d_impl.h — what the CPU conv kernels share (private to codelets/conv2d*.c).
 *
 *   conv2d_algo.c    the public CPU kernels: which algorithm runs (DNN_CONV_ALGO, Winograd,
 *                    direct, im2col) and the scratch they get;
 *   conv2d_im2col.c  im2col + OpenBLAS sgemm (and the 1x1 convs' GEMMs without im2col);
 *   conv2d_direct.c  the direct AVX2 path for stride-1 convs with few channels;
 *   conv2d_pointwise.c the direct AVX-512 1x1 convs (stride 1 or 2) and the two loops they share with
 *                    conv2d_stride2.c, the direct AVX-512 3x3 stride-2 convs;
 *   conv2d_winograd_f2.c, conv2d_winograd_f4.c  Winograd F(2x2, 3x3) and F(4x4, 3x3);
 *   conv2d_winograd.c what they share: the chunk plan, scratch layout, forward GEMMs, ISA choice;
 *   conv2d_onednn.c  oneDNN's bf16 convolution primitives (--precision bf16);
 *   conv2d.c         the StarPU glue: shapes, codelets, perf models, insert helpers.
 */
#ifndef DNN_CONV2D_IMPL_H
#define DNN_CONV2D_IMPL_H
#include <stddef.h>

#include "conv2d.h"

/* The kernels' view of a conv: like dnn_conv2d_args but with separate row/column padding, which
 * the transposed conv of the backward-data pass needs (its padding is dilation*(R-1) - pad
 * vertically and dilation*(S-1) - pad horizontally, possibly negative, i.e. a crop). */
typedef struct {
	int N, C, H, W; // input (N, C, H, W)
	int K, R, S;    // weights (K, C, R, S)
	int P, Q;       // output (N, K, P, Q)
	int stride, dil, pad_h, pad_w;
	int algo;       // dnn_conv_algo: which CPU algorithm runs it (dnn_conv2d_args.algo)
	int bf16;       // products of bf16-rounded operands, fp32 sums (dnn_conv2d_args.bf16)
	int x_bf16;     // x holds bf16 (uint16_t) values (dnn_conv2d_args.x_bf16): im2col's padded copy widens them
	                // as it copies (build_phases); conv2d_algo.c widens x for every other path first
	int y_bf16;     // forward: y holds bf16 (uint16_t) values (dnn_conv2d_args.y_bf16), written by the path's epilogue
	const float *ybias; // with y_bf16: the bias (K) the epilogue adds before rounding (NULL: none); else unused
} conv_geom;

static inline conv_geom conv_geom_of(const dnn_conv2d_args *a)
{
	conv_geom g = {.N = a->N, .C = a->C, .H = a->H, .W = a->W, .K = a->K, .R = a->R, .S = a->S,
		       .P = a->P, .Q = a->Q, .stride = a->stride, .dil = a->dilation, .pad_h = a->pad,
		       .pad_w = a->pad, .algo = a->algo, .bf16 = a->bf16, .x_bf16 = a->x_bf16,
		       .y_bf16 = a->y_bf16};
	return g;
}

/* 1x1 without padding: the column matrix is the input image, subsampled when stride > 1. */
static inline int conv_is_pointwise(const conv_geom *g)
{
	return g->R == 1 && g->S == 1 && g->pad_h == 0 && g->pad_w == 0;
}

static inline int conv_imin(int a, int b) { return a < b ? a : b; }

/* A conv task's input x (its buffer i), fp32, or bf16 (uint16_t) values when a->x_bf16, its size checked against
 * a (conv2d.c); the kernels (dnn_conv2d_forward_cpu, ...) take it so. */
const float *dnn_conv2d_x_ptr(void *buffers[], int i, const dnn_conv2d_args *a);

/* Per-thread scratch of the calling CPU worker (dnn_cpu_scratch), at least one float; NULL,
 * with a worker error recorded (dnn_worker_error), when it cannot be allocated: the kernel then
 * returns without computing. */
float *dnn_conv_scratch(size_t nfloats);

/* im2col + GEMM (conv2d_im2col.c), for every conv. Forward: y = conv(x, w) (beta = 0) or
 * y += conv(x, w) (beta = 1) with dnn_conv_im2col_forward_work(g) floats of work (g->y_bf16: y = bf16(conv +
 * g->ybias), beta 0, each GEMM block rounded into y as it is computed); backward data:
 * dx (=|+=) the input gradient; backward filter: dw += the weight gradient (these two take
 * their own scratch). */
size_t dnn_conv_im2col_forward_work(const conv_geom *g);
void dnn_conv_im2col_forward(float *y, const float *x, const float *w, const conv_geom *g, float beta,
			     float *work);
void dnn_conv_im2col_backward_data(float *dx, const float *dy, const float *w, const conv_geom *g,
				   int accumulate_dx);
void dnn_conv_im2col_backward_filter(float *dw, const float *x, const float *dy, const conv_geom *g);

/* The direct AVX2/AVX-512 path (conv2d_direct.c), forward only: whether it takes the conv on this
 * CPU, the floats of work it needs, and y = conv(x, w) (beta 0) or y += conv(x, w) (beta 1), then
 * + bias[k] per output channel unless bias is NULL (the fused conv+bias, added in the store); g->y_bf16: y in
 * bf16, each block of output rows rounded (bias added first) as it is stored (beta 0). */
int dnn_conv_direct_applies(const conv_geom *g);
size_t dnn_conv_direct_work(const conv_geom *g);
void dnn_conv_direct_forward(float *y, const float *x, const float *w, const float *bias, const conv_geom *g,
			     float beta, float *work);
/* Whether the direct path runs its AVX-512 kernels (16-float rows with masked tails, the same
 * floats as the AVX2 ones): on = 1 (the default) where the CPU has AVX-512F, on = 0 forces AVX2
 * (tests, side-by-side measurements). Returns the choice in effect. */
int dnn_conv_direct_set_avx512(int on);
int dnn_conv_direct_avx512(void);

/* Whether this CPU runs the AVX-512 kernels of conv2d_pointwise.c and conv2d_stride2.c (AVX-512F). */
int dnn_conv_avx512_kernels(void);
/* The register-blocked loops of those kernels, the only places where they multiply:
 * gemm: out[m*ldo + t] = beta*out[..] + sum over c < nc, then i < ntaps, of
 *       w[m*wsm + c*wsc + woff[i]] * in[c*ldi + ioff[i] + t], for m < M, t < T;
 * dot:  g[m*nc*ntaps + c*ntaps + i] += sum over t < T of a[m*lda + t] * in[c*ldi + ioff[i] + t] (16 lanes
 *       over t, then one fixed reduction). */
void dnn_conv_taps_gemm(float *out, size_t ldo, const float *w, size_t wsm, size_t wsc, const int *woff,
			const float *in, size_t ldi, const long *ioff, int ntaps, int nc, int M, long T, float beta);
void dnn_conv_taps_dot(float *g, const float *a, size_t lda, const float *in, size_t ldi, const long *ioff,
		       int ntaps, int nc, int M, long T);
/* d[i] = s[2i + off] for i < n, s read below len only (zeros beyond). */
void dnn_conv_deal_row(float *restrict d, const float *restrict s, int off, int len, int n);

/* Direct 1x1 unpadded convs of stride 1 or 2 (conv2d_pointwise.c): whether they take the conv (the shape and
 * the CPU: the algorithm choice is conv2d_algo.c's), the forward's floats of work, and the three passes
 * (forward y = conv (beta 0) or y += conv (beta 1); dx =|+= by accumulate_dx; dw +=). */
int dnn_conv_pointwise_applies(const conv_geom *g);
size_t dnn_conv_pointwise_work(const conv_geom *g);
void dnn_conv_pointwise_forward(float *y, const float *x, const float *w, const conv_geom *g, float beta, float *work);
void dnn_conv_pointwise_backward_data(float *dx, const float *dy, const float *w, const conv_geom *g,
				      int accumulate_dx);
void dnn_conv_pointwise_backward_filter(float *dw, const float *x, const float *dy, const conv_geom *g);

/* Direct 3x3 convs of stride 2 and padding 1 (conv2d_stride2.c): the same five. */
int dnn_conv_stride2_applies(const conv_geom *g);
size_t dnn_conv_stride2_work(const conv_geom *g);
void dnn_conv_stride2_forward(float *y, const float *x, const float *w, const conv_geom *g, float beta, float *work);
void dnn_conv_stride2_backward_data(float *dx, const float *dy, const float *w, const conv_geom *g, int accumulate_dx);
void dnn_conv_stride2_backward_filter(float *dw, const float *x, const float *dy, const conv_geom *g);

/* oneDNN's bf16 convolution primitives (conv2d_onednn.c): whether they can run the conv here (bf16, oneDNN built in
 * and on, a CPU with AVX512_BF16), and the three passes on fp32 NCHW tensors (forward y = conv (beta 0) or y += conv
 * (beta 1); dx =|+= by accumulate_dx; dw +=), inputs rounded to bf16, fp32 sums. Each returns 0 when it ran (or
 * recorded a worker error), 1 when oneDNN does not take the conv (nothing written: the caller runs another path).
 * They take the worker's conv scratch (dnn_conv_scratch) for the blocked copies. */
int dnn_conv_onednn_applies(const conv_geom *g);
/* The forward with g->y_bf16 writes a bf16 destination (beta 0), with the primitive's bias g->ybias (NULL: none). */
int dnn_conv_onednn_forward(float *y, const float *x, const float *w, const conv_geom *g, float beta);
int dnn_conv_onednn_backward_data(float *dx, const float *dy, const float *w, const conv_geom *g, int accumulate_dx);
int dnn_conv_onednn_backward_filter(float *dw, const float *x, const float *dy, const conv_geom *g);
#endif
