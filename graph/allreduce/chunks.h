/* chunks.h — what the chunked all-reduces (ring.c, rhd.c) share: an entry of n elements cut into
 * N contiguous chunks (N = the ranks), A[j][c] rank j's buffer of chunk c (owner j), kept in
 * d->entry[e].h[j * N + c]; d->entry[e].off[c] is chunk c's first element (c = N: n). With --grad-precision bf16,
 * M[j][c] is rank j's bf16 message of chunk c (owner j), in d->entry[e].h[N * N + j * N + c]: a hop from r to t
 * is then M[r][c] = bf16(A[r][c]) on r and A[t][c] += M[r][c] (reduce-scatter, fp32 add) or A[t][c] = M[r][c]
 * (all-gather) on t (dnn_chunks_hop). */
#ifndef DNN_ALLREDUCE_CHUNKS_H
#define DNN_ALLREDUCE_CHUNKS_H
#include "dist_impl.h"

/* Ring all-reduce and rhd: below this many elements per chunk a tensor takes the tree (its hops
 * of a few hundred bytes each cost latency and tasks, and save no bandwidth worth having). */
#define DNN_RING_MIN_CHUNK 256

/* Does an entry of n elements have N * DNN_RING_MIN_CHUNK elements or more? */
int dnn_chunks_takes(const dnn_dist *d, size_t n);
/* Register entry e's N x N chunk buffers (the first n % N chunks get one more element). */
int dnn_chunks_setup(dnn_dist *d, int e, size_t n);
/* One hop of chunk c from rank `from` to rank `to`: A[to][c] += A[from][c] (add) or A[to][c] = A[from][c], on
 * `to`; with d->grad_bf16 through the bf16 message M[from][c], packed on `from` (which rounds A[from][c] to it). */
int dnn_chunks_hop(dnn_plan *p, int e, dnn_task_opts *o, int from, int to, int c, int add);
/* The first stage: every rank j copies its contribution (dnn_dist_local) into its N chunks. */
int dnn_chunks_copy_in(dnn_plan *p, int e, dnn_task_opts *o, const char *name);
/* The last stage: every rank's chunks, now the global sums, go back into its contribution. */
int dnn_chunks_copy_out(dnn_plan *p, int e, dnn_task_opts *o, const char *name);
#endif
