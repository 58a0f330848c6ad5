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
 * copies of the sum, in 2 dependent hops. */
#include <stdlib.h>

#include "dist_impl.h"
#include "vec.h"

/* G, owned by rank 0, with the vector sum as its MPI reduction. */
static int tree_setup(dnn_dist *d, int e, size_t n)
{
	dnn_dist_entry *en = &d->entry[e];
	en->h = calloc(1, sizeof(*en->h));
	if (!en->h)
		return -1;
	en->nh = 1;
	en->h[0] = dnn_dist_register(d, NULL, n, 0);
	dnn_vec_set_sum_redux(en->h[0]);
	return 0;
}

static int tree_reduce(dnn_plan *p, int e, const dnn_task_opts *base, starpu_data_handle_t *sum)
{
	const dnn_dist *d = p->m->dist;
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
