/* optim.cu — CUDA side of the fused update (SGD with momentum, LARS, AdamW, LAMB: the formulas in optim.h). */
#include <starpu.h>

#include "cuda_reduce.cuh"
#include "dnn_cuda.h"

extern "C" {
#include "optim.h"
}
#include "optim_formulas.h" /* the element updates, shared with optim.c */

// w (n), v (n), grad (n): g = grad*scale + wd*w; v = mom*v + g; w -= lr*v
static __global__ void sgd_update_kernel(float *w, float *v, float *grad, float *delta, size_t n, float lr, float mom, float wd,
					 float scale, const float *clip, int keep_grad)
{
	size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
	if (i < n) {
		if (clip)
			scale *= clip[0];
		const float di = dnn_optim_sgd(&w[i], &v[i], grad[i], lr, mom, wd, scale);
		if (delta)
			delta[i] = di;
		if (!keep_grad)
			grad[i] = 0.0f;
	}
}

/* LARS's norms: each of LARS_BLOCKS blocks sums its strided share of w^2 and (grad*scale)^2 into
 * part[2*b], part[2*b+1] (fixed order: the result does not depend on scheduling). */
#define LARS_BLOCKS 128
#define LARS_THREADS 256
static __global__ void lars_norms_kernel(const float *w, const float *grad, size_t n, float scale, const float *clip,
					 double *part)
{
	double aw = 0, ag = 0;
	if (clip)
		scale *= clip[0];
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
		double g = (double)(grad[i] * scale);
		aw += (double)w[i] * (double)w[i], ag += g * g;
	}
	dnn_block_sum2<LARS_THREADS>(&aw, &ag);
	if (threadIdx.x == 0)
		part[2 * blockIdx.x] = aw, part[2 * blockIdx.x + 1] = ag;
}

// One thread: the partial sums in order -> part[0] := lr * lambda (optim.h).
static __global__ void lars_rate_kernel(double *part, int nparts, float lr, float trust, float wd)
{
	double ww = 0, gg = 0;
	for (int b = 0; b < nparts; b++)
		ww += part[2 * b], gg += part[2 * b + 1];
	part[0] = (double)lr * dnn_optim_lars_lambda(ww, gg, trust, wd);
}

// rate_p NULL: the rate is lr (lambda = 1, no trust ratio)
static __global__ void lars_update_kernel(float *w, float *v, float *grad, float *delta, size_t n, const double *rate_p,
					  float lr, float mom, float wd, float scale, const float *clip, int keep_grad)
{
	size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
	if (i < n) {
		if (clip)
			scale *= clip[0];
		const float rate = rate_p ? (float)rate_p[0] : lr;
		const float di = dnn_optim_lars(&w[i], &v[i], grad[i], rate, mom, wd, scale);
		if (delta)
			delta[i] = di;
		if (!keep_grad)
			grad[i] = 0.0f;
	}
}

static __global__ void adamw_kernel(float *w, float *m, float *s, float *grad, float *delta, size_t n, dnn_optim_args a,
				    const float *clip)
{
	size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
	if (i < n) {
		if (clip)
			a.scale *= clip[0];
		float step, sq2, decay;
		dnn_optim_adamw_consts(&step, &sq2, &decay, a.lr, a.weight_decay, a.bc1, a.bc2);
		const float di = dnn_optim_adamw(&w[i], &m[i], &s[i], grad[i], a.scale, a.beta1, a.beta2, step, sq2, decay, a.eps);
		if (delta)
			delta[i] = di;
		if (!a.keep_grad)
			grad[i] = 0.0f;
	}
}

/* LAMB, pass 1: the moments, and each of LARS_BLOCKS blocks sums its strided share of w^2 and u^2
 * into part[2*b], part[2*b+1] (fixed order, as LARS's norms). */
static __global__ void lamb_moments_kernel(const float *w, float *m, float *s, const float *grad, size_t n, dnn_optim_args a,
					   const float *clip, double *part)
{
	if (clip)
		a.scale *= clip[0];
	const float inv_bc1 = 1.0f / a.bc1, inv_bc2 = 1.0f / a.bc2;
	double aw = 0, au = 0;
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
		dnn_optim_moments(&m[i], &s[i], grad[i] * a.scale, a.beta1, a.beta2);
		double u = (double)dnn_optim_lamb_dir(m[i], s[i], w[i], inv_bc1, inv_bc2, a.eps, a.weight_decay);
		aw += (double)w[i] * (double)w[i], au += u * u;
	}
	dnn_block_sum2<LARS_THREADS>(&aw, &au);
	if (threadIdx.x == 0)
		part[2 * blockIdx.x] = aw, part[2 * blockIdx.x + 1] = au;
}

// One thread: the partial sums in order -> part[0] := lr * trust ratio (optim.h).
static __global__ void lamb_rate_kernel(double *part, int nparts, float lr, int layerwise)
{
	double ww = 0, uu = 0;
	for (int b = 0; b < nparts; b++)
		ww += part[2 * b], uu += part[2 * b + 1];
	part[0] = (double)lr * dnn_optim_lamb_ratio(ww, uu, layerwise);
}

