/* batchnorm.cu — CUDA side of batch normalisation: cuDNN spatial batch norm on the worker's stream.
 *
 * x is described to cuDNN as (N, C, HW, 1). cuDNN saves the batch mean and invstd =
 * 1/sqrt(biased var + eps) into the first and last thirds of `saved`; our own kernel then
 * computes the middle third, the biased variance, directly from x's deviations from that mean,
 * summed in double with the CPU's correction for the mean's rounding (batchnorm.c), so it stays
 * exact when var << eps (rebuilding it as 1/invstd^2 - eps would cancel there). The running
 * statistics are updated by our own kernel (cuDNN's running update is not used), so CPU and GPU
 * follow the same formula.
 * Errors record a worker error and return (dnn_cuda.h).
 */
#include <starpu.h>

#include "act_formulas.h" /* the per-element formulas, shared with batchnorm.c */
#include "bn_formulas.h"
#include "cuda_reduce.cuh"
#include "dnn_cuda.h"

extern "C" {
#include "batchnorm.h"
#include "dnn_codelet.h"
}

struct bn_desc {
	cudnnTensorDescriptor_t x;  // (N, C, HW, 1)
	cudnnTensorDescriptor_t bn; // (1, C, 1, 1)
};

/* 0, or -1 after recording a worker error (d then holds nothing). */
static int bn_desc_create(bn_desc *d, const dnn_batchnorm_args *a)
{
	*d = bn_desc{};
	if (DNN_CUDA_FAILED(cudnnCreateTensorDescriptor(&d->x)) || DNN_CUDA_FAILED(cudnnCreateTensorDescriptor(&d->bn)) ||
	    DNN_CUDA_FAILED(cudnnSetTensor4dDescriptor(d->x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, a->N, a->C, a->HW, 1)) ||
	    DNN_CUDA_FAILED(cudnnDeriveBNTensorDescriptor(d->bn, d->x, CUDNN_BATCHNORM_SPATIAL))) {
		if (d->bn)
			(void)cudnnDestroyTensorDescriptor(d->bn);
		if (d->x)
			(void)cudnnDestroyTensorDescriptor(d->x);
		*d = bn_desc{};
		return -1;
	}
	return 0;
}

/* Host objects; a failure to destroy one is not worth ending a run for. */
static void bn_desc_destroy(bn_desc *d)
{
	(void)cudnnDestroyTensorDescriptor(d->bn);
	(void)cudnnDestroyTensorDescriptor(d->x);
}

#define BN_VAR_THREADS 256

// saved (3C): var[c] = mean over (N, HW) of (x - m)^2 - (mean_d - m)^2, m = saved[c] (cuDNN's
// float mean), mean_d the exact mean: the CPU's formula (batchnorm.c), summed in double.
// One block per channel, both sums reduced over the block by dnn_block_sum2.
static __global__ void bn_var_kernel(float *saved, const float *x, int N, int C, int HW)
{
	const int c = blockIdx.x;
	const float m = saved[c];
	const size_t count = (size_t)N * HW;
	double dev = 0, sq = 0;
	for (size_t j = threadIdx.x; j < count; j += blockDim.x) {
		size_t n = j / (size_t)HW, i = j % (size_t)HW;
		double d = (double)x[(n * C + c) * (size_t)HW + i] - (double)m;
		dev += d;
		sq += d * d;
	}
	dnn_block_sum2<BN_VAR_THREADS>(&dev, &sq);
	if (threadIdx.x == 0) {
		double M = (double)count, dm = dev / M, var = sq / M - dm * dm;
		saved[C + c] = (float)(var > 0 ? var : 0);
	}
}

// running (2C) = (1 - mom) * running + mom * [mean | var * unbias]; saved (3C)
static __global__ void bn_running_kernel(float *running, const float *saved, int C, float mom,
					 float unbias)
{
	int c = blockIdx.x * blockDim.x + threadIdx.x;
	if (c < C) {
		running[c] = dnn_bn_running(running[c], saved[c], mom, 1.0f);
		running[C + c] = dnn_bn_running(running[C + c], saved[C + c], mom, unbias);
	}
}

