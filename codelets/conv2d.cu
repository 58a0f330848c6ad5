/* conv2d.cu — CUDA side of conv2d: cuDNN convolutions on the worker's handle and stream.
 *
 * Each CUDA worker keeps a small table of "plans", one per conv shape it has seen: the cuDNN
 * descriptors plus the algorithm and workspace size of each phase, chosen once with the v7
 * heuristics (no benchmarking runs), among those whose workspace fits the worker's block
 * (allocated once at start-up, DNN_CUDA_WORKSPACE_MB; dnn_cuda.h). Tasks then only look up
 * their plan and launch. Math (DNN_CUDA_MATH, dnn_codelet.h): tf32, the default, sets
 * CUDNN_DEFAULT_MATH, so Ampere/Hopper may use TF32 tensor cores for float convs, as PyTorch
 * does by default; fp32 sets CUDNN_FMA_MATH (FP32 FMA kernels only).
 * --precision bf16 (dnn_conv2d_args.bf16, a plan of its own): the operands are rounded into bf16
 * copies in the worker's scratch (dnn_cuda_scratch; gemm_bf16.h's dnn_f32_to_bf16, the CPU's
 * rounding, same bits), cuDNN runs on CUDNN_DATA_BFLOAT16 tensors with CUDNN_DATA_FLOAT compute
 * (fp32 sums) and tensor-op math, and its bf16 result is widened into the fp32 output, or added
 * to it (dw +=, accumulate_dx): cuDNN's bf16 configurations take x, w and y in one type, so the
 * result itself is rounded to bf16 once (the tests' bound has that term: tests/gpu_conv2d_bf16.c).
 * Errors record a worker error and return (dnn_cuda.h); nothing here exits.
 */
#include <starpu.h>
#include <string.h>

#include "dnn_cuda.h"

extern "C" {
#include "bias.h"
#include "dnn_codelet.h"
#include "conv2d.h"
#include "gemm_bf16.h"
void dnn_bias_fwd_cuda(void *buffers[], void *cl_arg);
void dnn_bias_bwd_cuda(void *buffers[], void *cl_arg);
void dnn_conv2d_fwd_cuda(void *buffers[], void *cl_arg);
void dnn_conv2d_bwd_data_cuda(void *buffers[], void *cl_arg);
void dnn_conv2d_bwd_filter_cuda(void *buffers[], void *cl_arg);
}

#define CONV_PLANS_PER_WORKER 32

struct conv_plan {
	int used;
	dnn_conv2d_args key; // the shape (accumulate_dx and bias cleared)
	cudnnTensorDescriptor_t xd, yd;
	cudnnFilterDescriptor_t wd;
	cudnnConvolutionDescriptor_t cd;
	cudnnConvolutionFwdAlgo_t fwd_algo;
	cudnnConvolutionBwdDataAlgo_t bwd_data_algo;
	cudnnConvolutionBwdFilterAlgo_t bwd_filter_algo;
	size_t fwd_ws, bwd_data_ws, bwd_filter_ws;
};

/* Each row is touched only by its own worker thread, so no locking. */
static conv_plan plans[STARPU_NMAXWORKERS][CONV_PLANS_PER_WORKER];
static int plan_victim[STARPU_NMAXWORKERS];

/* Workspace sizes of one algorithm of each pass (the plan's descriptors; h is the worker's). */
static cudnnStatus_t ws_size(cudnnHandle_t h, const conv_plan *p, cudnnConvolutionFwdAlgo_t algo, size_t *bytes)
{
	return cudnnGetConvolutionForwardWorkspaceSize(h, p->xd, p->wd, p->cd, p->yd, algo, bytes);
}
static cudnnStatus_t ws_size(cudnnHandle_t h, const conv_plan *p, cudnnConvolutionBwdDataAlgo_t algo, size_t *bytes)
{
	return cudnnGetConvolutionBackwardDataWorkspaceSize(h, p->wd, p->yd, p->cd, p->xd, algo, bytes);
}
static cudnnStatus_t ws_size(cudnnHandle_t h, const conv_plan *p, cudnnConvolutionBwdFilterAlgo_t algo, size_t *bytes)
{
	return cudnnGetConvolutionBackwardFilterWorkspaceSize(h, p->xd, p->yd, p->cd, p->wd, algo, bytes);
}

/* The algorithm of one pass: among the heuristics' answers (sorted by expected speed) that
 * succeeded, the first deterministic one whose workspace fits the worker's block (cap bytes,
 * DNN_CUDA_WORKSPACE_MB), else the first non-deterministic one that fits, else `fallback`
 * (IMPLICIT_GEMM forward, ALGO_0 backward data and filter: they need no workspace) when it fits.
 * 0 with *algo and *ws, or -1 after recording a worker error. */
