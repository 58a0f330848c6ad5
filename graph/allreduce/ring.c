/* ring.c — the ring all-reduce (--allreduce ring), for the entries of at least
 * N * DNN_RING_MIN_CHUNK elements (smaller ones take the tree). With the entry's n elements cut
 * into N contiguous chunks and A[j][c] rank j's buffer for chunk c (owner j; chunks.h):
 *
 *   A[j][c] = local[j][chunk c]                           on j (copy-in, reads the REDUX gradient)
 *   reduce-scatter, s = 0..N-2, every r: A[r+1][c] += A[r][c], c = r-s      on r+1
 *                   (then A[c-1][c] holds chunk c summed over all ranks)
 *   all-gather, s = 0..N-2, every r:     A[r+1][c]  = A[r][c], c = r+1-s    on r+1
 *   local[j][chunk c] = A[j][c]                           on j (the sum, in place)
 *
 * Every chunk's sum is computed once and copied, so the replicas stay identical. It sends 2(N-1)
 * gradients' worth of bytes per step in all, as the tree, but spreads them, 2(N-1)/N per rank
 * (the tree: rank 0 alone sends the N-1 copies of the sum), in twice the messages, 4N-2 tasks
 * per tensor and rank, and 2(N-1) dependent hops. On one shared machine (STARPU_MPI_STATS and
 * images/s in the README) that made it slower than the tree. All ranks submit every task.
 *
 * --grad-precision bf16: every hop sends chunks.h's bf16 message (half the bytes; dnn_chunks_hop) and every add
 * is fp32 on the receiver. Chunk c's sum starts on rank c and is rounded once per reduce-scatter hop (N - 1),
 * then once when its owner c - 1 sends it first in the all-gather, which rounds the owner's own copy too (the
 * later hops copy a bf16 value: exact): N roundings on the longest path (2 at 2 ranks, 4 at 4), the same bits
 * on every rank. The order of every sum is the ring's, fixed. */
#include "chunks.h"
#include "vec.h"

static int ring_reduce(dnn_plan *p, int q, const dnn_task_opts *base, starpu_data_handle_t *sum)
{
	(void)base;
	const dnn_dist *d = p->m->dist;
	const int N = d->nranks;
	/* Top priority: each hop waits for a worker on the next rank, and the chain of 2(N-1) hops is
	 * on the path to the next step's forward; backward and forward tasks can wait for these. */
	dnn_task_opts o = dnn_dist_ar_place(p, q, 1, -1, STARPU_MAX_PRIO, 0);
	DNN_TRY(dnn_chunks_copy_in(p, q, &o, "ring_copy_in"));
	o.name = "ring_reduce_scatter";
	for (int s = 0; s < N - 1; s++)
		for (int r = 0; r < N; r++) {
			const int c = ((r - s) % N + N) % N, to = (r + 1) % N;
			DNN_TRY(dnn_chunks_hop(p, q, &o, r, to, c, 1));
		}
	o.name = "ring_all_gather";
	for (int s = 0; s < N - 1; s++)
		for (int r = 0; r < N; r++) {
			const int c = ((r + 1 - s) % N + N) % N, to = (r + 1) % N;
			DNN_TRY(dnn_chunks_hop(p, q, &o, r, to, c, 0));
		}
	DNN_TRY(dnn_chunks_copy_out(p, q, &o, "ring_copy_out"));
	*sum = dnn_dist_local(d, q, d->rank);
	return 0;
}

const dnn_allreduce_algo dnn_allreduce_ring = {
	.name = "ring",
	.takes = dnn_chunks_takes,
	.setup = dnn_chunks_setup,
	.reduce = ring_reduce,
};