// Pass 2: the step along u, recomputed from the moments pass 1 wrote.
static __global__ void lamb_update_kernel(float *w, const float *m, const float *s, float *grad, float *delta, size_t n,
					  const double *rate_p, dnn_optim_args a)
{
	size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
	if (i < n) {
		const float rate = (float)rate_p[0], inv_bc1 = 1.0f / a.bc1, inv_bc2 = 1.0f / a.bc2;
		const float di = dnn_optim_lamb(&w[i], m[i], s[i], rate, inv_bc1, inv_bc2, a.eps, a.weight_decay);
		if (delta)
			delta[i] = di;
		if (!a.keep_grad)
			grad[i] = 0.0f;
	}
}

static void lamb_update(float *w, float *v, float *grad, float *delta, size_t n, const dnn_optim_args *a, const float *clip)
{
	cudaStream_t st = starpu_cuda_get_local_stream();
	double *part = NULL;
	DNN_CUDA_CHECK(cudaMallocAsync((void **)&part, 2 * LARS_BLOCKS * sizeof(double), st));
	lamb_moments_kernel<<<LARS_BLOCKS, LARS_THREADS, 0, st>>>(w, v, v + n, grad, n, *a, clip, part);
	lamb_rate_kernel<<<1, 1, 0, st>>>(part, LARS_BLOCKS, a->lr, a->layerwise);
	lamb_update_kernel<<<DNN_CUDA_BLOCKS(n), 256, 0, st>>>(w, v, v + n, grad, delta, n, part, *a);
	DNN_CUDA_CHECK(cudaFreeAsync(part, st));
}

static void lars_update(float *w, float *v, float *grad, float *delta, size_t n, const dnn_optim_args *a, const float *clip)
{
	cudaStream_t st = starpu_cuda_get_local_stream();
	if (!a->layerwise) { // biases, batch norm: no trust ratio
		lars_update_kernel<<<DNN_CUDA_BLOCKS(n), 256, 0, st>>>(w, v, grad, delta, n, NULL, a->lr, a->momentum,
								     a->weight_decay, a->scale, clip, a->keep_grad);
		return;
	}
	double *part = NULL;
	DNN_CUDA_CHECK(cudaMallocAsync((void **)&part, 2 * LARS_BLOCKS * sizeof(double), st));
	lars_norms_kernel<<<LARS_BLOCKS, LARS_THREADS, 0, st>>>(w, grad, n, a->scale, clip, part);
	lars_rate_kernel<<<1, 1, 0, st>>>(part, LARS_BLOCKS, a->lr, a->trust, a->weight_decay);
	lars_update_kernel<<<DNN_CUDA_BLOCKS(n), 256, 0, st>>>(w, v, grad, delta, n, part, a->lr, a->momentum,
							     a->weight_decay, a->scale, clip, a->keep_grad);
	DNN_CUDA_CHECK(cudaFreeAsync(part, st));
}

extern "C" void dnn_optim_update_cuda(void *buffers[], void *cl_arg)
{
	const dnn_optim_args *a = (const dnn_optim_args *)cl_arg;
	size_t n = (size_t)a->n;
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[0]) == n);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[1]) == n * (size_t)dnn_optimizer_state_mult((dnn_optimizer)a->optimizer));
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[2]) == n);
	float *w = (float *)STARPU_VECTOR_GET_PTR(buffers[0]);
	float *v = (float *)STARPU_VECTOR_GET_PTR(buffers[1]);
	float *grad = (float *)STARPU_VECTOR_GET_PTR(buffers[2]);
	float *delta = NULL;
	if (a->write_delta) {
		STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[3]) == n);
		delta = (float *)STARPU_VECTOR_GET_PTR(buffers[3]);
	}
	const float *clip = NULL; /* the global clipping coefficient, in device memory (optim.h) */
	if (a->clip) {
		const int k = 3 + (a->write_delta != 0);
		STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[k]) == 1);
		clip = (const float *)STARPU_VECTOR_GET_PTR(buffers[k]);
	}
	if (n == 0)
		return;
	cudaStream_t st = starpu_cuda_get_local_stream();
	if (a->optimizer == DNN_OPT_LARS)
		lars_update(w, v, grad, delta, n, a, clip);
	else if (a->optimizer == DNN_OPT_ADAMW)
		adamw_kernel<<<DNN_CUDA_BLOCKS(n), 256, 0, st>>>(w, v, v + n, grad, delta, n, *a, clip);
	else if (a->optimizer == DNN_OPT_LAMB)
		lamb_update(w, v, grad, delta, n, a, clip);
	else
		sgd_update_kernel<<<DNN_CUDA_BLOCKS(n), 256, 0, st>>>(w, v, grad, delta, n, a->lr, a->momentum,
								      a->weight_decay, a->scale, clip, a->keep_grad);
	DNN_CUDA_CHECK(cudaGetLastError());
}