template <typename Perf, typename Algo>
static int pick_algo(cudnnHandle_t h, const conv_plan *p, const Perf *perf, int count, Algo fallback, size_t cap,
		     const char *pass, Algo *algo, size_t *ws)
{
	for (int want_det = 1; want_det >= 0; want_det--)
		for (int i = 0; i < count; i++) {
			if (perf[i].status != CUDNN_STATUS_SUCCESS || perf[i].memory > cap ||
			    (want_det && perf[i].determinism != CUDNN_DETERMINISTIC))
				continue;
			size_t bytes;
			if (ws_size(h, p, perf[i].algo, &bytes) == CUDNN_STATUS_SUCCESS && bytes <= cap) {
				*algo = perf[i].algo, *ws = bytes;
				return 0;
			}
		}
	size_t bytes = 0;
	cudnnStatus_t s = ws_size(h, p, fallback, &bytes);
	if (s == CUDNN_STATUS_SUCCESS && bytes <= cap) {
		*algo = fallback, *ws = bytes;
		return 0;
	}
	dnn_worker_error("conv2d %s (N=%d C=%d H=%d W=%d K=%d R=%d S=%d stride=%d pad=%d dilation=%d): cuDNN offers no "
			 "algorithm within the %zu-byte workspace (DNN_CUDA_WORKSPACE_MB; the fallback needs %zu: %s)",
			 pass, p->key.N, p->key.C, p->key.H, p->key.W, p->key.K, p->key.R, p->key.S, p->key.stride,
			 p->key.pad, p->key.dilation, cap, bytes, cudnnGetErrorString(s));
	return -1;
}

/* Destroys what the plan holds (each descriptor once, NULL-safe); errors are ignored, as
 * nothing could be done about them and the descriptors are host objects. */
static void plan_destroy(conv_plan *p)
{
	if (p->xd)
		(void)cudnnDestroyTensorDescriptor(p->xd);
	if (p->yd)
		(void)cudnnDestroyTensorDescriptor(p->yd);
	if (p->wd)
		(void)cudnnDestroyFilterDescriptor(p->wd);
	if (p->cd)
		(void)cudnnDestroyConvolutionDescriptor(p->cd);
	*p = conv_plan{};
}

/* Fills *p for the shape key: descriptors (math per DNN_CUDA_MATH), then each pass's algorithm
 * and workspace. 0, or -1 after recording a worker error (p then holds nothing). */
static int plan_create(conv_plan *p, const dnn_conv2d_args *key)
{
	cudnnHandle_t h = dnn_cudnn_handle();
	const dnn_conv2d_args *a = key;
	*p = conv_plan{};
	p->key = *key;
	const size_t cap = dnn_cuda_workspace_size();
	int n, k, pp, q, count;
	/* bf16: cuDNN's BFLOAT16 configuration (x, w, y bf16; compute, i.e. the sums, fp32). */
	const cudnnDataType_t dt = a->bf16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT;
	cudnnConvolutionFwdAlgoPerf_t fperf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
	cudnnConvolutionBwdDataAlgoPerf_t dperf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
	cudnnConvolutionBwdFilterAlgoPerf_t wperf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
#define PLAN_CHECK(expr)                     \
	do {                                 \
		if (DNN_CUDA_FAILED(expr))   \
			goto fail;           \
	} while (0)
	PLAN_CHECK(cudnnCreateTensorDescriptor(&p->xd));
	PLAN_CHECK(cudnnCreateTensorDescriptor(&p->yd));
	PLAN_CHECK(cudnnCreateFilterDescriptor(&p->wd));
	PLAN_CHECK(cudnnCreateConvolutionDescriptor(&p->cd));
	PLAN_CHECK(cudnnSetTensor4dDescriptor(p->xd, CUDNN_TENSOR_NCHW, dt, a->N, a->C, a->H, a->W));
	PLAN_CHECK(cudnnSetFilter4dDescriptor(p->wd, dt, CUDNN_TENSOR_NCHW, a->K, a->C, a->R, a->S));
	PLAN_CHECK(cudnnSetConvolution2dDescriptor(p->cd, a->pad, a->pad, a->stride, a->stride, a->dilation,
						   a->dilation, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
	/* fp32: CUDNN_FMA_MATH restricts cuDNN to FMA kernels (no TF32 tensor cores); tf32:
	 * CUDNN_DEFAULT_MATH, which permits TF32 tensor cores on Ampere and later; bf16: tensor cores
	 * (CUDNN_TENSOR_OP_MATH), whatever DNN_CUDA_MATH says: bf16 is the user's choice of precision. */
	PLAN_CHECK(cudnnSetConvolutionMathType(p->cd, a->bf16		   ? CUDNN_TENSOR_OP_MATH
						      : dnn_cuda_math_fp32() ? CUDNN_FMA_MATH
									      : CUDNN_DEFAULT_MATH));
	PLAN_CHECK(cudnnGetConvolution2dForwardOutputDim(p->cd, p->xd, p->wd, &n, &k, &pp, &q));
	if (n != a->N || k != a->K || pp != a->P || q != a->Q) {
		dnn_worker_error("conv2d: cuDNN's output shape (%d,%d,%d,%d) differs from ours (%d,%d,%d,%d)", n, k, pp,
				 q, a->N, a->K, a->P, a->Q);
		goto fail;
	}
	PLAN_CHECK(cudnnSetTensor4dDescriptor(p->yd, CUDNN_TENSOR_NCHW, dt, a->N, a->K, a->P, a->Q));

	PLAN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(h, p->xd, p->wd, p->cd, p->yd,
							  CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &count, fperf));
	if (pick_algo(h, p, fperf, count, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, cap, "forward", &p->fwd_algo,
		      &p->fwd_ws) != 0)
		goto fail;
	PLAN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(h, p->wd, p->yd, p->cd, p->xd,
							       CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &count, dperf));
	if (pick_algo(h, p, dperf, count, CUDNN_CONVOLUTION_BWD_DATA_ALGO_0, cap, "backward data",
		      &p->bwd_data_algo, &p->bwd_data_ws) != 0)
		goto fail;
	PLAN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, p->xd, p->yd, p->cd, p->wd,
								 CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &count, wperf));
	if (pick_algo(h, p, wperf, count, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0, cap, "backward filter",
		      &p->bwd_filter_algo, &p->bwd_filter_ws) != 0)
		goto fail;
