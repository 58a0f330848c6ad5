/* dnn_staging.cu — per-CUDA-worker pinned staging blocks (see dnn_staging.h). */
#include <starpu.h>

#include "dnn_cuda.h"
#include "dnn_staging.h"

extern "C" {
#include "dnn_codelet.h"
}

typedef struct {
	void *host, *dev;
	size_t bytes;
	unsigned dev_node; /* the StarPU memory node the device block was allocated on */
	cudaEvent_t copied; /* recorded after the last copy out of host */
	int pending;
} staging;

static staging stages[STARPU_NMAXWORKERS];

/* Waits for the copy queued by the worker's previous task. */
static int wait_copy(staging *s, const char *what)
{
	if (!s->pending)
		return 0;
	cudaError_t e = cudaEventSynchronize(s->copied);
	s->pending = 0;
	if (e != cudaSuccess) {
		dnn_worker_error("%s: waiting for the staging copy: %s", what, cudaGetErrorString(e));
		return -1;
	}
	return 0;
}

extern "C" int dnn_cuda_staging(size_t bytes, void **host, void **dev, const char *what)
{
	staging *s = &stages[starpu_worker_get_id_check()];
	if (wait_copy(s, what) != 0)
		return -1;
	if (bytes > s->bytes) {
		size_t want = bytes + bytes / 2;
		cudaError_t e = cudaSuccess;
		if (s->dev) /* a kernel queued by an earlier task may still read it */
			e = cudaStreamSynchronize(starpu_cuda_get_local_stream());
		if (e == cudaSuccess && s->dev)
			starpu_free_on_node(s->dev_node, (uintptr_t)s->dev, s->bytes);
		if (e == cudaSuccess && s->host)
			e = cudaFreeHost(s->host);
		s->host = s->dev = NULL;
		s->bytes = 0;
		if (e != cudaSuccess) {
			dnn_worker_error("%s: releasing the old staging blocks: %s", what, cudaGetErrorString(e));
			return -1;
		}
		e = cudaMallocHost(&s->host, want);
		if (e != cudaSuccess) {
			s->host = NULL;
			dnn_worker_error("%s: cudaMallocHost of %zu bytes of staging failed: %s", what, want,
					 cudaGetErrorString(e));
			return -1;
		}
		/* The device block through StarPU, so that its memory accounting knows it (and can evict
		 * data to make room) rather than a full device failing here. */
		s->dev_node = starpu_worker_get_memory_node(starpu_worker_get_id_check());
		s->dev = (void *)starpu_malloc_on_node(s->dev_node, want);
		if (!s->dev) {
			(void)cudaFreeHost(s->host); /* already failing: the first error is the one reported */
			s->host = NULL;
			dnn_worker_error("%s: allocating %zu bytes of device staging failed: out of device memory", what,
					 want);
			return -1;
		}
		s->bytes = want;
	}
	*host = s->host, *dev = s->dev;
	return 0;
}

extern "C" int dnn_cuda_staging_upload(size_t bytes, const char *what)
{
	staging *s = &stages[starpu_worker_get_id_check()];
	cudaError_t e = cudaMemcpyAsync(s->dev, s->host, bytes, cudaMemcpyHostToDevice, starpu_cuda_get_local_stream());
	if (e != cudaSuccess) {
		dnn_worker_error("%s: cudaMemcpyAsync of %zu bytes: %s", what, bytes, cudaGetErrorString(e));
		return -1;
	}
	if (!s->copied)
		e = cudaEventCreateWithFlags(&s->copied, cudaEventDisableTiming);
	if (e == cudaSuccess)
		e = cudaEventRecord(s->copied, starpu_cuda_get_local_stream());
	if (e != cudaSuccess) {
		/* Without the event the next task cannot know when the block is free: wait now. */
		cudaStreamSynchronize(starpu_cuda_get_local_stream());
		dnn_worker_error("%s: recording the staging copy's event: %s", what, cudaGetErrorString(e));
		return -1;
	}
	s->pending = 1;
	return 0;
}

extern "C" void dnn_cuda_staging_release(void)
{
	staging *s = &stages[starpu_worker_get_id_check()];
	/* At shutdown: nothing is left to report an error to, and each call is independent. */
	(void)cudaStreamSynchronize(starpu_cuda_get_local_stream());
	if (s->copied)
		(void)cudaEventDestroy(s->copied);
	if (s->dev)
		starpu_free_on_node(s->dev_node, (uintptr_t)s->dev, s->bytes);
	if (s->host)
		(void)cudaFreeHost(s->host);
	*s = staging{};
}
