/* cuda_reduce.cuh — the block-wide sum the .cu kernels share (include from .cu files only).
 *
 * dnn_block_sum2<NT>(&a, &b): every thread of the block passes its partial sums a and b and gets
 * back the block's totals. The order is fixed (a shared-memory tree: thread t adds thread t + s's
 * value for s = blockDim.x / 2, ..., 2, 1), so a result never depends on scheduling, and the GPU
 * kernels that promise the CPU's formulas (batchnorm.cu, optim.cu) sum the same way run after run.
 * Every thread of the block must call it (it synchronises), once per kernel (its two NT-double
 * shared arrays are reused by nothing else); blockDim.x must be a power of two and at most NT.
 */
#ifndef DNN_CUDA_REDUCE_CUH
#define DNN_CUDA_REDUCE_CUH

template <unsigned NT> static __device__ void dnn_block_sum2(double *a, double *b)
{
	__shared__ double sa[NT], sb[NT];
	sa[threadIdx.x] = *a, sb[threadIdx.x] = *b;
	__syncthreads();
	for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
		if (threadIdx.x < s)
			sa[threadIdx.x] += sa[threadIdx.x + s], sb[threadIdx.x] += sb[threadIdx.x + s];
		__syncthreads();
	}
	*a = sa[0], *b = sb[0];
}

#endif
