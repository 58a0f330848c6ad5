/* conv2d.c — 2-D convolution (NCHW, groups=1): the StarPU glue (shapes, codelets, perf models,
 * insert helpers).
 *
 * The CPU kernels dnn_conv2d_*_cpu are in conv2d_algo.c, which picks for each pass the im2col +
 * GEMM path (conv2d_im2col.c), the direct AVX2 path (conv2d_direct.c) or Winograd F(2x2, 3x3)
 * (conv2d_winograd_f2.c, _f4.c); see conv2d_impl.h. The CUDA side (cuDNN) is conv2d.cu. The
 * double-precision naive reference lives in the tests (tests/op_cases.c).
 */
#include "conv2d.h"
#include "bias.h"

#include <limits.h>
#include <stdlib.h>

#include "dnn_codelet.h"

#ifdef DNN_HAVE_CUDA
/* Defined in conv2d.cu. */
void dnn_conv2d_fwd_cuda(void *buffers[], void *cl_arg);
void dnn_conv2d_bwd_data_cuda(void *buffers[], void *cl_arg);
void dnn_conv2d_bwd_filter_cuda(void *buffers[], void *cl_arg);
#endif

/* ------------------------------------------------------------------ shapes */

int dnn_conv2d_args_finish(dnn_conv2d_args *a)
{
	if (a->N < 1 || a->C < 1 || a->H < 1 || a->W < 1 || a->K < 1 || a->R < 1 || a->S < 1 ||
	    a->stride < 1 || a->pad < 0 || a->dilation < 1 ||
	    (a->accumulate_dx != 0 && a->accumulate_dx != 1))
		return -1;
	long long eh = (long long)a->H + 2LL * a->pad - (long long)a->dilation * (a->R - 1) - 1;
	long long ew = (long long)a->W + 2LL * a->pad - (long long)a->dilation * (a->S - 1) - 1;
	if (eh < 0 || ew < 0)
		return -1;
	long long P = eh / a->stride + 1, Q = ew / a->stride + 1;
	/* cuDNN tensor descriptors take int sizes: x (N,C,H,W) and y (N,K,P,Q) */
	if ((long long)a->N * a->C * a->H * a->W > INT_MAX || (long long)a->N * a->K * P * Q > INT_MAX)
		return -1;
	a->P = (int)P;
	a->Q = (int)Q;
	return 0;
}

double dnn_conv2d_flops_fwd(const dnn_conv2d_args *a)
{
	return 2.0 * a->N * a->K * a->P * a->Q * (double)a->C * a->R * a->S;
}

static size_t x_count(const dnn_conv2d_args *a) { return (size_t)a->N * a->C * a->H * a->W; }
static size_t w_count(const dnn_conv2d_args *a) { return (size_t)a->K * a->C * a->R * a->S; }
static size_t y_count(const dnn_conv2d_args *a) { return (size_t)a->N * a->K * a->P * a->Q; }

/* ------------------------------------------------------------------ codelets */

/* The i-th buffer of the running task as a float vector of `expect` elements. */
static float *vec_ptr(void *buffers[], int i, size_t expect)
{
	void *buffer = buffers[i];
	STARPU_ASSERT_MSG(STARPU_VECTOR_GET_NX(buffer) == expect && STARPU_VECTOR_GET_ELEMSIZE(buffer) == sizeof(float),
			  "conv2d: buffer has %u elements of %zu bytes, the args say %zu floats",
			  (unsigned)STARPU_VECTOR_GET_NX(buffer), (size_t)STARPU_VECTOR_GET_ELEMSIZE(buffer),
			  expect);
	return (float *)STARPU_VECTOR_GET_PTR(buffer);
}

/* The task's input x (buffer i): fp32, or (a->x_bf16, a bf16 activation) its bf16 values, which the kernels widen
 * exactly (conv2d_algo.c, conv2d_im2col.c build_phases). The paths that round x itself to bf16 (im2col's bf16
 * GEMMs, the direct path's padded copy) get those values back unchanged: they compute what they computed from
 * the fp32 tensor the activation was rounded from. Winograd rounds its transformed input instead: for it the
 * stored x is one more rounding, relative 2^-8 per element. */
