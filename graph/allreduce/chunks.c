/* chunks.c — the chunk buffers and copies that the ring and rhd all-reduces share (chunks.h). */
#include "chunks.h"

#include <stdlib.h>

#include "vec.h"

int dnn_chunks_takes(const dnn_dist *d, size_t n) { return n >= (size_t)d->nranks * DNN_RING_MIN_CHUNK; }

int dnn_chunks_setup(dnn_dist *d, int e, size_t n)
{
	const int N = d->nranks;
	dnn_dist_entry *en = &d->entry[e];
	en->nh = (size_t)N * N * (d->grad_bf16 ? 2 : 1);
	en->off = calloc((size_t)N + 1, sizeof(size_t));
	en->h = calloc(en->nh, sizeof(*en->h));
	if (!en->off || !en->h)
		return -1;
	size_t *off = en->off;
	for (int c = 0; c <= N; c++) /* the first n % N chunks get one more element */
		off[c] = (size_t)c * (n / N) + (size_t)(c < (int)(n % N) ? c : (int)(n % N));
	for (int j = 0; j < N; j++)
		for (int c = 0; c < N; c++)
			en->h[j * N + c] = dnn_dist_register(d, NULL, off[c + 1] - off[c], j);
	for (int j = 0; j < N && d->grad_bf16; j++)
		for (int c = 0; c < N; c++)
			en->h[N * N + j * N + c] = dnn_dist_register_bf16(d, off[c + 1] - off[c], j);
	return 0;
}

int dnn_chunks_hop(dnn_plan *p, int e, dnn_task_opts *o, int from, int to, int c, int add)
{
	const dnn_dist *d = p->m->dist;
	const int N = d->nranks;
	starpu_data_handle_t *A = d->entry[e].h, *M = A + N * N;
	if (!d->grad_bf16) {
		o->node = to;
		return add ? dnn_insert_vec_add(o, A[to * N + c], STARPU_RW, A[from * N + c])
			   : dnn_insert_vec_slice_get(o, A[to * N + c], A[from * N + c], 0);
	}
	const char *name = o->name;
	o->node = from, o->name = "allreduce_bf16_pack";
	DNN_TRY(dnn_insert_vec_to_bf16(o, M[from * N + c], A[from * N + c]));
	o->node = to, o->name = name;
	return add ? dnn_insert_vec_add_bf16(o, A[to * N + c], M[from * N + c])
		   : dnn_insert_vec_from_bf16(o, A[to * N + c], M[from * N + c]);
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
