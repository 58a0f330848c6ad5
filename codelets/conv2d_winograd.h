/* conv2d_winograd.h — Winograd F(2x2, 3x3) and F(4x4, 3x3) CPU kernels for 3x3, stride-1, undilated convs
 * (internal to codelets/conv2d.c, which decides when to use it). F(2x2): conv2d_winograd_f2.c,
 * F(4x4): conv2d_winograd_f4.c, what they share (plan, scratch, GEMMs, ISA): conv2d_winograd.c. */
#ifndef DNN_CONV2D_WINOGRAD_H
#define DNN_CONV2D_WINOGRAD_H
#include <stddef.h>

/* One conv as the Winograd kernel sees it: x (N, C, H, W), w (K, C, 3, 3), y (N, K, P, Q) with
 * P = H + 2 pad_h - 2, Q = W + 2 pad_w - 2, pad_h, pad_w >= 0.
 * bn_in (F(2x2) forward and weight gradient only; NULL: none): (3, C) per-channel mean, scale, shift; the conv's
 * input is then relu((x - mean) * scale + shift), formed row by row in bn_row (W floats) as the image is split
 * (conv2d_bnfuse.h: a batch norm and its relu applied in the input copy; the padding stays zero).
 * x_bf16 (only where dnn_wino_reads_bf16(s)): x holds bf16 (uint16_t) values, a stored activation, which F(2x2)'s
 * image split widens in registers (exact: the same floats as a widened copy). */
typedef struct {
	int N, C, H, W, K, P, Q, pad_h, pad_w;
	int bf16; // 1: the per-frequency GEMMs multiply bf16-rounded U and V, fp32 sums (gemm_bf16.h's arithmetic)
	int x_bf16;
	const float *bn_in;
	float *bn_row;
	int y_bf16;        // forward: y holds bf16 (uint16_t) values, each rounded as dnn_bf16_convert after + bias
	const float *bias; // with y_bf16: the bias (K) added before the rounding (NULL: none); else unused
} dnn_wino_shape;

/* Whether this CPU runs the kernel (it needs AVX2 and FMA). */
int dnn_wino_supported(void);

/* Whether the GEMMs run as AVX-512 (16-float vectors, chosen by default where the CPU has
 * AVX-512 F, DQ, BW and VL) rather than AVX2; the results are bit-identical either way. on = 0 forces
 * AVX2 (for side-by-side measurements and tests). Returns the choice in effect. */
int dnn_wino_set_avx512(int on);
int dnn_wino_avx512(void);

/* Whether F(2x2, 3x3)'s forward and weight gradient read x stored in bf16 (s->x_bf16) as it is: on the AVX-512
 * image split (images of at most 32 columns, no bn_in); elsewhere (and in F(4x4)) the caller widens x first. */
int dnn_wino_reads_bf16(const dnn_wino_shape *s);

/* Under --precision bf16 with the vdpbf16ps GEMMs, whether F(2x2)'s forward (and backward data through it) writes
 * V's bf16 channel pairs straight from its input transform (1, the default) or fp32 V that dnn_wino_gemms then
 * packs (0: the former path, the control of the tests' bit-identity check; the same bits). Returns the choice. */
int dnn_wino_set_vpairs(int on);

/* Under --precision bf16 with the vdpbf16ps weight gradient, whether F(2x2)'s dy transform writes D's bf16 tile pairs
 * 32 tiles at a time where the image allows (1, the default: 8x8, 16x16, 32x32 ... images) or one tile row at a time
 * (0: the former path, the control of the tests' bit-identity check; the same bits). Returns the choice. */
int dnn_wino_set_dgroups(int on);

/* Under --precision bf16 with a bf16 y rounded in F(2x2)'s output transform, whether it stores 32 tiles' outputs at a
 * time where the image allows (1, the default: 8x8, 16x16, 32x32 ... images) or one tile row at a time (0: the former
 * path, the control of the tests' bit-identity check; the same bits). Returns the choice. */
int dnn_wino_set_ygroups(int on);

/* Floats of scratch that dnn_wino_forward needs. */
size_t dnn_wino_work(const dnn_wino_shape *s);

/* y = conv(x, w) (beta = 0) or y += conv(x, w) (beta = 1); work: dnn_wino_work(s) floats. x: bf16 values when
 * s->x_bf16 (where dnn_wino_reads_bf16 says; also in dnn_wino_backward_filter). s->y_bf16 (beta 0):
 * y = bf16(conv + s->bias), rounded in the output transform (F(2x2)) or per chunk of tile rows (F(4x4)). */
void dnn_wino_forward(float *y, const float *x, const float *w, const dnn_wino_shape *s, float beta,
		      float *work);
/* The same on 4x4 output tiles, Winograd F(4x4, 3x3): 36 GEMMs per chunk instead of 16 for
 * 4x the outputs, with a larger rounding error (conv2d_winograd_f4.c); work: dnn_wino4_work(s). */
size_t dnn_wino4_work(const dnn_wino_shape *s);
void dnn_wino4_forward(float *y, const float *x, const float *w, const dnn_wino_shape *s, float beta,
		       float *work);
/* Floats of scratch that dnn_wino_backward_filter needs. */
size_t dnn_wino_filter_work(const dnn_wino_shape *s);

/* dw (K, C, 3, 3) += the gradient of sum(y .* dy) with respect to w, y = conv(x, w), computed
 * as the adjoint of the forward's Winograd transforms; work: dnn_wino_filter_work(s) floats. */
void dnn_wino_backward_filter(float *dw, const float *x, const float *dy, const dnn_wino_shape *s,
			      float *work);
#endif