const float *dnn_conv2d_x_ptr(void *buffers[], int i, const dnn_conv2d_args *a)
{
	if (!a->x_bf16)
		return vec_ptr(buffers, i, x_count(a));
	STARPU_ASSERT_MSG(STARPU_VECTOR_GET_NX(buffers[i]) == x_count(a) &&
				  STARPU_VECTOR_GET_ELEMSIZE(buffers[i]) == sizeof(uint16_t),
			  "conv2d: x has %u elements of %zu bytes, the args say %zu bf16 values",
			  (unsigned)STARPU_VECTOR_GET_NX(buffers[i]), (size_t)STARPU_VECTOR_GET_ELEMSIZE(buffers[i]),
			  x_count(a));
	return (const float *)STARPU_VECTOR_GET_PTR(buffers[i]);
}

/* The bias as bias.h sees it: y (N, K, P*Q). */
static dnn_bias_args bias_args(const dnn_conv2d_args *a)
{
	dnn_bias_args b = {.N = a->N, .C = a->K, .HW = a->P * a->Q};
	return b;
}

/* The task's output y (buffer 2): fp32, or (a->y_bf16, a bf16 activation) a vector of as many 2-byte elements, which
 * the kernels write in bf16 (their y pointer then points at uint16_t values). */
static float *y_ptr(void *buffers[], const dnn_conv2d_args *a)
{
	if (!a->y_bf16)
		return vec_ptr(buffers, 2, y_count(a));
	STARPU_ASSERT_MSG(STARPU_VECTOR_GET_NX(buffers[2]) == y_count(a) &&
				  STARPU_VECTOR_GET_ELEMSIZE(buffers[2]) == sizeof(uint16_t),
			  "conv2d: y has %u elements of %zu bytes, the args say %zu bf16 values",
			  (unsigned)STARPU_VECTOR_GET_NX(buffers[2]), (size_t)STARPU_VECTOR_GET_ELEMSIZE(buffers[2]),
			  y_count(a));
	return (float *)STARPU_VECTOR_GET_PTR(buffers[2]);
}

static void conv2d_fwd_cpu_task(void *buffers[], void *cl_arg)
{
	const dnn_conv2d_args *a = cl_arg;
	STARPU_ASSERT(STARPU_TASK_GET_NBUFFERS(starpu_task_get_current()) == (a->bias ? 4 : 3));
	const float *x = dnn_conv2d_x_ptr(buffers, 0, a);
	const float *w = vec_ptr(buffers, 1, w_count(a));
	float *y = y_ptr(buffers, a);
	const float *bias = a->bias ? vec_ptr(buffers, 3, (size_t)a->K) : NULL;
	/* a bf16 y gets its bias from the kernel (before the rounding): it always returns 1 then */
	if (!dnn_conv2d_forward_bias_cpu(y, x, w, bias, a) && bias) {
		dnn_bias_args b = bias_args(a);
		dnn_bias_forward_cpu(y, bias, &b);
	}
}

static void conv2d_bwd_data_cpu_task(void *buffers[], void *cl_arg)
{
	const dnn_conv2d_args *a = cl_arg;
	STARPU_ASSERT(STARPU_TASK_GET_NBUFFERS(starpu_task_get_current()) == 3);
	const float *dy = vec_ptr(buffers, 0, y_count(a));
	const float *w = vec_ptr(buffers, 1, w_count(a));
	float *dx = vec_ptr(buffers, 2, x_count(a));
	dnn_conv2d_backward_data_cpu(dx, dy, w, a);
}

static void conv2d_bwd_filter_cpu_task(void *buffers[], void *cl_arg)
{
	const dnn_conv2d_args *a = cl_arg;
	const float *x = dnn_conv2d_x_ptr(buffers, 0, a);
	STARPU_ASSERT(STARPU_TASK_GET_NBUFFERS(starpu_task_get_current()) == (a->bias ? 4 : 3));
	const float *dy = vec_ptr(buffers, 1, y_count(a));
	float *dw = vec_ptr(buffers, 2, w_count(a));
	dnn_conv2d_backward_filter_cpu(dw, x, dy, a);
	if (a->bias) {
		dnn_bias_args b = bias_args(a);
		dnn_bias_backward_cpu(vec_ptr(buffers, 3, (size_t)a->K), dy, &b);
	}
}

/* fwd and bwd_filter: 3 buffers, 4 with the fused bias (DNN_FUSE=2). */
DNN_CODELET(cl_conv2d_fwd, 4, conv2d_fwd_cpu_task, dnn_conv2d_fwd_cuda);
DNN_CODELET(cl_conv2d_bwd_data, 3, conv2d_bwd_data_cpu_task, dnn_conv2d_bwd_data_cuda);
DNN_CODELET(cl_conv2d_bwd_filter, 4, conv2d_bwd_filter_cpu_task, dnn_conv2d_bwd_filter_cuda);

