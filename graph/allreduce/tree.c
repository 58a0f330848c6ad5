/* tree.c — the tree all-reduce (--allreduce tree; every algorithm's fallback for small tensors):
 *
 *   zero(G) on rank 0
 *   for each rank j: G += local[j]  (STARPU_MPI_REDUX, executed on j)
 *   StarPU-MPI's reduction tree of cl_vec_redux_add tasks (binary across nodes, flat on one:
 *                                   dnn_dist_mpi_redux)
 *   G sent to every rank, which reads the sum there (the caller: the same SGD step on every
 *   replica with G read-only, then the local gradient zeroed).
 *
 * A layer's reduction starts as soon as its local gradient is complete, while the backward of the
 * layers below still runs: the overlap comes from the dependencies. Rank 0 alone sends the N-1
 * copies of the sum, in 2 dependent hops.
 *
 * --grad-precision bf16 (d->grad_bf16): the same binary tree, written out as tasks, since StarPU-MPI's reduction
 * sends the handle's own type and would keep each node's partial sum in it between adds. M[j] is rank j's bf16
 * message (owner j), and the fp32 sums are made in the contributions themselves:
 *
 *   for m = 1, 2, 4, .. < N, every r with r % 2m == 0 and r + m < N:
 *       M[r+m] = bf16(local[r+m]) on r+m (the sender's copy rounded too); local[r] += M[r+m] on r (fp32)
 *   M[0] = bf16(local[0]) on 0; local[j] = M[0] on every rank j != 0
 *
 * Every add has one operand from elsewhere, in an order fixed by the levels, flat or not on one node: the same
 * bits on every run. Roundings on the longest path: one per level (ceil(log2 N)) and the root's, ceil(log2 N) + 1
 * (2 at 2 ranks, 3 at 4); the broadcast's copies are exact. Half the bytes of every message. */
#include <stdlib.h>

#include "dist_impl.h"
#include "vec.h"

/* G, owned by rank 0, with the vector sum as its MPI reduction; bf16: the messages M[j], owner j. */
static int tree_setup(dnn_dist *d, int e, size_t n)
{
	dnn_dist_entry *en = &d->entry[e];
	const size_t nh = d->grad_bf16 ? (size_t)d->nranks : 1;
	en->h = calloc(nh, sizeof(*en->h));
	if (!en->h)
		return -1;
	en->nh = nh;
	if (d->grad_bf16) {
		for (int j = 0; j < d->nranks; j++)
			en->h[j] = dnn_dist_register_bf16(d, n, j);
		return 0;
	}
	en->h[0] = dnn_dist_register(d, NULL, n, 0);
	dnn_vec_set_sum_redux(en->h[0]);
	return 0;
}

/* The bf16 tree (above): the sum ends in every rank's contribution. */
static int tree_reduce_bf16(dnn_plan *p, int e, const dnn_task_opts *base, starpu_data_handle_t *sum)
{
	const dnn_dist *d = p->m->dist;
	const int N = d->nranks;
	starpu_data_handle_t *M = d->entry[e].h;
	size_t stride;
	const starpu_data_handle_t *local = dnn_dist_locals(d, e, &stride);
	dnn_task_opts o = base ? *base : (dnn_task_opts){0};
	o.mpi = 1;
	for (int m = 1; m < N; m *= 2)
		for (int r = 0; r + m < N; r += 2 * m) {
			o.node = r + m, o.name = "allreduce_bf16_pack";
			DNN_TRY(dnn_insert_vec_to_bf16(&o, M[r + m], local[(size_t)(r + m) * stride]));
			o.node = r, o.name = "allreduce_bf16_add";
			DNN_TRY(dnn_insert_vec_add_bf16(&o, local[(size_t)r * stride], M[r + m]));
		}
	o.node = 0, o.name = "allreduce_bf16_pack";
	DNN_TRY(dnn_insert_vec_to_bf16(&o, M[0], local[0]));
	o.name = "allreduce_bf16_unpack";
	for (int j = 1; j < N; j++) {
		o.node = j;
		DNN_TRY(dnn_insert_vec_from_bf16(&o, local[(size_t)j * stride], M[0]));
	}
	*sum = local[(size_t)d->rank * stride];
	return 0;
}

static int tree_reduce(dnn_plan *p, int e, const dnn_task_opts *base, starpu_data_handle_t *sum)
{
	const dnn_dist *d = p->m->dist;
	if (d->grad_bf16)
		return tree_reduce_bf16(p, e, base, sum);
	starpu_data_handle_t G = d->entry[e].h[0];
	size_t stride;
	const starpu_data_handle_t *local = dnn_dist_locals(d, e, &stride);
	DNN_TRY(dnn_dist_mpi_sum_into(d, G, local, stride, "allreduce_zero", "allreduce_contrib", base));
	DNN_TRY(dnn_dist_mpi_broadcast(G, d->nranks, 1));
	*sum = G;
	return 0;
}

const dnn_allreduce_algo dnn_allreduce_tree = {
	.name = "tree",
	.setup = tree_setup,
	.reduce = tree_reduce,
};
