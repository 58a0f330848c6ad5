/* dnn_staging.h — per-CUDA-worker staging for the loaders' CUDA forms (load_batch.cu,
 * load_images.cu): they gather host data (a data set in memory, decoded image files) into a
 * pinned host block, copy it with one cudaMemcpyAsync on the worker's stream into a device block
 * of the same size, and let a kernel write the task's buffers from there.
 *
 * Both blocks are allocated at the worker's first use and grown (by half again) when a task needs
 * more, never per task; the device block through starpu_malloc_on_node, so StarPU's memory
 * accounting counts it. The host block is reused by the next task on the same worker while the
 * previous copy may still be queued (STARPU_CUDA_ASYNC): dnn_cuda_staging_upload records an event
 * after the copy and dnn_cuda_staging waits for that event (only that copy, not the stream).
 * Errors record dnn_worker_error() and return -1; nothing here exits. CUDA workers only.
 */
#ifndef DNN_STAGING_H
#define DNN_STAGING_H
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif
/* A host (pinned) and a device block of at least `bytes` for the calling CUDA worker, free to
 * overwrite. 0, or -1 with a worker error recorded (what: the task, for the message). */
int dnn_cuda_staging(size_t bytes, void **host, void **dev, const char *what);
/* Queues the copy of the first `bytes` of the host block into the device block on
 * starpu_cuda_get_local_stream() and records the event the next dnn_cuda_staging waits for.
 * 0, or -1 with a worker error recorded. */
int dnn_cuda_staging_upload(size_t bytes, const char *what);
/* Frees the calling worker's blocks and event (dnn_cuda_shutdown, on every CUDA worker). */
void dnn_cuda_staging_release(void);
#ifdef __cplusplus
}
#endif
#endif
