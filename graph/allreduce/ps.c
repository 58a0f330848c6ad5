/* ps.c — the synchronous parameter server (--allreduce ps), the exchange of TensorFlow 1.x's
 * distributed training with parameter-server tasks (tf.train.replica_device_setter and
 * SyncReplicasOptimizer), which the published clusters of 2016-2017 ran (the ANP paper's):
 *
 *   entry e's server: rank s = e mod N (round robin over the tensors, as replica_device_setter
 *                     places variables; no --bucket-mb: see no_buckets below)
 *   zero(G) on s
 *   for j = 0 .. N-1: G += local[j] on s   (rank j pushes its gradient to s; the adds are one
 *                                           chain, so the sum's order is the ranks' order; s's
 *                                           received copies then leave StarPU-MPI's cache)
 *   G sent from s to every other rank      (every rank pulls)
 *
 * Every rank then applies the same update to G (the caller, as for the tree): TensorFlow applies
 * it once on the server and the workers pull the new parameters, which moves the same bytes (a
 * tensor each way per rank) and only moves where the update's few element-wise FLOPs run. What
 * sets this exchange apart from the tree, ring and rhd is its traffic: each server receives N - 1
 * and sends N - 1 copies of its tensors, so the busiest link carries (N-1)/N of the model twice
 * when the shards are even, and its sums are N dependent adds on one rank, not a tree.
 *
 * --grad-precision bf16: M[j] is rank j's bf16 message (owner j):
 *
 *   zero(G) on s
 *   for j = 0 .. N-1: M[j] = bf16(local[j]) on j; G += M[j] on s   (fp32 adds, the ranks' order)
 *   M[s] = bf16(G) on s (G rounded too); local[j] = M[s] on every rank j (s as well)
 *
 * so the sum ends in every rank's contribution, as the ring's. Roundings on the longest path: 2 (the push, the
 * pull) at every rank count; half the bytes each way. Each M[j] is written only by tasks every rank submits, so
 * StarPU-MPI's cache follows it (no flush, unlike the fp32 pushes of the contributions themselves). */
#include <stdlib.h>

#include "dist_impl.h"
#include "vec.h"

/* G, owned by entry e's server; bf16: then M[j] (owner j) in h[1 + j]. */
static int ps_setup(dnn_dist *d, int e, size_t n)
{
	dnn_dist_entry *en = &d->entry[e];
	const size_t nh = 1 + (d->grad_bf16 ? (size_t)d->nranks : 0);
	en->h = calloc(nh, sizeof(*en->h));
	if (!en->h)
		return -1;
	en->nh = nh;
	en->h[0] = dnn_dist_register(d, NULL, n, e % d->nranks);
	for (int j = 0; j < d->nranks && d->grad_bf16; j++)
		en->h[1 + j] = dnn_dist_register_bf16(d, n, j);
	return 0;
}

/* The bf16 exchange (above), after the zero of G. */
static int ps_reduce_bf16(const dnn_dist *d, int e, dnn_task_opts *o, starpu_data_handle_t *sum)
{
	const int s = e % d->nranks;
	starpu_data_handle_t G = d->entry[e].h[0], *M = d->entry[e].h + 1;
	size_t stride;
	const starpu_data_handle_t *local = dnn_dist_locals(d, e, &stride);
	for (int j = 0; j < d->nranks; j++) {
		o->node = j, o->name = "ps_bf16_pack";
		DNN_TRY(dnn_insert_vec_to_bf16(o, M[j], local[(size_t)j * stride]));
		o->node = s, o->name = "ps_push";
		DNN_TRY(dnn_insert_vec_add_bf16(o, G, M[j]));
	}
	o->name = "ps_bf16_pack";
	DNN_TRY(dnn_insert_vec_to_bf16(o, M[s], G));
	o->name = "ps_pull";
	for (int j = 0; j < d->nranks; j++) {
		o->node = j;
		DNN_TRY(dnn_insert_vec_from_bf16(o, local[(size_t)j * stride], M[s]));
	}
	*sum = local[(size_t)d->rank * stride];
	return 0;
}

static int ps_reduce(dnn_plan *p, int e, const dnn_task_opts *base, starpu_data_handle_t *sum)
{
	const dnn_dist *d = p->m->dist;
	const int s = e % d->nranks;
	starpu_data_handle_t G = d->entry[e].h[0];
	size_t stride;
	const starpu_data_handle_t *local = dnn_dist_locals(d, e, &stride);
	dnn_task_opts o = base ? *base : (dnn_task_opts){0};
	o.mpi = 1, o.node = s, o.name = "ps_zero";
	DNN_TRY(dnn_insert_vec_zero(&o, G));
	if (d->grad_bf16)
		return ps_reduce_bf16(d, e, &o, sum);
	o.name = "ps_push";
	for (int j = 0; j < d->nranks; j++)
		DNN_TRY(dnn_insert_vec_add(&o, G, STARPU_RW, local[(size_t)j * stride]));
	/* Each contribution is rewritten next step by rank-local tasks the server never sees: drop
	 * the server's received copy from StarPU-MPI's cache, or it would add the stale one (as the
	 * async server's pushes, dist_async.c). */
	for (int j = 0; j < d->nranks; j++)
		starpu_mpi_cache_flush(MPI_COMM_WORLD, local[(size_t)j * stride]);
	for (int j = 0; j < d->nranks; j++)
		if (j != s)
			DNN_TRY(starpu_mpi_get_data_on_node_detached(MPI_COMM_WORLD, G, j, NULL, NULL));
	*sum = G;
	return 0;
}

const dnn_allreduce_algo dnn_allreduce_ps = {
	.name = "ps",
	.setup = ps_setup,
	.reduce = ps_reduce,
	/* TensorFlow's server takes each variable on its own; and packed buckets sent as they are
	 * crashed (heap corruption at 2-4 ranks with 2+ buckets beside unbucketed tensors, lenet5,
	 * not understood yet), so buckets are refused rather than run. */
	.no_buckets = 1,
};
