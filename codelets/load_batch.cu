/* load_batch.cu — the CUDA form of the input-loading task (see load_batch.h): the samples are
 * gathered on the host into the worker's pinned staging block (dnn_staging.h), copied on the
 * worker's stream, and normalised into x (and the labels into y) by one kernel. */
#include <starpu.h>
#include <stdint.h>

#include "dnn_cuda.h"
#include "dnn_staging.h"

extern "C" {
#include "load_batch.h"
}

/* Staging layout: labels (n int32), scale (C), shift (C), then the pixels (n, C, HW) at a
 * 16-byte boundary. */
static size_t align16(size_t b) { return (b + 15) & ~(size_t)15; }

// x (n, C, HW) = px * scale[c] - shift[c], rounded as the CPU kernel (no fused multiply-add); y = labels
static __global__ void load_batch_kernel(float *x, int32_t *y, const uint8_t *px, const int32_t *labels,
					 const float *scale, const float *shift, int C, int HW, int n, size_t total)
{
	size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
	if (i < (size_t)n)
		y[i] = labels[i];
	if (i < total) {
		const int c = (int)((i / (size_t)HW) % (size_t)C);
		x[i] = __fsub_rn(__fmul_rn((float)px[i], scale[c]), shift[c]);
	}
}

extern "C" void dnn_load_batch_cuda(void *buffers[], void *cl_arg)
{
	const dnn_load_batch_args *a = (const dnn_load_batch_args *)cl_arg;
	const size_t total = (size_t)a->n * a->C * a->HW;
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[0]) == total);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[1]) == (size_t)a->n);
	float *x = (float *)STARPU_VECTOR_GET_PTR(buffers[0]);
	int32_t *y = (int32_t *)STARPU_VECTOR_GET_PTR(buffers[1]);
	if (a->n == 0)
		return;
	const size_t off_scale = sizeof(int32_t) * (size_t)a->n, off_shift = off_scale + sizeof(float) * (size_t)a->C;
	const size_t off_px = align16(off_shift + sizeof(float) * (size_t)a->C), bytes = off_px + total;
	void *host, *dev;
	if (dnn_cuda_staging(bytes, &host, &dev, "load_batch") != 0)
		return;
	char *h = (char *)host, *d = (char *)dev;
	dnn_load_batch_stage((uint8_t *)(h + off_px), (int32_t *)h, (float *)(h + off_scale), (float *)(h + off_shift), a);
	cudaStream_t st = starpu_cuda_get_local_stream();
	if (dnn_cuda_staging_upload(bytes, "load_batch") != 0)
		return;
	load_batch_kernel<<<DNN_CUDA_BLOCKS(total), 256, 0, st>>>(x, y, (const uint8_t *)(d + off_px), (const int32_t *)d,
								  (const float *)(d + off_scale),
								  (const float *)(d + off_shift), a->C, a->HW, a->n, total);
	cudaError_t e = cudaGetLastError();
	if (e != cudaSuccess)
		dnn_worker_error("load_batch: kernel launch: %s", cudaGetErrorString(e));
}
