/* load_images.cu — the CUDA form of the image-file loading task (see load_images.h): files are
 * decoded, resized and cropped (unflipped) on the host into the worker's pinned staging block
 * (dnn_load_images_stage, dnn_staging.h), copied on the worker's stream, and one kernel mirrors
 * the samples that augmentation flips, substitutes unreadable ones and normalises into x. */
#include <starpu.h>
#include <stdint.h>

#include "dnn_cuda.h"
#include "dnn_staging.h"

extern "C" {
#include "load_images.h"
}

/* Staging layout: labels (n int32), map (n int32), scale (C), shift (C), then the crops
 * (n, C, H, W floats) at a 16-byte boundary. */
static size_t align16(size_t b) { return (b + 15) & ~(size_t)15; }

// x[i] = sample map[i] >> 1 of raw, mirrored when map[i] & 1, * scale[c] - shift[c] (rounded as the
// CPU kernel: no fused multiply-add); map[i] < 0: zeros. y = labels.
static __global__ void load_images_kernel(float *x, int32_t *y, const float *raw, const int32_t *labels,
					  const int32_t *map, const float *scale, const float *shift, int C, int H,
					  int W, int n, size_t total)
{
	size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
	if (i < (size_t)n)
		y[i] = labels[i];
	if (i >= total)
		return;
	const size_t HW = (size_t)H * W, per = (size_t)C * HW;
	const size_t s = i / per, r = i % per;
	const int c = (int)(r / HW), yy = (int)(r % HW / W), xx = (int)(r % W);
	const int32_t m = map[s];
	if (m < 0) {
		x[i] = 0.0f;
		return;
	}
	const int src = m >> 1, sx = (m & 1) ? W - 1 - xx : xx;
	const float v = raw[(size_t)src * per + (size_t)c * HW + (size_t)yy * W + sx];
	x[i] = __fsub_rn(__fmul_rn(v, scale[c]), shift[c]);
}

extern "C" void dnn_load_images_cuda(void *buffers[], void *cl_arg)
{
	const dnn_load_images_args *a = (const dnn_load_images_args *)cl_arg;
	const size_t total = (size_t)a->n * a->C * a->H * a->W;
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[0]) == total);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[1]) == (size_t)a->n);
	float *x = (float *)STARPU_VECTOR_GET_PTR(buffers[0]);
	int32_t *y = (int32_t *)STARPU_VECTOR_GET_PTR(buffers[1]);
	if (a->n == 0)
		return;
	const size_t off_map = sizeof(int32_t) * (size_t)a->n, off_scale = 2 * off_map;
	const size_t off_shift = off_scale + sizeof(float) * (size_t)a->C;
	const size_t off_raw = align16(off_shift + sizeof(float) * (size_t)a->C), bytes = off_raw + sizeof(float) * total;
	void *host, *dev;
	if (dnn_cuda_staging(bytes, &host, &dev, "load_images") != 0)
		return;
	char *h = (char *)host, *d = (char *)dev;
	dnn_load_images_stage((float *)(h + off_raw), (int32_t *)h, (int32_t *)(h + off_map), (float *)(h + off_scale),
			      (float *)(h + off_shift), a);
	cudaStream_t st = starpu_cuda_get_local_stream();
	if (dnn_cuda_staging_upload(bytes, "load_images") != 0)
		return;
	load_images_kernel<<<DNN_CUDA_BLOCKS(total), 256, 0, st>>>(
		x, y, (const float *)(d + off_raw), (const int32_t *)d, (const int32_t *)(d + off_map),
		(const float *)(d + off_scale), (const float *)(d + off_shift), a->C, a->H, a->W, a->n, total);
	cudaError_t e = cudaGetLastError();
	if (e != cudaSuccess)
		dnn_worker_error("load_images: kernel launch: %s", cudaGetErrorString(e));
}
