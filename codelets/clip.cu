/* clip.cu — CUDA side of the gradient-norm clipping codelets (clip.h: the order of the sums, which
 * clip.c's CPU kernel reproduces bit for bit). */
#include <starpu.h>

#include "dnn_cuda.h"

extern "C" {
#include "clip.h"
}

/* Thread t of block b: its strided share of (grad * scale)^2; the block's tree (the one of
 * cuda_reduce.cuh, for one value) into part[b]. */
static __global__ void sumsq_blocks_kernel(const float *grad, size_t n, float scale, double *part)
{
	__shared__ double s[DNN_SUMSQ_THREADS];
	double acc = 0;
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
		const double g = (double)(grad[i] * scale);
		acc += g * g;
	}
	s[threadIdx.x] = acc;
	__syncthreads();
	for (unsigned h = blockDim.x / 2; h > 0; h >>= 1) {
		if (threadIdx.x < h)
			s[threadIdx.x] += s[threadIdx.x + h];
		__syncthreads();
	}
	if (threadIdx.x == 0)
		part[blockIdx.x] = s[0];
}

// One thread: the blocks' sums in block order.
static __global__ void sumsq_total_kernel(double *out, const double *part, int nparts)
{
	double t = 0;
	for (int b = 0; b < nparts; b++)
		t += part[b];
	out[0] = t;
}

/* buffers: (W out: 1 double, R grad: n floats) */
extern "C" void dnn_grad_sumsq_cuda(void *buffers[], void *cl_arg)
{
	const dnn_sumsq_args *a = (const dnn_sumsq_args *)cl_arg;
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[0]) == 1);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[1]) == (size_t)a->n);
	double *out = (double *)STARPU_VECTOR_GET_PTR(buffers[0]);
	const float *grad = (const float *)STARPU_VECTOR_GET_PTR(buffers[1]);
	cudaStream_t st = starpu_cuda_get_local_stream();
	double *part = NULL;
	DNN_CUDA_CHECK(cudaMallocAsync((void **)&part, DNN_SUMSQ_BLOCKS * sizeof(double), st));
	/* every block writes its part, even past the tensor's end (0): a tensor of any size has the
	 * grid of clip.h, which the CPU kernel reproduces */
	sumsq_blocks_kernel<<<DNN_SUMSQ_BLOCKS, DNN_SUMSQ_THREADS, 0, st>>>(grad, (size_t)a->n, a->scale, part);
	DNN_CUDA_CHECK(cudaGetLastError());
	sumsq_total_kernel<<<1, 1, 0, st>>>(out, part, DNN_SUMSQ_BLOCKS);
	DNN_CUDA_CHECK(cudaGetLastError());
	DNN_CUDA_CHECK(cudaFreeAsync(part, st));
}

/* Up to CLIP_PER_LAUNCH sums' device pointers, by value (a kernel argument of 520 bytes). */
#define CLIP_PER_LAUNCH 64
typedef struct {
	const double *p[CLIP_PER_LAUNCH];
	int n;
} clip_ptrs;

/* One thread: norm[0] (0 first) += the sums in order; the last launch then takes the root and
 * the coefficient (clip.h: dnn_clip_finish). */
static __global__ void clip_sum_kernel(float *coef, double *norm, clip_ptrs s, int first, int last, float max_norm)
{
	double t = first ? 0.0 : norm[0];
	for (int i = 0; i < s.n; i++)
		t += s.p[i][0];
	norm[0] = t;
	if (last)
		dnn_clip_finish(coef, norm, t, max_norm);
}

/* buffers: (W coef: 1 float, W norm: 1 double, R sumsq[0..nparams): 1 double each). The sums are
 * added in parameter order, as the CPU task adds them (0 + s0 + s1 + ...), CLIP_PER_LAUNCH per
 * launch on the worker's stream (one launch up to 64 tensors, three for ResNet-50's 161). */
extern "C" void dnn_clip_coef_cuda(void *buffers[], void *cl_arg)
{
	const dnn_clip_args *a = (const dnn_clip_args *)cl_arg;
	float *coef = (float *)STARPU_VECTOR_GET_PTR(buffers[0]);
	double *norm = (double *)STARPU_VECTOR_GET_PTR(buffers[1]);
	cudaStream_t st = starpu_cuda_get_local_stream();
	int i = 0;
	do {
		clip_ptrs s;
		s.n = 0;
		for (; i < a->nparams && s.n < CLIP_PER_LAUNCH; i++, s.n++) {
			STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[2 + i]) == 1);
			s.p[s.n] = (const double *)STARPU_VECTOR_GET_PTR(buffers[2 + i]);
		}
		clip_sum_kernel<<<1, 1, 0, st>>>(coef, norm, s, i == s.n, i == a->nparams, a->max_norm);
		DNN_CUDA_CHECK(cudaGetLastError());
	} while (i < a->nparams);
}