#undef PLAN_CHECK
	p->used = 1;
	return 0;
fail:
	plan_destroy(p);
	return -1;
}

/* The calling worker's plan for this shape, created on first use (evicting round-robin);
 * NULL after recording a worker error. */
static conv_plan *plan_get(const dnn_conv2d_args *a)
{
	int w = starpu_worker_get_id_check();
	dnn_conv2d_args key = *a;
	key.accumulate_dx = 0;
	key.bias = 0;
	conv_plan *row = plans[w];
	for (int i = 0; i < CONV_PLANS_PER_WORKER; i++)
		if (row[i].used && memcmp(&row[i].key, &key, sizeof(key)) == 0)
			return &row[i];
	conv_plan *p = NULL;
	for (int i = 0; i < CONV_PLANS_PER_WORKER && !p; i++)
		if (!row[i].used)
			p = &row[i];
	if (!p) {
		p = &row[plan_victim[w]];
		plan_victim[w] = (plan_victim[w] + 1) % CONV_PLANS_PER_WORKER;
		/* Descriptors are host objects read only during a cuDNN call, so destroying them
		 * while kernels launched with them are still queued on the stream is safe. */
		plan_destroy(p);
	}
	return plan_create(p, &key) == 0 ? p : NULL;
}

/* The i-th buffer of the running task as a float vector of `expect` elements. */
static float *vec_ptr(void *buffers[], int i, size_t expect)
{
	void *buffer = buffers[i];
	STARPU_ASSERT_MSG(STARPU_VECTOR_GET_NX(buffer) == expect &&
				  STARPU_VECTOR_GET_ELEMSIZE(buffer) == sizeof(float),
			  "conv2d: buffer has %u elements of %zu bytes, the args say %zu floats",
			  (unsigned)STARPU_VECTOR_GET_NX(buffer), (size_t)STARPU_VECTOR_GET_ELEMSIZE(buffer),
			  expect);
	return (float *)STARPU_VECTOR_GET_PTR(buffer);
}

static size_t x_count(const dnn_conv2d_args *a) { return (size_t)a->N * a->C * a->H * a->W; }
static size_t w_count(const dnn_conv2d_args *a) { return (size_t)a->K * a->C * a->R * a->S; }
static size_t y_count(const dnn_conv2d_args *a) { return (size_t)a->N * a->K * a->P * a->Q; }

/* ---------------------------------------------------------------- --precision bf16 */
/* dst (n) = the operand rounded to bf16: dnn_f32_to_bf16, the CPU paths' rounding (nearest even). */
static __global__ void to_bf16_kernel(uint16_t *dst, const float *src, size_t n)
{
	size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
	if (i < n)
		dst[i] = dnn_f32_to_bf16(src[i]);
}