// y (n) = max(y, 0): the fused ReLU after the normalisation
static __global__ void bn_relu_inplace_kernel(float *y, size_t n)
{
	size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
	if (i < n)
		y[i] = dnn_act_relu(y[i]);
}

// dy (n) = dy * (y > 0): the fused ReLU's backward, in place before the BN backward
static __global__ void bn_relu_mask_kernel(float *dy, const float *y, size_t n)
{
	size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
	if (i < n)
		dy[i] = dnn_act_relu_grad(dy[i], y[i]);
}

static void bn_relu_inplace(float *y, size_t n)
{
	if (n == 0)
		return;
	bn_relu_inplace_kernel<<<DNN_CUDA_BLOCKS(n), 256, 0, starpu_cuda_get_local_stream()>>>(y, n);
	DNN_CUDA_CHECK(cudaGetLastError());
}

#define NX(i) STARPU_VECTOR_GET_NX(buffers[i])
#define PTR(i) ((float *)STARPU_VECTOR_GET_PTR(buffers[i]))

// (R x, R gamma, R beta, W y, W saved)
/* The plan stores no bf16 activation with CUDA workers (graph/model.c): a bf16 relu output reaching a kernel here
 * is a bug, reported as a worker error. */
static int bf16_refused(const dnn_batchnorm_args *a)
{
	if (!a->y_bf16 && !a->x_bf16)
		return 0;
	dnn_worker_error("batchnorm: a bf16 activation reached a CUDA kernel (fp32 only)");
	return 1;
}

extern "C" void dnn_batchnorm_fwd_train_cuda(void *buffers[], void *cl_arg)
{
	const dnn_batchnorm_args *a = (const dnn_batchnorm_args *)cl_arg;
	if (bf16_refused(a))
		return;
	size_t nx = (size_t)a->N * a->C * a->HW, C = (size_t)a->C;
	STARPU_ASSERT(NX(0) == nx && NX(1) == C && NX(2) == C && NX(3) == nx && NX(4) == 3 * C);
	float *saved = PTR(4);
	bn_desc d;
	if (bn_desc_create(&d, a) != 0)
		return;
	const float one = 1.0f, zero = 0.0f;
	const int bad = DNN_CUDA_FAILED(cudnnBatchNormalizationForwardTraining(
		dnn_cudnn_handle(), CUDNN_BATCHNORM_SPATIAL, &one, &zero, d.x, PTR(0), d.x, PTR(3), d.bn,
		PTR(1), PTR(2), 0.0, NULL, NULL, (double)a->eps, saved, saved + 2 * C));
	bn_desc_destroy(&d);
	if (bad || a->C == 0)
		return;
	bn_var_kernel<<<(unsigned)a->C, BN_VAR_THREADS, 0, starpu_cuda_get_local_stream()>>>(saved, PTR(0), a->N, a->C,
											       a->HW);
	DNN_CUDA_CHECK(cudaGetLastError());
	if (a->relu)
		bn_relu_inplace(PTR(3), nx);
}

// (R x, R gamma, R beta, R running, W y)
extern "C" void dnn_batchnorm_fwd_eval_cuda(void *buffers[], void *cl_arg)
{
	const dnn_batchnorm_args *a = (const dnn_batchnorm_args *)cl_arg;
	if (bf16_refused(a))
		return;
	size_t nx = (size_t)a->N * a->C * a->HW, C = (size_t)a->C;
	STARPU_ASSERT(NX(0) == nx && NX(1) == C && NX(2) == C && NX(3) == 2 * C && NX(4) == nx);
	const float *running = PTR(3);
	bn_desc d;
	if (bn_desc_create(&d, a) != 0)
		return;
	const float one = 1.0f, zero = 0.0f;
	const int bad = DNN_CUDA_FAILED(cudnnBatchNormalizationForwardInference(
		dnn_cudnn_handle(), CUDNN_BATCHNORM_SPATIAL, &one, &zero, d.x, PTR(0), d.x, PTR(4), d.bn,
		PTR(1), PTR(2), running, running + C, (double)a->eps));
	bn_desc_destroy(&d);
	if (bad)
		return;
	if (a->relu)
		bn_relu_inplace(PTR(4), nx);
}