/* ------------------------------------------------------------------ insert helpers */

DNN_ARGS_NO_PADDING(dnn_conv2d_args, 18 * sizeof(int));

/* -EINVAL for arguments a helper cannot take: unfinished (dnn_conv2d_args_finish), or the bias
 * flag not matching the helper (bias -1: either; the bias variants take a 4th buffer). */
static int bad_args(const dnn_conv2d_args *a, int bias)
{
	return a->P <= 0 || a->Q <= 0 || (bias >= 0 && !a->bias != !bias);
}

int dnn_insert_conv2d_fwd(const dnn_task_opts *o, const dnn_conv2d_args *a, starpu_data_handle_t x, starpu_data_handle_t w,
			   starpu_data_handle_t y)
{
	if (bad_args(a, 0))
		return -EINVAL;
	return DNN_TASK_INSERT_ARGS(o, &cl_conv2d_fwd, "conv_fwd", a, STARPU_R, x, STARPU_R, w, STARPU_W, y,
				    STARPU_FLOPS, dnn_conv2d_flops_fwd(a), STARPU_TASK_COLOR, DNN_COLOR_CONV_FWD);
}

int dnn_insert_conv2d_bwd_data(const dnn_task_opts *o, const dnn_conv2d_args *a, starpu_data_handle_t dy,
				starpu_data_handle_t w, starpu_data_handle_t dx)
{
	if (bad_args(a, -1)) // -1: with or without bias
		return -EINVAL;
	int dx_mode = a->accumulate_dx ? STARPU_RW : STARPU_W;
	return DNN_TASK_INSERT_ARGS(o, &cl_conv2d_bwd_data, "conv_bwd_data", a, STARPU_R, dy, STARPU_R, w, dx_mode, dx,
				    STARPU_FLOPS, dnn_conv2d_flops_fwd(a), STARPU_TASK_COLOR, DNN_COLOR_CONV_BWD_DATA);
}

int dnn_insert_conv2d_bwd_filter(const dnn_task_opts *o, const dnn_conv2d_args *a, starpu_data_handle_t x,
				  starpu_data_handle_t dy, starpu_data_handle_t dw, int dw_mode)
{
	if (bad_args(a, 0))
		return -EINVAL;
	return DNN_TASK_INSERT_ARGS(o, &cl_conv2d_bwd_filter, "conv_bwd_filter", a, STARPU_R, x, STARPU_R, dy, dw_mode, dw,
				    STARPU_FLOPS, dnn_conv2d_flops_fwd(a), STARPU_TASK_COLOR, DNN_COLOR_CONV_BWD_FILTER);
}

int dnn_insert_conv2d_bias_fwd(const dnn_task_opts *o, const dnn_conv2d_args *a, starpu_data_handle_t x, starpu_data_handle_t w,
				starpu_data_handle_t b, starpu_data_handle_t y)
{
	if (bad_args(a, 1))
		return -EINVAL;
	return DNN_TASK_INSERT_ARGS(o, &cl_conv2d_fwd, "conv_bias_fwd", a, STARPU_R, x, STARPU_R, w, STARPU_W, y, STARPU_R, b,
				    STARPU_FLOPS, dnn_conv2d_flops_fwd(a) + (double)y_count(a),
				    STARPU_TASK_COLOR, DNN_COLOR_CONV_FWD);
}

int dnn_insert_conv2d_bias_bwd_filter(const dnn_task_opts *o, const dnn_conv2d_args *a, starpu_data_handle_t x,
				       starpu_data_handle_t dy, starpu_data_handle_t dw, starpu_data_handle_t db,
				       int dw_mode)
{
	if (bad_args(a, 1))
		return -EINVAL;
	return DNN_TASK_INSERT_ARGS(o, &cl_conv2d_bwd_filter, "conv_bias_bwd_filter", a, STARPU_R, x, STARPU_R, dy,
				    dw_mode, dw, dw_mode, db, STARPU_FLOPS, dnn_conv2d_flops_fwd(a) + (double)y_count(a),
				    STARPU_TASK_COLOR, DNN_COLOR_CONV_BWD_FILTER);
}
