/* maxpool.h — max pooling, NCHW. x (N,C,H,W) -> y (N,C,P,Q), P = (H + 2*pad - k)/stride + 1.
 * Padding cells are -inf (never selected); NaNs are never the max. Backward recomputes the
 * argmax from x and y, routing dy to the first input (row-major in the window) equal to y, or to
 * the first largest one when none is; dx (=|+=) per accumulate_dx. The CUDA backward
 * (maxpool.cu) applies the same rule and sums overlapping windows in the same order.
 * With a->relu, x is the relu's input: y = relu(max) and dy is masked by y > 0 before routing,
 * which is relu followed by maxpool exactly (a window whose max is positive has the same first
 * maximal cell before and after the relu; one whose max is not gets no gradient). */
#ifndef DNN_MAXPOOL_H
#define DNN_MAXPOOL_H
#include <starpu.h>

#include "dnn_codelet.h"

typedef struct {
	int N, C, H, W;
	int k, stride, pad;
	int P, Q; // filled by dnn_maxpool_args_finish
	int accumulate_dx;
	/* A relu fused in front (graph/fuse.h): y = max(window max, 0), the max of the relu'd window
	 * bit for bit; backward routes dy only where y > 0 (elsewhere the relu's gradient is 0). */
	int relu;
} dnn_maxpool_args;

/* 0, or -1 on an empty/invalid output or an x of more than INT_MAX elements (cuDNN's int sizes) */
int dnn_maxpool_args_finish(dnn_maxpool_args *a);

/* Whether the 2x2 stride-2 kernels run in AVX2 (bit-identical to the scalar loops): on = 1 (the
 * default) where the CPU has AVX2, on = 0 forces the scalar loops (tests, side-by-side
 * measurements). Returns the choice in effect. */
int dnn_maxpool_set_simd(int on);
int dnn_maxpool_simd(void);

void dnn_maxpool_forward_cpu(float *y, const float *x, const dnn_maxpool_args *a);
void dnn_maxpool_backward_cpu(float *dx, const float *x, const float *y, const float *dy,
			      const dnn_maxpool_args *a);

/* fwd (R x, W y); bwd (R x, R y, R dy, W|RW dx) */
extern struct starpu_codelet cl_maxpool_fwd, cl_maxpool_bwd;
int dnn_insert_maxpool_fwd(const dnn_task_opts *o, const dnn_maxpool_args *a, starpu_data_handle_t x, starpu_data_handle_t y);
int dnn_insert_maxpool_bwd(const dnn_task_opts *o, const dnn_maxpool_args *a, starpu_data_handle_t x, starpu_data_handle_t y,
			    starpu_data_handle_t dy, starpu_data_handle_t dx);
#endif
