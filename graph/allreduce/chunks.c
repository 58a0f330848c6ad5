/* chunks.c — the chunk buffers and copies that the ring and rhd all-reduces share (chunks.h). */
#include "chunks.h"

#include <stdlib.h>

#include "vec.h"

int dnn_chunks_takes(const dnn_dist *d, size_t n) { return n >= (size_t)d->nranks * DNN_RING_MIN_CHUNK; }

int dnn_chunks_setup(dnn_dist *d, int e, size_t n)
{
	const int N = d->nranks;
	dnn_dist_entry *en = &d->entry[e];
	en->off = calloc((size_t)N + 1, sizeof(size_t));
	en->h = calloc((size_t)N * N, sizeof(*en->h));
	if (!en->off || !en->h)
		return -1;
	en->nh = (size_t)N * N;
	size_t *off = en->off;
	for (int c = 0; c <= N; c++) /* the first n % N chunks get one more element */
		off[c] = (size_t)c * (n / N) + (size_t)(c < (int)(n % N) ? c : (int)(n % N));
	for (int j = 0; j < N; j++)
		for (int c = 0; c < N; c++)
			en->h[j * N + c] = dnn_dist_register(d, NULL, off[c + 1] - off[c], j);
	return 0;
}

/* Tasks named `name`, with o's other options. */
int dnn_chunks_copy_in(dnn_plan *p, int e, dnn_task_opts *o, const char *name)
{
	const dnn_dist *d = p->m->dist;
	const int N = d->nranks;
	starpu_data_handle_t *A = d->entry[e].h;
	const size_t *off = d->entry[e].off;
	o->name = name;
	for (int j = 0; j < N; j++)
		for (int c = 0; c < N; c++) {
			o->node = j;
			DNN_TRY(dnn_insert_vec_slice_get(o, A[j * N + c], dnn_dist_local(d, e, j), off[c]));
		}
	return 0;
}

/* The contribution then holds the global sum: for a parameter, the update reads it and zeroes it
 * for the next step (dist.c); a bucket's members are unpacked and updated by
 * dnn_dist_bucket_step. */
int dnn_chunks_copy_out(dnn_plan *p, int e, dnn_task_opts *o, const char *name)
{
	const dnn_dist *d = p->m->dist;
	const int N = d->nranks;
	starpu_data_handle_t *A = d->entry[e].h;
	const size_t *off = d->entry[e].off;
	o->name = name;
	for (int j = 0; j < N; j++)
		for (int c = 0; c < N; c++) {
			o->node = j;
			DNN_TRY(dnn_insert_vec_slice_put(o, dnn_dist_local(d, e, j), A[j * N + c], off[c]));
		}
	return 0;
}