/* y (n) = widened h (accumulate 0), or y += widened h (1): the fp32 output of a bf16 conv. */
static __global__ void from_bf16_kernel(float *y, const uint16_t *h, size_t n, int accumulate)
{
	size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
	if (i < n)
		y[i] = accumulate ? y[i] + dnn_bf16_to_f32(h[i]) : dnn_bf16_to_f32(h[i]);
}

/* 0, or -1 after recording a worker error (the launch's). */
static int to_bf16(uint16_t *dst, const float *src, size_t n)
{
	to_bf16_kernel<<<DNN_CUDA_BLOCKS(n), 256, 0, starpu_cuda_get_local_stream()>>>(dst, src, n);
	return DNN_CUDA_FAILED(cudaGetLastError()) ? -1 : 0;
}
static int from_bf16(float *y, const uint16_t *h, size_t n, int accumulate)
{
	from_bf16_kernel<<<DNN_CUDA_BLOCKS(n), 256, 0, starpu_cuda_get_local_stream()>>>(y, h, n, accumulate);
	return DNN_CUDA_FAILED(cudaGetLastError()) ? -1 : 0;
}

/* The bf16 copies of a task's two inputs (n0, n1 elements) and its output (n2) in the worker's
 * scratch (conv2d.h dnn_conv2d_bf16_copies: the layout, which the GPU memory preflight counts), the
 * inputs rounded: 0, or -1 after recording a worker error. */
static int bf16_operands(uint16_t **h0, const float *in0, size_t n0, uint16_t **h1, const float *in1, size_t n1,
			 uint16_t **h2, size_t n2)
{
	size_t o1, o2;
	char *s = (char *)dnn_cuda_scratch(dnn_conv2d_bf16_copies(n0, n1, n2, &o1, &o2));
	if (!s)
		return -1;
	*h0 = (uint16_t *)s, *h1 = (uint16_t *)(s + o1), *h2 = (uint16_t *)(s + o2);
	return to_bf16(*h0, in0, n0) != 0 || to_bf16(*h1, in1, n1) != 0 ? -1 : 0;
}

/* The bias as bias.h sees it: y (N, K, P*Q). */
static dnn_bias_args bias_args(const dnn_conv2d_args *a)
{
	dnn_bias_args b = {a->N, a->K, a->P * a->Q};
	return b;
}

extern "C" void dnn_conv2d_fwd_cuda(void *buffers[], void *cl_arg)
{
	const dnn_conv2d_args *a = (const dnn_conv2d_args *)cl_arg;
	if (a->x_bf16 || a->y_bf16) { /* the plan stores no bf16 activation with CUDA workers (graph/model.c) */
		dnn_worker_error("conv2d: a bf16 activation reached a CUDA kernel (fp32 only)");
		return;
	}
	STARPU_ASSERT(STARPU_TASK_GET_NBUFFERS(starpu_task_get_current()) == (a->bias ? 4 : 3));
	const float *x = vec_ptr(buffers, 0, x_count(a)); // (N, C, H, W)
	const float *w = vec_ptr(buffers, 1, w_count(a)); // (K, C, R, S)
	float *y = vec_ptr(buffers, 2, y_count(a));       // (N, K, P, Q)
	conv_plan *p = plan_get(a);
	if (!p)
		return;
	void *ws = dnn_cuda_workspace(p->fwd_ws);
	if (p->fwd_ws && !ws)
		return;
	const float alpha = 1.0f, beta = 0.0f;
	if (a->bf16) { // y = widen(conv(bf16(x), bf16(w))): fp32 sums, the result rounded once
		uint16_t *xh, *wh, *yh;
		if (bf16_operands(&xh, x, x_count(a), &wh, w, w_count(a), &yh, y_count(a)) != 0)
			return;
		DNN_CUDNN_CHECK(cudnnConvolutionForward(dnn_cudnn_handle(), &alpha, p->xd, xh, p->wd, wh, p->cd,
							p->fwd_algo, ws, p->fwd_ws, &beta, p->yd, yh));
		if (from_bf16(y, yh, y_count(a), 0) != 0)
			return;
	} else
		DNN_CUDNN_CHECK(cudnnConvolutionForward(dnn_cudnn_handle(), &alpha, p->xd, x, p->wd, w, p->cd,
							p->fwd_algo, ws, p->fwd_ws, &beta, p->yd, y));
	if (a->bias) { // y += b (K), broadcast: bias.cu's kernel on the same stream
		vec_ptr(buffers, 3, (size_t)a->K);
		dnn_bias_args b = bias_args(a);
		void *bb[2] = {buffers[2], buffers[3]};
		dnn_bias_fwd_cuda(bb, &b);
	}
}