// (R saved, RW running)
extern "C" void dnn_batchnorm_running_cuda(void *buffers[], void *cl_arg)
{
	const dnn_batchnorm_args *a = (const dnn_batchnorm_args *)cl_arg;
	STARPU_ASSERT(NX(0) == 3 * (size_t)a->C && NX(1) == 2 * (size_t)a->C);
	double M = (double)a->N * a->HW;
	float unbias = M > 1 ? (float)(M / (M - 1)) : 1.0f;
	bn_running_kernel<<<DNN_CUDA_BLOCKS(a->C), 256, 0, starpu_cuda_get_local_stream()>>>(
		PTR(1), PTR(0), a->C, a->momentum, unbias);
	DNN_CUDA_CHECK(cudaGetLastError());
}

// (R x, R gamma, R saved, R dy, W|RW dx, REDUX dgamma, REDUX dbeta): dgamma, dbeta +=
// fused ReLU (a->relu): dy is RW and masked in place by the relu's output y, buffer 7 (R y)
extern "C" void dnn_batchnorm_bwd_cuda(void *buffers[], void *cl_arg)
{
	const dnn_batchnorm_args *a = (const dnn_batchnorm_args *)cl_arg;
	if (bf16_refused(a))
		return;
	size_t nx = (size_t)a->N * a->C * a->HW, C = (size_t)a->C;
	STARPU_ASSERT(STARPU_TASK_GET_NBUFFERS(starpu_task_get_current()) == (a->relu ? 8 : 7));
	STARPU_ASSERT(NX(0) == nx && NX(1) == C && NX(2) == 3 * C && NX(3) == nx && NX(4) == nx &&
		      NX(5) == C && NX(6) == C);
	if (a->relu && nx > 0) {
		STARPU_ASSERT(NX(7) == nx);
		bn_relu_mask_kernel<<<DNN_CUDA_BLOCKS(nx), 256, 0, starpu_cuda_get_local_stream()>>>(PTR(3), PTR(7),
												     nx);
		DNN_CUDA_CHECK(cudaGetLastError());
	}
	const float *saved = PTR(2);
	bn_desc d;
	if (bn_desc_create(&d, a) != 0)
		return;
	const float one = 1.0f, beta_dx = a->accumulate_dx ? 1.0f : 0.0f;
	const int bad = DNN_CUDA_FAILED(cudnnBatchNormalizationBackward(
		dnn_cudnn_handle(), CUDNN_BATCHNORM_SPATIAL, &one, &beta_dx, &one, &one, d.x, PTR(0), d.x,
		PTR(3), d.x, PTR(4), d.bn, PTR(1), PTR(5), PTR(6), (double)a->eps, saved, saved + 2 * C));
	bn_desc_destroy(&d);
	if (bad)
		return;
}

/* ------------------------------------------------------------------ global statistics
 * (--batchnorm global; batchnorm.h has the formulas). Own kernels, one block per channel for the
 * sums, summed in double (so no row-centring is needed here: x^2 in double is exact). */
#define BN_SUM_THREADS 256

// sums (2C) += [sum x | sum x^2] of x (N, C, HW)
static __global__ void bn_sums_fwd_kernel(double *sums, const float *x, int N, int C, int HW)
{
	const int c = blockIdx.x;
	const size_t count = (size_t)N * HW;
	double a = 0, b = 0;
	for (size_t j = threadIdx.x; j < count; j += blockDim.x) {
		size_t n = j / (size_t)HW, i = j % (size_t)HW;
		double v = (double)x[(n * C + c) * (size_t)HW + i];
		a += v;
		b += v * v;
	}
	dnn_block_sum2<BN_SUM_THREADS>(&a, &b);
	if (threadIdx.x == 0)
		sums[c] += a, sums[C + c] += b;
}

// saved (3C) from the forward sums over M values (the CPU's global_stats)
static __global__ void bn_global_stats_kernel(float *saved, const double *sums, int C, double M, float eps)
{
	int c = blockIdx.x * blockDim.x + threadIdx.x;
	if (c < C) {
		double mean = sums[c] / M, var = sums[C + c] / M - mean * mean;
		if (var < 0)
			var = 0;
		saved[c] = (float)mean;
		saved[C + c] = (float)var;
		saved[2 * C + c] = (float)(1.0 / sqrt(var + (double)eps));
	}
}

