/* batchnorm.cu — CUDA side of batch normalisation: cuDNN spatial batch norm on the worker's stream.
 *
 * x is described to cuDNN as (N, C, HW, 1). cuDNN saves the batch mean and invstd =
 * 1/sqrt(biased var + eps); a small kernel fills the middle third of `saved` with the biased var
 * (1/invstd^2 - eps). The running statistics are updated by our own kernel (cuDNN's running
 * update is not used), so CPU and GPU follow the same formula.
 */
#include <starpu.h>

#include "dnn_cuda.h"

extern "C" {
#include "batchnorm.h"
}

struct bn_desc {
	cudnnTensorDescriptor_t x;  // (N, C, HW, 1)
	cudnnTensorDescriptor_t bn; // (1, C, 1, 1)
};

static void bn_desc_create(bn_desc *d, const dnn_batchnorm_args *a)
{
	DNN_CUDNN_CHECK(cudnnCreateTensorDescriptor(&d->x));
	DNN_CUDNN_CHECK(cudnnCreateTensorDescriptor(&d->bn));
	DNN_CUDNN_CHECK(cudnnSetTensor4dDescriptor(d->x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, a->N, a->C,
						   a->HW, 1));
	DNN_CUDNN_CHECK(cudnnDeriveBNTensorDescriptor(d->bn, d->x, CUDNN_BATCHNORM_SPATIAL));
}

static void bn_desc_destroy(bn_desc *d)
{
	DNN_CUDNN_CHECK(cudnnDestroyTensorDescriptor(d->bn));
	DNN_CUDNN_CHECK(cudnnDestroyTensorDescriptor(d->x));
}

// saved (3C): var[c] = 1 / invstd[c]^2 - eps, clamped at 0
static __global__ void bn_saved_var_kernel(float *saved, int C, float eps)
{
	int c = blockIdx.x * blockDim.x + threadIdx.x;
	if (c < C) {
		float invstd = saved[2 * C + c];
		saved[C + c] = fmaxf(1.0f / (invstd * invstd) - eps, 0.0f);
	}
}

// running (2C) = (1 - mom) * running + mom * [mean | var * unbias]; saved (3C)
static __global__ void bn_running_kernel(float *running, const float *saved, int C, float mom,
					 float unbias)
{
	int c = blockIdx.x * blockDim.x + threadIdx.x;
	if (c < C) {
		running[c] = (1.0f - mom) * running[c] + mom * saved[c];
		running[C + c] = (1.0f - mom) * running[C + c] + mom * saved[C + c] * unbias;
	}
}

// y (n) = max(y, 0): the fused ReLU after the normalisation
static __global__ void bn_relu_inplace_kernel(float *y, size_t n)
{
	size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
	if (i < n)
		y[i] = y[i] > 0.0f ? y[i] : 0.0f;
}

// dy (n) = dy * (y > 0): the fused ReLU's backward, in place before the BN backward
static __global__ void bn_relu_mask_kernel(float *dy, const float *y, size_t n)
{
	size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
	if (i < n)
		dy[i] = y[i] > 0.0f ? dy[i] : 0.0f;
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
extern "C" void dnn_batchnorm_fwd_train_cuda(void *buffers[], void *cl_arg)
{
	const dnn_batchnorm_args *a = (const dnn_batchnorm_args *)cl_arg;
	size_t nx = (size_t)a->N * a->C * a->HW, C = (size_t)a->C;
	STARPU_ASSERT(NX(0) == nx && NX(1) == C && NX(2) == C && NX(3) == nx && NX(4) == 3 * C);
	float *saved = PTR(4);
	bn_desc d;
	bn_desc_create(&d, a);
	const float one = 1.0f, zero = 0.0f;
	DNN_CUDNN_CHECK(cudnnBatchNormalizationForwardTraining(
		dnn_cudnn_handle(), CUDNN_BATCHNORM_SPATIAL, &one, &zero, d.x, PTR(0), d.x, PTR(3), d.bn,
		PTR(1), PTR(2), 0.0, NULL, NULL, (double)a->eps, saved, saved + 2 * C));
	bn_desc_destroy(&d);
	bn_saved_var_kernel<<<DNN_CUDA_BLOCKS(a->C), 256, 0, starpu_cuda_get_local_stream()>>>(saved, a->C,
											      a->eps);
	DNN_CUDA_CHECK(cudaGetLastError());
	if (a->relu)
		bn_relu_inplace(PTR(3), nx);
}

// (R x, R gamma, R beta, R running, W y)
extern "C" void dnn_batchnorm_fwd_eval_cuda(void *buffers[], void *cl_arg)
{
	const dnn_batchnorm_args *a = (const dnn_batchnorm_args *)cl_arg;
	size_t nx = (size_t)a->N * a->C * a->HW, C = (size_t)a->C;
	STARPU_ASSERT(NX(0) == nx && NX(1) == C && NX(2) == C && NX(3) == 2 * C && NX(4) == nx);
	const float *running = PTR(3);
	bn_desc d;
	bn_desc_create(&d, a);
	const float one = 1.0f, zero = 0.0f;
	DNN_CUDNN_CHECK(cudnnBatchNormalizationForwardInference(
		dnn_cudnn_handle(), CUDNN_BATCHNORM_SPATIAL, &one, &zero, d.x, PTR(0), d.x, PTR(4), d.bn,
		PTR(1), PTR(2), running, running + C, (double)a->eps));
	bn_desc_destroy(&d);
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
	bn_desc_create(&d, a);
	const float one = 1.0f, beta_dx = a->accumulate_dx ? 1.0f : 0.0f;
	DNN_CUDNN_CHECK(cudnnBatchNormalizationBackward(
		dnn_cudnn_handle(), CUDNN_BATCHNORM_SPATIAL, &one, &beta_dx, &one, &one, d.x, PTR(0), d.x,
		PTR(3), d.x, PTR(4), d.bn, PTR(1), PTR(5), PTR(6), (double)a->eps, saved, saved + 2 * C));
	bn_desc_destroy(&d);
}
