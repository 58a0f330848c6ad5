/* conv2d.cu — CUDA side of conv2d: cuDNN convolutions on the worker's handle and stream.
 *
 * Each CUDA worker keeps a small table of "plans", one per conv shape it has seen: the cuDNN
 * descriptors plus the algorithm and workspace size of each phase, chosen once with the v7
 * heuristics (deterministic, no benchmarking runs). Tasks then only look up their plan and
 * launch. Math mode is CUDNN_DEFAULT_MATH, so Ampere/Hopper may use TF32 tensor cores for
 * float convs, as PyTorch does by default; NVIDIA_TF32_OVERRIDE=0 forces plain FP32.
 */
#include <starpu.h>
#include <string.h>

#include "dnn_cuda.h"

extern "C" {
#include "bias.h"
#include "conv2d.h"
void dnn_bias_fwd_cuda(void *buffers[], void *cl_arg);
void dnn_bias_bwd_cuda(void *buffers[], void *cl_arg);
void dnn_conv2d_fwd_cuda(void *buffers[], void *cl_arg);
void dnn_conv2d_bwd_data_cuda(void *buffers[], void *cl_arg);
void dnn_conv2d_bwd_filter_cuda(void *buffers[], void *cl_arg);
}

/* Largest cuDNN workspace a plan may ask for; algorithms needing more are skipped. */
#define CONV_WORKSPACE_LIMIT ((size_t)512 << 20)
#define CONV_PLANS_PER_WORKER 32

struct conv_plan {
	int used;
	dnn_conv2d_args key; // the shape (accumulate_dx cleared)
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

/* Index of the first returned algorithm that succeeded and fits the workspace limit, preferring
 * deterministic ones (the list is sorted by expected speed). */
template <typename Perf> static int pick_algo(const Perf *perf, int count)
{
	int any = -1;
	for (int i = 0; i < count; i++) {
		if (perf[i].status != CUDNN_STATUS_SUCCESS || perf[i].memory > CONV_WORKSPACE_LIMIT)
			continue;
		if (perf[i].determinism == CUDNN_DETERMINISTIC)
			return i;
		if (any < 0)
			any = i;
	}
	if (any < 0) {
		fprintf(stderr, "%s:%d: cuDNN offers no usable convolution algorithm\n", __FILE__, __LINE__);
		exit(1);
	}
	return any;
}

static void plan_destroy(conv_plan *p)
{
	DNN_CUDNN_CHECK(cudnnDestroyTensorDescriptor(p->xd));
	DNN_CUDNN_CHECK(cudnnDestroyTensorDescriptor(p->yd));
	DNN_CUDNN_CHECK(cudnnDestroyFilterDescriptor(p->wd));
	DNN_CUDNN_CHECK(cudnnDestroyConvolutionDescriptor(p->cd));
	p->used = 0;
}

static void plan_create(conv_plan *p, const dnn_conv2d_args *key)
{
	cudnnHandle_t h = dnn_cudnn_handle();
	const dnn_conv2d_args *a = key;
	p->key = *key;
	DNN_CUDNN_CHECK(cudnnCreateTensorDescriptor(&p->xd));
	DNN_CUDNN_CHECK(cudnnCreateTensorDescriptor(&p->yd));
	DNN_CUDNN_CHECK(cudnnCreateFilterDescriptor(&p->wd));
	DNN_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&p->cd));
	DNN_CUDNN_CHECK(cudnnSetTensor4dDescriptor(p->xd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, a->N, a->C,
						   a->H, a->W));
	DNN_CUDNN_CHECK(cudnnSetFilter4dDescriptor(p->wd, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, a->K, a->C,
						   a->R, a->S));
	DNN_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(p->cd, a->pad, a->pad, a->stride, a->stride,
							a->dilation, a->dilation,
							CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
	DNN_CUDNN_CHECK(cudnnSetConvolutionMathType(p->cd, CUDNN_DEFAULT_MATH));
	int n, k, pp, q;
	DNN_CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(p->cd, p->xd, p->wd, &n, &k, &pp, &q));
	if (n != a->N || k != a->K || pp != a->P || q != a->Q) {
		fprintf(stderr, "%s:%d: cuDNN output shape (%d,%d,%d,%d) != args (%d,%d,%d,%d)\n", __FILE__,
			__LINE__, n, k, pp, q, a->N, a->K, a->P, a->Q);
		exit(1);
	}
	DNN_CUDNN_CHECK(cudnnSetTensor4dDescriptor(p->yd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, a->N, a->K,
						   a->P, a->Q));

	int count;
	cudnnConvolutionFwdAlgoPerf_t fperf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
	DNN_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(
		h, p->xd, p->wd, p->cd, p->yd, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &count, fperf));
	p->fwd_algo = fperf[pick_algo(fperf, count)].algo;
	DNN_CUDNN_CHECK(cudnnGetConvolutionForwardWorkspaceSize(h, p->xd, p->wd, p->cd, p->yd,
								p->fwd_algo, &p->fwd_ws));

	cudnnConvolutionBwdDataAlgoPerf_t dperf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
	DNN_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(
		h, p->wd, p->yd, p->cd, p->xd, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &count, dperf));
	p->bwd_data_algo = dperf[pick_algo(dperf, count)].algo;
	DNN_CUDNN_CHECK(cudnnGetConvolutionBackwardDataWorkspaceSize(h, p->wd, p->yd, p->cd, p->xd,
								     p->bwd_data_algo, &p->bwd_data_ws));

	cudnnConvolutionBwdFilterAlgoPerf_t wperf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
	DNN_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
		h, p->xd, p->yd, p->cd, p->wd, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &count, wperf));
	p->bwd_filter_algo = wperf[pick_algo(wperf, count)].algo;
	DNN_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterWorkspaceSize(
		h, p->xd, p->yd, p->cd, p->wd, p->bwd_filter_algo, &p->bwd_filter_ws));
	p->used = 1;
}