// y = (x - mean) * gamma * invstd + beta, then max(y, 0) when relu
static __global__ void bn_normalise_kernel(float *y, const float *x, const float *gamma, const float *beta,
					   const float *saved, int C, int HW, size_t n, int relu)
{
	size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
	if (i < n) {
		int c = (int)((i / (size_t)HW) % (size_t)C);
		float t = dnn_bn_normalise(x[i], saved[c], gamma[c] * saved[2 * C + c], beta[c]);
		y[i] = relu ? dnn_act_relu(t) : t;
	}
}

// sums (2C) += [sum g | sum g (x - mean)], g = dy (masked by y > 0 when y); dgamma += invstd *
// sum g (x - mean), dbeta += sum g
static __global__ void bn_sums_bwd_kernel(double *sums, float *dgamma, float *dbeta, const float *x,
					  const float *saved, const float *dy, const float *y, int N, int C, int HW)
{
	const int c = blockIdx.x;
	const size_t count = (size_t)N * HW;
	const float mean = saved[c];
	double a = 0, b = 0;
	for (size_t j = threadIdx.x; j < count; j += blockDim.x) {
		size_t n = j / (size_t)HW, i = j % (size_t)HW, k = (n * C + c) * (size_t)HW + i;
		float g = y ? dnn_act_relu_grad(dy[k], y[k]) : dy[k];
		a += (double)g;
		b += (double)g * (double)(x[k] - mean);
	}
	dnn_block_sum2<BN_SUM_THREADS>(&a, &b);
	if (threadIdx.x == 0) {
		sums[c] += a, sums[C + c] += b;
		dbeta[c] += (float)a;
		dgamma[c] += (float)(b * (double)saved[2 * C + c]);
	}
}

// dx (=|+=) = k g + (x - mean) kx + k0 from the global backward sums (the CPU's bn_bwd_global)
static __global__ void bn_bwd_global_kernel(float *dx, const float *x, const float *gamma, const float *saved,
					    const float *dy, const float *y, const double *sums, int C, int HW, size_t n,
					    double M, int accumulate)
{
	size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
	if (i < n) {
		int c = (int)((i / (size_t)HW) % (size_t)C);
		const float mean = saved[c], invstd = saved[2 * C + c];
		float k, kx, k0;
		dnn_bn_dx_coefs(&k, &kx, &k0, gamma[c], invstd, (float)(sums[c] / M), (float)(sums[C + c] * (double)invstd / M));
		float g = y ? dnn_act_relu_grad(dy[i], y[i]) : dy[i];
		float v = dnn_bn_dx(g, x[i], mean, k, kx, k0);
		dx[i] = accumulate ? dx[i] + v : v;
	}
}

static __global__ void bn_dsum_add_kernel(double *dst, const double *src, size_t n)
{
	size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
	if (i < n)
		dst[i] += src[i];
}

#define DPTR(i) ((double *)STARPU_VECTOR_GET_PTR(buffers[i]))

// (R x, REDUX sums)
extern "C" void dnn_batchnorm_sums_fwd_cuda(void *buffers[], void *cl_arg)
{
	const dnn_batchnorm_args *a = (const dnn_batchnorm_args *)cl_arg;
	STARPU_ASSERT(NX(0) == (size_t)a->N * a->C * a->HW && NX(1) == 2 * (size_t)a->C);
	if (a->C == 0)
		return;
	bn_sums_fwd_kernel<<<(unsigned)a->C, BN_SUM_THREADS, 0, starpu_cuda_get_local_stream()>>>(DPTR(1), PTR(0), a->N,
												  a->C, a->HW);
	DNN_CUDA_CHECK(cudaGetLastError());
}