extern "C" void dnn_conv2d_bwd_data_cuda(void *buffers[], void *cl_arg)
{
	const dnn_conv2d_args *a = (const dnn_conv2d_args *)cl_arg;
	STARPU_ASSERT(STARPU_TASK_GET_NBUFFERS(starpu_task_get_current()) == 3);
	const float *dy = vec_ptr(buffers, 0, y_count(a)); // (N, K, P, Q)
	const float *w = vec_ptr(buffers, 1, w_count(a));  // (K, C, R, S)
	float *dx = vec_ptr(buffers, 2, x_count(a));       // (N, C, H, W)
	conv_plan *p = plan_get(a);
	if (!p)
		return;
	void *ws = dnn_cuda_workspace(p->bwd_data_ws);
	if (p->bwd_data_ws && !ws)
		return;
	const float alpha = 1.0f, beta = a->accumulate_dx ? 1.0f : 0.0f;
	if (a->bf16) { // dx = or += widen(conv^T(bf16(dy), bf16(w)))
		const float zero = 0.0f;
		uint16_t *dyh, *wh, *dxh;
		if (bf16_operands(&dyh, dy, y_count(a), &wh, w, w_count(a), &dxh, x_count(a)) != 0)
			return;
		DNN_CUDNN_CHECK(cudnnConvolutionBackwardData(dnn_cudnn_handle(), &alpha, p->wd, wh, p->yd, dyh, p->cd,
							     p->bwd_data_algo, ws, p->bwd_data_ws, &zero, p->xd, dxh));
		(void)from_bf16(dx, dxh, x_count(a), a->accumulate_dx);
		return;
	}
	DNN_CUDNN_CHECK(cudnnConvolutionBackwardData(dnn_cudnn_handle(), &alpha, p->wd, w, p->yd, dy,
						     p->cd, p->bwd_data_algo, ws, p->bwd_data_ws,
						     &beta, p->xd, dx));
}

extern "C" void dnn_conv2d_bwd_filter_cuda(void *buffers[], void *cl_arg)
{
	const dnn_conv2d_args *a = (const dnn_conv2d_args *)cl_arg;
	if (a->x_bf16) { /* the plan stores no bf16 activation with CUDA workers (graph/model.c) */
		dnn_worker_error("conv2d: a bf16 activation reached a CUDA kernel (fp32 only)");
		return;
	}
	STARPU_ASSERT(STARPU_TASK_GET_NBUFFERS(starpu_task_get_current()) == (a->bias ? 4 : 3));
	const float *x = vec_ptr(buffers, 0, x_count(a));  // (N, C, H, W)
	const float *dy = vec_ptr(buffers, 1, y_count(a)); // (N, K, P, Q)
	float *dw = vec_ptr(buffers, 2, w_count(a));       // (K, C, R, S), +=
	conv_plan *p = plan_get(a);
	if (!p)
		return;
	void *ws = dnn_cuda_workspace(p->bwd_filter_ws);
	if (p->bwd_filter_ws && !ws)
		return;
	const float alpha = 1.0f, beta = 1.0f;
	if (a->bf16) { // dw += widen(corr(bf16(x), bf16(dy))): the sum over the chunk in fp32, rounded once
		const float zero = 0.0f;
		uint16_t *xh, *dyh, *dwh;
		if (bf16_operands(&xh, x, x_count(a), &dyh, dy, y_count(a), &dwh, w_count(a)) != 0)
			return;
		DNN_CUDNN_CHECK(cudnnConvolutionBackwardFilter(dnn_cudnn_handle(), &alpha, p->xd, xh, p->yd, dyh, p->cd,
							       p->bwd_filter_algo, ws, p->bwd_filter_ws, &zero, p->wd,
							       dwh));
		if (from_bf16(dw, dwh, w_count(a), 1) != 0)
			return;
	} else
		DNN_CUDNN_CHECK(cudnnConvolutionBackwardFilter(dnn_cudnn_handle(), &alpha, p->xd, x, p->yd, dy,
							       p->cd, p->bwd_filter_algo, ws,
							       p->bwd_filter_ws, &beta, p->wd, dw));
	if (a->bias) { // db (K) += sum of dy over N, P, Q: bias.cu's kernel on the same stream
		vec_ptr(buffers, 3, (size_t)a->K);
		dnn_bias_args b = bias_args(a);
		void *bb[2] = {buffers[1], buffers[3]};
		dnn_bias_bwd_cuda(bb, &b);
	}
}
