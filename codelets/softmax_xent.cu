/* softmax_xent.cu — CUDA side of softmax + cross-entropy: one block per row.
 *
 * Each block reduces its row's max (with the lowest index on ties) and sum of exp(l - max) in
 * shared memory, writes softmax - onehot, and adds its loss and correctness into the 2-float
 * stats buffer with atomics (the buffer is zeroed on the stream first).
 */
#include <math.h>
#include <starpu.h>
#include <stdint.h>

#include "dnn_cuda.h"

extern "C" {
#include "softmax_xent.h"
}

#define XENT_THREADS 256

// dlogits (N T,CLS), stats (2) +=, logits (N T,CLS), labels (N T); grid = N T blocks of XENT_THREADS
static __global__ void softmax_xent_kernel(float *dlogits, float *stats, const float *logits, const int32_t *labels,
					   int CLS, float scale)
{
	__shared__ float s_val[XENT_THREADS];
	__shared__ int s_idx[XENT_THREADS];
	const float *l = logits + (size_t)blockIdx.x * CLS;
	float *d = dlogits + (size_t)blockIdx.x * CLS;
	unsigned t = threadIdx.x;

	// 1. max and argmax; strict > keeps each thread's lowest index, the tree prefers lower indices
	float best = -INFINITY;
	int best_i = CLS;
	for (int j = (int)t; j < CLS; j += blockDim.x)
		if (best_i == CLS || l[j] > best) {
			best = l[j];
			best_i = j;
		}
	s_val[t] = best;
	s_idx[t] = best_i;
	__syncthreads();
	for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
		if (t < s) {
			float v = s_val[t + s];
			int i = s_idx[t + s];
			if (i < CLS && (s_idx[t] == CLS || v > s_val[t] || (v == s_val[t] && i < s_idx[t]))) {
				s_val[t] = v;
				s_idx[t] = i;
			}
		}
		__syncthreads();
	}
	float maxv = s_val[0];
	int argmax = s_idx[0];
	__syncthreads(); // everyone has read s_val[0] before it is reused

	// 2. sum of exp(l - max)
	float sum = 0.0f;
	for (int j = (int)t; j < CLS; j += blockDim.x)
		sum += expf(l[j] - maxv);
	s_val[t] = sum;
	__syncthreads();
	for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
		if (t < s)
			s_val[t] += s_val[t + s];
		__syncthreads();
	}
	sum = s_val[0];

	// 3. gradient and stats; an out-of-range label poisons the loss with NaN
	int label = labels[blockIdx.x];
	bool valid = label >= 0 && label < CLS;
	float inv = 1.0f / sum;
	for (int j = (int)t; j < CLS; j += blockDim.x)
		d[j] = (expf(l[j] - maxv) * inv - (j == label ? 1.0f : 0.0f)) * scale;
	if (t == 0) {
		float loss = valid ? logf(sum) - (l[label] - maxv) : nanf("");
		atomicAdd(&stats[0], loss * scale);
		atomicAdd(&stats[1], argmax == label ? scale : 0.0f);
	}
}

extern "C" void dnn_softmax_xent_cuda(void *buffers[], void *cl_arg)
{
	const dnn_softmax_xent_args *a = (const dnn_softmax_xent_args *)cl_arg;
	const size_t rows = (size_t)a->N * a->T;
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[0]) == rows * a->CLS);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[1]) == rows);
	STARPU_ASSERT(STARPU_VECTOR_GET_ELEMSIZE(buffers[1]) == sizeof(int32_t));
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[2]) == rows * a->CLS);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[3]) == 2);
	const float *logits = (const float *)STARPU_VECTOR_GET_PTR(buffers[0]);   // (N,CLS)
	const int32_t *labels = (const int32_t *)STARPU_VECTOR_GET_PTR(buffers[1]); // (N)
	float *dlogits = (float *)STARPU_VECTOR_GET_PTR(buffers[2]);               // (N,CLS)
	float *stats = (float *)STARPU_VECTOR_GET_PTR(buffers[3]);                 // (2)
	cudaStream_t stream = starpu_cuda_get_local_stream();
	DNN_CUDA_CHECK(cudaMemsetAsync(stats, 0, 2 * sizeof(float), stream));
	if (rows == 0 || a->CLS == 0)
		return;
	// one block per row; each row's terms are scaled by 1/T (the mean over a sample's tokens)
	softmax_xent_kernel<<<(unsigned)rows, XENT_THREADS, 0, stream>>>(dlogits, stats, logits, labels, a->CLS,
									   1.0f / (float)a->T);
	DNN_CUDA_CHECK(cudaGetLastError());
}
