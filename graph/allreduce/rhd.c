/* rhd.c — recursive halving-doubling (--allreduce rhd; N = 2^k ranks), for the entries of at
 * least N * DNN_RING_MIN_CHUNK elements (smaller ones take the tree), on the ring's N chunks and
 * slice codelets (chunks.h). Reduce-scatter by recursive halving, m = N/2, N/4, .., 1: every rank
 * r keeps the half of its current block of 2m chunks that holds chunk r, and adds the partner
 * r^m's copy of it, A[r][c] += A[r^m][c] on r (the partner does the same with the other half), so
 * that chunk c ends summed over all ranks on rank c, in log2 N dependent steps. All-gather by
 * recursive doubling, m = 1, 2, .., N/2: r copies the partner's block of m summed chunks,
 * A[r][c] = A[r^m][c]. Every chunk's sum is computed once (on rank c) and copied, so the replicas
 * stay identical; each rank sends and receives (N-1)/N of the tensor per phase, as the ring, but
 * the chain is 2 log2 N hops long instead of 2(N-1). All ranks submit every task.
 *
 * --grad-precision bf16: every hop sends chunks.h's bf16 message (half the bytes; dnn_chunks_hop), every add is
 * fp32 on the receiver. A partial sum is rounded once per halving step (log2 N), and the owner's full sum once
 * more when it sends it first (half = 1), which rounds its own copy too; the later copies are exact: log2 N + 1
 * roundings on the longest path (2 at 2 ranks, 3 at 4), the same bits on every rank, in the fixed order above. */
#include <stdio.h>

#include "chunks.h"
#include "vec.h"

static int rhd_check_ranks(int nranks, char *err, size_t errlen)
{
	if (nranks & (nranks - 1)) {
		snprintf(err, errlen, "--allreduce rhd needs a power-of-two number of ranks, not %d (use tree or ring)",
			 nranks);
		return -1;
	}
	return 0;
}

static int rhd_reduce(dnn_plan *p, int q, const dnn_task_opts *base, starpu_data_handle_t *sum)
{
	(void)base;
	const dnn_dist *d = p->m->dist;
	const int N = d->nranks;
	dnn_task_opts o = dnn_dist_ar_place(p, q, 1, -1, STARPU_MAX_PRIO, 0); /* on the path to the next forward */
	DNN_TRY(dnn_chunks_copy_in(p, q, &o, "rhd_copy_in"));
	o.name = "rhd_reduce_scatter";
	for (int half = N / 2; half >= 1; half /= 2)
		for (int r = 0; r < N; r++) {
			const int first = r & ~(half - 1); /* r's half: chunks first .. first + half - 1 */
			for (int c = first; c < first + half; c++)
				DNN_TRY(dnn_chunks_hop(p, q, &o, r ^ half, r, c, 1));
		}
	o.name = "rhd_all_gather";
	for (int half = 1; half < N; half *= 2)
		for (int r = 0; r < N; r++) {
			const int first = (r ^ half) & ~(half - 1); /* the partner's block of summed chunks */
			for (int c = first; c < first + half; c++)
				DNN_TRY(dnn_chunks_hop(p, q, &o, r ^ half, r, c, 0));
		}
	DNN_TRY(dnn_chunks_copy_out(p, q, &o, "rhd_copy_out"));
	*sum = dnn_dist_local(d, q, d->rank);
	return 0;
}

const dnn_allreduce_algo dnn_allreduce_rhd = {
	.name = "rhd",
	.check_ranks = rhd_check_ranks,
	.takes = dnn_chunks_takes,
	.setup = dnn_chunks_setup,
	.reduce = rhd_reduce,
};