/* The calling worker's plan for this shape, created on first use (evicting round-robin). */
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
	plan_create(p, &key);
	return p;
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

/* The bias as bias.h sees it: y (N, K, P*Q). */
static dnn_bias_args bias_args(const dnn_conv2d_args *a)
{
	dnn_bias_args b = {a->N, a->K, a->P * a->Q};
	return b;
}

extern "C" void dnn_conv2d_fwd_cuda(void *buffers[], void *cl_arg)
{
	const dnn_conv2d_args *a = (const dnn_conv2d_args *)cl_arg;
	STARPU_ASSERT(STARPU_TASK_GET_NBUFFERS(starpu_task_get_current()) == (a->bias ? 4 : 3));
	const float *x = vec_ptr(buffers, 0, x_count(a)); // (N, C, H, W)
	const float *w = vec_ptr(buffers, 1, w_count(a)); // (K, C, R, S)
	float *y = vec_ptr(buffers, 2, y_count(a));       // (N, K, P, Q)
	conv_plan *p = plan_get(a);
	void *ws = p->fwd_ws ? dnn_cuda_workspace(p->fwd_ws) : NULL;
	const float alpha = 1.0f, beta = 0.0f;
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
	void *ws = p->bwd_data_ws ? dnn_cuda_workspace(p->bwd_data_ws) : NULL;
	const float alpha = 1.0f, beta = a->accumulate_dx ? 1.0f : 0.0f;
	DNN_CUDNN_CHECK(cudnnConvolutionBackwardData(dnn_cudnn_handle(), &alpha, p->wd, w, p->yd, dy,
						     p->cd, p->bwd_data_algo, ws, p->bwd_data_ws,
						     &beta, p->xd, dx));
}

extern "C" void dnn_conv2d_bwd_filter_cuda(void *buffers[], void *cl_arg)
{
	const dnn_conv2d_args *a = (const dnn_conv2d_args *)cl_arg;
	STARPU_ASSERT(STARPU_TASK_GET_NBUFFERS(starpu_task_get_current()) == (a->bias ? 4 : 3));
	const float *x = vec_ptr(buffers, 0, x_count(a));  // (N, C, H, W)
	const float *dy = vec_ptr(buffers, 1, y_count(a)); // (N, K, P, Q)
	float *dw = vec_ptr(buffers, 2, w_count(a));       // (K, C, R, S), +=
	conv_plan *p = plan_get(a);
	void *ws = p->bwd_filter_ws ? dnn_cuda_workspace(p->bwd_filter_ws) : NULL;
	const float alpha = 1.0f, beta = 1.0f;
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