// (R x, R gamma, R beta, R sums, W y, W saved)
extern "C" void dnn_batchnorm_fwd_global_cuda(void *buffers[], void *cl_arg)
{
	const dnn_batchnorm_args *a = (const dnn_batchnorm_args *)cl_arg;
	if (bf16_refused(a))
		return;
	size_t nx = (size_t)a->N * a->C * a->HW, C = (size_t)a->C;
	STARPU_ASSERT(NX(0) == nx && NX(1) == C && NX(2) == C && NX(3) == 2 * C && NX(4) == nx && NX(5) == 3 * C);
	if (a->C == 0)
		return;
	cudaStream_t st = starpu_cuda_get_local_stream();
	bn_global_stats_kernel<<<DNN_CUDA_BLOCKS(C), 256, 0, st>>>(PTR(5), DPTR(3), a->C, (double)a->global_n * a->HW,
								   a->eps);
	DNN_CUDA_CHECK(cudaGetLastError());
	if (nx == 0)
		return;
	bn_normalise_kernel<<<DNN_CUDA_BLOCKS(nx), 256, 0, st>>>(PTR(4), PTR(0), PTR(1), PTR(2), PTR(5), a->C, a->HW, nx,
								 a->relu);
	DNN_CUDA_CHECK(cudaGetLastError());
}

// (R x, R saved, R dy, REDUX sums, REDUX dgamma, REDUX dbeta), + (R y) when a->relu
extern "C" void dnn_batchnorm_sums_bwd_cuda(void *buffers[], void *cl_arg)
{
	const dnn_batchnorm_args *a = (const dnn_batchnorm_args *)cl_arg;
	if (bf16_refused(a))
		return;
	size_t nx = (size_t)a->N * a->C * a->HW, C = (size_t)a->C;
	STARPU_ASSERT(NX(0) == nx && NX(1) == 3 * C && NX(2) == nx && NX(3) == 2 * C && NX(4) == C && NX(5) == C);
	STARPU_ASSERT(!a->relu || NX(6) == nx);
	if (a->C == 0)
		return;
	bn_sums_bwd_kernel<<<(unsigned)a->C, BN_SUM_THREADS, 0, starpu_cuda_get_local_stream()>>>(
		DPTR(3), PTR(4), PTR(5), PTR(0), PTR(1), PTR(2), a->relu ? PTR(6) : NULL, a->N, a->C, a->HW);
	DNN_CUDA_CHECK(cudaGetLastError());
}

// (R x, R gamma, R saved, R dy, R sums, W|RW dx), + (R y) when a->relu
extern "C" void dnn_batchnorm_bwd_global_cuda(void *buffers[], void *cl_arg)
{
	const dnn_batchnorm_args *a = (const dnn_batchnorm_args *)cl_arg;
	if (bf16_refused(a))
		return;
	size_t nx = (size_t)a->N * a->C * a->HW, C = (size_t)a->C;
	STARPU_ASSERT(NX(0) == nx && NX(1) == C && NX(2) == 3 * C && NX(3) == nx && NX(4) == 2 * C && NX(5) == nx);
	STARPU_ASSERT(!a->relu || NX(6) == nx);
	if (nx == 0)
		return;
	bn_bwd_global_kernel<<<DNN_CUDA_BLOCKS(nx), 256, 0, starpu_cuda_get_local_stream()>>>(
		PTR(5), PTR(0), PTR(1), PTR(2), PTR(3), a->relu ? PTR(6) : NULL, DPTR(4), a->C, a->HW, nx,
		(double)a->global_n * a->HW, a->accumulate_dx);
	DNN_CUDA_CHECK(cudaGetLastError());
}

// (W dst)
extern "C" void dnn_bn_dsum_zero_cuda(void *buffers[], void *cl_arg)
{
	(void)cl_arg;
	DNN_CUDA_CHECK(cudaMemsetAsync(DPTR(0), 0, NX(0) * sizeof(double), starpu_cuda_get_local_stream()));
}

// (RW dst, R src): dst += src
extern "C" void dnn_bn_dsum_add_cuda(void *buffers[], void *cl_arg)
{
	(void)cl_arg;
	size_t n = NX(0);
	STARPU_ASSERT(NX(1) == n);
	if (n == 0)
		return;
	bn_dsum_add_kernel<<<DNN_CUDA_BLOCKS(n), 256, 0, starpu_cuda_get_local_stream()>>>(DPTR(0), DPTR(1), n);
	DNN_CUDA_CHECK(cudaGetLastError());
}
#undef DPTR
