/* onednn_thread.h — what the oneDNN users (codelets/gemm_bf16.c's matmuls, conv2d_onednn.c's convolutions) share
 * about their per-worker-thread state: one engine and one in-order stream per thread (its OpenMP team of one
 * thread: the StarPU worker itself), and the slot choice of a primitive cache with round-robin eviction. Only
 * where oneDNN is built in (DNN_HAVE_DNNL). */
#ifndef DNN_ONEDNN_THREAD_H
#define DNN_ONEDNN_THREAD_H

#ifdef DNN_HAVE_DNNL
#include <oneapi/dnnl/dnnl.h>
#include <omp.h>

typedef struct {
	dnnl_engine_t eng; /* NULL until dnn_onednn_thread_open succeeds */
	dnnl_stream_t stream;
} dnn_onednn_thread;

/* Create t's engine and stream on the first call (the calling thread's OpenMP teams set to one thread); 1 when
 * they exist, 0 when oneDNN failed (nothing kept). */
static inline int dnn_onednn_thread_open(dnn_onednn_thread *t)
{
	if (t->eng)
		return 1;
	omp_set_num_threads(1);
	if (dnnl_engine_create(&t->eng, dnnl_cpu, 0) != dnnl_success) {
		t->eng = NULL;
		return 0;
	}
	if (dnnl_stream_create(&t->stream, t->eng, dnnl_stream_default_flags) != dnnl_success) {
		dnnl_engine_destroy(t->eng);
		t->eng = NULL;
		return 0;
	}
	return 1;
}

/* Destroy t's stream and engine (after the primitives made on it). */
static inline void dnn_onednn_thread_close(dnn_onednn_thread *t)
{
	if (!t->eng)
		return;
	dnnl_stream_destroy(t->stream);
	dnnl_engine_destroy(t->eng);
	t->eng = NULL;
}

/* The slot for a new entry of a cache of cap entries, *n of them used: the next free one, else the next in
 * round-robin order (*next), whose entry the caller frees first (*evict = 1). */
static inline int dnn_onednn_cache_slot(int *n, int *next, int cap, int *evict)
{
	*evict = *n >= cap;
	if (!*evict)
		return (*n)++;
	const int s = *next;
	*next = (s + 1) % cap;
	return s;
}
#endif

#endif
