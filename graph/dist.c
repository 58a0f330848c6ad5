/* dist.c — training across ranks with StarPU-MPI (DESIGN.md "Across nodes").
 *
 * Every rank runs the same per-chunk tasks on its own shard with plain starpu_task_insert (all
 * their data is rank-local). Only the handles that cross ranks are registered with StarPU-MPI,
 * and every rank submits the same cross-rank tasks in the same order, as StarPU-MPI requires:
 *
 * sync   per parameter p:  zero(G_p) on rank 0
 *                          for each rank j: G_p += g_p[j]  (STARPU_MPI_REDUX, executed on j)
 *                          starpu_mpi_redux_data(G_p)      (tree of cl_grad_accum tasks)
 *                          G_p sent to every rank; each rank applies the same SGD step to its
 *                          replica with G_p read-only, then zeroes its local g_p.
 *        A layer's reduction starts as soon as its local gradient is complete, while the
 *        backward of the layers below still runs: the overlap comes from the dependencies.
 *        --allreduce ring instead, per parameter p of at least N * DNN_RING_MIN_CHUNK elements
 *        (smaller ones take the tree), with p's n elements cut into N contiguous chunks and
 *        A[j][c] rank j's buffer for chunk c (owner j):
 *                          A[j][c] = g_p[j][chunk c]            on j (copy-in, reads the REDUX g_p)
 *          reduce-scatter, s = 0..N-2, every r: A[r+1][c] += A[r][c], c = r-s      on r+1
 *                          (then A[c-1][c] holds chunk c summed over all ranks)
 *          all-gather, s = 0..N-2, every r:     A[r+1][c]  = A[r][c], c = r+1-s    on r+1
 *                          g_p[j][chunk c] = A[j][c]            on j (the sum, in place)
 *                          each rank's SGD step with its g_p, which it zeroes.
 *        Every chunk's sum is computed once and copied, so the replicas stay identical. Both
 *        send 2(N-1) gradients' worth of bytes per step in all; the ring spreads them, 2(N-1)/N
 *        per rank (the tree: rank 0 alone sends the N-1 copies of the sum), but in twice the
 *        messages, 4N-2 tasks per tensor and rank, and 2(N-1) dependent hops. On one shared
 *        machine (STARPU_MPI_STATS and images/s in the README) that made it slower: tree is
 *        the default.
 *
 * async  (mixed-asynchronous: synchronous inside a rank, asynchronous between ranks) each rank
 *        trains its own replica: a local SGD step (with its own momentum, gradient scaled by
 *        1/B of the global batch) that also writes the applied change D = -lr*v. It pushes D to
 *        the parameter server, which is sharded by layer (parameter p lives on rank s(p) = layer
 *        mod ranks): W_p += D on s(p), pushes of all ranks commuting (arrival order). After a
 *        step's pushes the server copies W_p into snapshot (step mod S+1). Before step t a rank
 *        pulls snapshot t-1-S and re-adds its own changes of steps t-S..t-1, so only the other
 *        ranks' updates are stale, by exactly S steps, and no rank runs more than S steps ahead
 *        of the slowest. Lookahead (the default) also adds its own changes once more per other
 *        rank, as the estimate of their missing steps: the gradient is then taken near the
 *        synchronous point, which closes most of the accuracy gap (README, "Across nodes").
 *        Momentum and weight decay are linear, so with S = 0 (or one rank) this is the
 *        synchronous update. Same codelets as sync (plus the scaled add of that estimate):
 *        only dependencies and ownership differ.
 */
#include "dist.h"

#include <math.h>
#include <starpu_mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dnn_codelet.h"
#include "grad_accum.h"
#include "sgd.h"

/* Ring all-reduce: below this many elements per chunk a tensor takes the tree (its 2(N-1) hops
 * of a few hundred bytes each cost latency and tasks, and save no bandwidth worth having). */
#define DNN_RING_MIN_CHUNK 256

static starpu_data_handle_t reg_vector(dnn_dist *d, float *home, size_t n, int owner)
{
	starpu_data_handle_t h;
	if (home)
		starpu_vector_data_register(&h, STARPU_MAIN_RAM, (uintptr_t)home, (uint32_t)n, sizeof(float));
	else
		starpu_vector_data_register(&h, -1, 0, (uint32_t)n, sizeof(float));
	starpu_mpi_data_register(h, d->next_tag++, owner);
	return h;
}

/* Server shard of parameter p: by layer (consecutive params of one node share a shard). */
static int shard_of(const dnn_model *m, int p)
{
	int layer = 0;
	for (int i = 0; i < m->g->nnodes; i++)
		if (m->param_of[i] >= 0 && m->param_of[i] <= p)
			layer = i;
	return layer % m->dist->nranks;
}

void dnn_model_enable_dist(dnn_model *m, dnn_dist_mode mode, dnn_allreduce allreduce, int staleness, int lookahead,
			   int nslots)
{
	int rank, nranks;
	starpu_mpi_comm_rank(MPI_COMM_WORLD, &rank);
	starpu_mpi_comm_size(MPI_COMM_WORLD, &nranks);
	if (nranks < 2)
		return;
	dnn_dist *d = calloc(1, sizeof(*d));
	STARPU_ASSERT(d);
	d->rank = rank, d->nranks = nranks, d->mode = mode, d->staleness = staleness, d->nslots = nslots;
	d->allreduce = allreduce;
	d->lookahead = mode == DNN_MODE_ASYNC && lookahead && staleness > 0;
	d->next_tag = 1;
	m->dist = d;
	const int P = m->nparams;
	/* Every rank's local gradient; ours is the REDUX handle the backward tasks already use. */
	d->g_local = calloc((size_t)nranks * P, sizeof(starpu_data_handle_t));
	for (int j = 0; j < nranks && mode == DNN_MODE_SYNC; j++)
		for (int p = 0; p < P; p++) {
			starpu_data_handle_t *h = &d->g_local[j * P + p];
			if (j == rank) {
				*h = m->params[p].hg;
				starpu_mpi_data_register(*h, d->next_tag++, j);
			} else {
				*h = reg_vector(d, NULL, (size_t)m->params[p].n, j);
			}
		}
	if (mode == DNN_MODE_SYNC) {
		const int N = nranks;
		d->g_global = calloc((size_t)P, sizeof(starpu_data_handle_t));
		d->ring_chunk = calloc((size_t)P * N * N, sizeof(starpu_data_handle_t));
		d->ring_off = calloc((size_t)P * (N + 1), sizeof(size_t));
		STARPU_ASSERT(d->g_global && d->ring_chunk && d->ring_off);
		for (int p = 0; p < P; p++) {
			const size_t n = (size_t)m->params[p].n;
			if (allreduce == DNN_ALLREDUCE_RING && n >= (size_t)N * DNN_RING_MIN_CHUNK) {
				size_t *off = &d->ring_off[(size_t)p * (N + 1)];
				for (int c = 0; c <= N; c++) /* the first n % N chunks get one more element */
					off[c] = (size_t)c * (n / N) + (size_t)(c < (int)(n % N) ? c : (int)(n % N));
				for (int j = 0; j < N; j++)
					for (int c = 0; c < N; c++)
						d->ring_chunk[((size_t)p * N + j) * N + c] =
							reg_vector(d, NULL, off[c + 1] - off[c], j);
			} else {
				d->g_global[p] = reg_vector(d, NULL, n, 0);
				dnn_grad_set_redux(d->g_global[p]);
			}
		}
	} else {
		const int K = staleness + 1;
		d->w_server = calloc((size_t)P, sizeof(starpu_data_handle_t));
		d->snap = calloc((size_t)K * P, sizeof(starpu_data_handle_t));
		d->delta = calloc((size_t)nranks * K * P, sizeof(starpu_data_handle_t));
		d->w_server_mem = calloc((size_t)P, sizeof(float *));
		d->shard = calloc((size_t)P, sizeof(int));
		STARPU_ASSERT(d->shard);
		for (int p = 0; p < P; p++) {
			int s = d->shard[p] = shard_of(m, p);
			if (s == rank) {
				/* The server starts from the same initial parameters as every replica. */
				d->w_server_mem[p] = malloc(sizeof(float) * (size_t)m->params[p].n);
				STARPU_ASSERT(d->w_server_mem[p]);
				memcpy(d->w_server_mem[p], m->params[p].w, sizeof(float) * (size_t)m->params[p].n);
			}
			d->w_server[p] = reg_vector(d, d->w_server_mem[p], (size_t)m->params[p].n, s);
			for (int k = 0; k < K; k++)
				d->snap[k * P + p] = reg_vector(d, NULL, (size_t)m->params[p].n, s);
		}
		for (int j = 0; j < nranks; j++)
			for (int k = 0; k < K; k++)
				for (int p = 0; p < P; p++)
					d->delta[((size_t)j * K + k) * P + p] = reg_vector(d, NULL, (size_t)m->params[p].n, j);
	}
	d->stats_global = calloc((size_t)nslots, sizeof(starpu_data_handle_t));
	d->stats_local = calloc((size_t)nranks * nslots, sizeof(starpu_data_handle_t));
	d->stats_global_mem = calloc(2 * (size_t)nslots, sizeof(float));
	d->stats_local_mem = calloc(2 * (size_t)nslots, sizeof(float));
	for (int s = 0; s < nslots; s++) {
		d->stats_global[s] = reg_vector(d, rank == 0 ? d->stats_global_mem + 2 * s : NULL, 2, 0);
		dnn_grad_set_redux(d->stats_global[s]);
		for (int j = 0; j < nranks; j++)
			d->stats_local[j * nslots + s] = reg_vector(d, j == rank ? d->stats_local_mem + 2 * s : NULL, 2, j);
	}
}

/* dst <- src, with the gradient codelets: zero then accumulate (no extra codelet needed). */
static void mpi_insert_copy(starpu_data_handle_t dst, starpu_data_handle_t src, int node)
{
	DNN_CHECK_STARPU(starpu_mpi_task_insert(MPI_COMM_WORLD, &cl_grad_zero, STARPU_W, dst, STARPU_EXECUTE_ON_NODE,
						node, STARPU_NAME, "ps_snapshot_zero", 0));
	DNN_CHECK_STARPU(starpu_mpi_task_insert(MPI_COMM_WORLD, &cl_grad_add, STARPU_RW, dst, STARPU_R, src,
						STARPU_EXECUTE_ON_NODE, node, STARPU_NAME, "ps_snapshot", 0));
}

/* G <- the sum over ranks j of local[j * stride], into G's owner: zero G, one STARPU_MPI_REDUX
 * contribution executed on each rank, then StarPU-MPI's reduction tree. The task names are
 * <what>_zero and <what>_contrib (trace-summary counts "allreduce_contrib"). */
static void mpi_sum_into(starpu_data_handle_t G, const starpu_data_handle_t *local, size_t stride, int nranks,
			 const char *zero_name, const char *contrib_name)
{
	DNN_CHECK_STARPU(starpu_mpi_task_insert(MPI_COMM_WORLD, &cl_grad_zero, STARPU_W, G, STARPU_NAME, zero_name, 0));
	for (int j = 0; j < nranks; j++)
		DNN_CHECK_STARPU(starpu_mpi_task_insert(MPI_COMM_WORLD, &cl_grad_accum, STARPU_MPI_REDUX, G, STARPU_R,
							local[(size_t)j * stride], STARPU_EXECUTE_ON_NODE, j,
							STARPU_NAME, contrib_name, 0));
	DNN_CHECK_STARPU(starpu_mpi_redux_data(MPI_COMM_WORLD, G));
}

void dnn_dist_before_forward(dnn_plan *p, long step)
{
	dnn_model *m = p->m;
	dnn_dist *d = m->dist;
	if (!d || d->mode != DNN_MODE_ASYNC || !p->train)
		return;
	long version = step - 1 - d->staleness; /* server version (step index) this step may use */
	long used = version >= 0 ? version : -1; /* -1: the initial parameters */
	long stale = step - 1 - used;
	d->staleness_sum += (double)stale;
	d->staleness_count++;
	if (stale > d->staleness_max)
		d->staleness_max = stale;
	if (version < 0)
		return;
	const int P = m->nparams, K = d->staleness + 1;
	/* Lookahead: the snapshot lacks every rank's changes of steps version+1 .. step-1. This
	 * rank adds its own; the other ranks' are estimated by its own too (all replicas train the
	 * same parameters on i.i.d. shards of the batch, so their steps are alike), so the
	 * gradients are taken near the point a synchronous run would use. The server itself only
	 * ever receives the true changes. Without lookahead the others' steps are simply missing. */
	const float own_weight = d->lookahead ? (float)d->nranks : 1.0f;
	for (int q = 0; q < P; q++) {
		starpu_data_handle_t snap = d->snap[(version % K) * P + q];
		/* Every rank takes part in every transfer (the owner posts the sends); then a local copy
		 * into this rank's replica plus this rank's own changes that the snapshot lacks. */
		for (int j = 0; j < d->nranks; j++)
			DNN_CHECK_STARPU(starpu_mpi_get_data_on_node_detached(MPI_COMM_WORLD, snap, j, NULL, NULL));
		dnn_insert_grad_zero(m->params[q].hw);
		dnn_insert_grad_accum(m->params[q].hw, STARPU_RW, snap);
		for (long k = version + 1; k < step; k++)
			dnn_insert_grad_axpy(m->params[q].hw, own_weight, d->delta[((size_t)d->rank * K + k % K) * P + q]);
	}
}

/* The sync step of parameter q with the ring (header comment): all ranks submit every task. */
static void ring_allreduce_step(dnn_plan *p, int q, const dnn_sgd_config *sgd)
{
	dnn_model *m = p->m;
	dnn_dist *d = m->dist;
	const int N = d->nranks, P = m->nparams;
	starpu_data_handle_t *A = &d->ring_chunk[(size_t)q * N * N]; /* A[j * N + c] */
	size_t *off = &d->ring_off[(size_t)q * (N + 1)];
	const size_t SZ = sizeof(size_t);
	/* Top priority: each hop waits for a worker on the next rank, and the chain of 2(N-1) hops is
	 * on the path to the next step's forward; backward and forward tasks can wait for these. */
	const int prio = STARPU_MAX_PRIO;
	for (int j = 0; j < N; j++)
		for (int c = 0; c < N; c++)
			DNN_CHECK_STARPU(starpu_mpi_task_insert(
				MPI_COMM_WORLD, &cl_grad_slice_get, STARPU_W, A[j * N + c], STARPU_R, d->g_local[j * P + q],
				STARPU_CL_ARGS_NFREE, &off[c], SZ, STARPU_PRIORITY, prio, STARPU_EXECUTE_ON_NODE, j,
				STARPU_NAME, "ring_copy_in", 0));
	for (int s = 0; s < N - 1; s++)
		for (int r = 0; r < N; r++) {
			const int c = ((r - s) % N + N) % N, to = (r + 1) % N;
			DNN_CHECK_STARPU(starpu_mpi_task_insert(
				MPI_COMM_WORLD, &cl_grad_add, STARPU_RW, A[to * N + c], STARPU_R, A[r * N + c],
				STARPU_PRIORITY, prio, STARPU_EXECUTE_ON_NODE, to, STARPU_NAME, "ring_reduce_scatter", 0));
		}
	for (int s = 0; s < N - 1; s++)
		for (int r = 0; r < N; r++) {
			const int c = ((r + 1 - s) % N + N) % N, to = (r + 1) % N;
			DNN_CHECK_STARPU(starpu_mpi_task_insert(
				MPI_COMM_WORLD, &cl_grad_slice_get, STARPU_W, A[to * N + c], STARPU_R, A[r * N + c],
				STARPU_CL_ARGS_NFREE, &off[0], SZ, STARPU_PRIORITY, prio, STARPU_EXECUTE_ON_NODE, to,
				STARPU_NAME, "ring_all_gather", 0));
		}
	for (int j = 0; j < N; j++)
		for (int c = 0; c < N; c++)
			DNN_CHECK_STARPU(starpu_mpi_task_insert(
				MPI_COMM_WORLD, &cl_grad_slice_put, STARPU_RW, d->g_local[j * P + q], STARPU_R, A[j * N + c],
				STARPU_CL_ARGS_NFREE, &off[c], SZ, STARPU_PRIORITY, prio, STARPU_EXECUTE_ON_NODE, j,
				STARPU_NAME, "ring_copy_out", 0));
	/* Our gradient now holds the global sum: the update reads it and zeroes it for the next step. */
	dnn_param *pr = &m->params[q];
	dnn_sgd_args a = {.n = pr->n, .lr = sgd->lr, .momentum = sgd->momentum,
			  .weight_decay = pr->no_decay ? 0.0f : sgd->weight_decay,
			  .scale = 1.0f / (float)p->global_batch};
	dnn_insert_sgd_update(&a, pr->hw, pr->hv, pr->hg);
}

void dnn_dist_after_backward(dnn_plan *p, int slot, long step, const dnn_sgd_config *sgd)
{
	(void)slot;
	dnn_model *m = p->m;
	dnn_dist *d = m->dist;
	const int P = m->nparams;
	if (d->mode == DNN_MODE_SYNC) {
		for (int q = 0; q < P; q++) {
			if (!d->g_global[q]) {
				ring_allreduce_step(p, q, sgd);
				continue;
			}
			starpu_data_handle_t G = d->g_global[q];
			mpi_sum_into(G, d->g_local + q, (size_t)P, d->nranks, "allreduce_zero", "allreduce_contrib");
			for (int j = 1; j < d->nranks; j++)
				DNN_CHECK_STARPU(starpu_mpi_get_data_on_node_detached(MPI_COMM_WORLD, G, j, NULL, NULL));
			dnn_param *pr = &m->params[q];
			dnn_sgd_args a = {.n = pr->n, .lr = sgd->lr, .momentum = sgd->momentum,
					  .weight_decay = pr->no_decay ? 0.0f : sgd->weight_decay,
					  .scale = 1.0f / (float)p->global_batch, .keep_grad = 1};
			dnn_insert_sgd_update(&a, pr->hw, pr->hv, G);
			dnn_insert_grad_zero(pr->hg);
		}
	} else {
		const int K = d->staleness + 1;
		for (int q = 0; q < P; q++) {
			dnn_param *pr = &m->params[q];
			int s = d->shard[q];
			/* Local step; weight decay split over the ranks so that the pushed changes add up. */
			dnn_sgd_args a = {.n = pr->n, .lr = sgd->lr, .momentum = sgd->momentum,
					  .weight_decay = pr->no_decay ? 0.0f : sgd->weight_decay / (float)d->nranks,
					  .scale = 1.0f / (float)p->global_batch};
			dnn_insert_sgd_update_delta(&a, pr->hw, pr->hv, pr->hg, d->delta[((size_t)d->rank * K + step % K) * P + q]);
			for (int j = 0; j < d->nranks; j++)
				DNN_CHECK_STARPU(starpu_mpi_task_insert(MPI_COMM_WORLD, &cl_grad_add, STARPU_RW | STARPU_COMMUTE,
									d->w_server[q], STARPU_R,
									d->delta[((size_t)j * K + step % K) * P + q],
									STARPU_EXECUTE_ON_NODE, s, STARPU_NAME, "ps_push",
									STARPU_TASK_COLOR, DNN_COLOR_UPDATE, 0));
			/* D is rewritten next time by a rank-local task the server never sees: drop the
			 * server's received copy from StarPU-MPI's cache, or it would reuse the stale one. */
			for (int j = 0; j < d->nranks; j++)
				starpu_mpi_cache_flush(MPI_COMM_WORLD, d->delta[((size_t)j * K + step % K) * P + q]);
			mpi_insert_copy(d->snap[(step % K) * P + q], d->w_server[q], s);
		}
	}
}

void dnn_dist_reduce_stats(dnn_plan *p, int slot)
{
	dnn_dist *d = p->m->dist;
	starpu_data_handle_t mine = d->stats_local[d->rank * d->nslots + slot];
	dnn_insert_grad_zero(mine);
	for (int c = 0; c < p->nchunks; c++)
		dnn_insert_grad_accum(mine, STARPU_RW, p->stats[slot * p->nchunks + c]);
	starpu_data_handle_t G = d->stats_global[slot];
	mpi_sum_into(G, d->stats_local + slot, (size_t)d->nslots, d->nranks, "stats_zero", "stats_contrib");
}

starpu_data_handle_t dnn_dist_stats_handle(dnn_plan *p, int slot, float **host)
{
	dnn_dist *d = p->m->dist;
	if (d->rank == 0) {
		*host = d->stats_global_mem + 2 * slot;
		return d->stats_global[slot];
	}
	*host = d->stats_local_mem + 2 * slot;
	return d->stats_local[d->rank * d->nslots + slot];
}

void dnn_dist_pull_final(dnn_model *m)
{
	dnn_dist *d = m->dist;
	if (!d || d->mode != DNN_MODE_ASYNC)
		return;
	for (int q = 0; q < m->nparams; q++) {
		for (int j = 0; j < d->nranks; j++)
			DNN_CHECK_STARPU(starpu_mpi_get_data_on_node_detached(MPI_COMM_WORLD, d->w_server[q], j, NULL, NULL));
		dnn_insert_grad_zero(m->params[q].hw);
		dnn_insert_grad_accum(m->params[q].hw, STARPU_RW, d->w_server[q]);
	}
	starpu_mpi_wait_for_all(MPI_COMM_WORLD);
}

void dnn_dist_sum_to_root(dnn_model *m, float *local, float *out, size_t n)
{
	dnn_dist *d = m->dist;
	STARPU_ASSERT(d && n > 0 && n <= UINT32_MAX);
	starpu_data_handle_t G = reg_vector(d, d->rank == 0 ? out : NULL, n, 0);
	dnn_grad_set_redux(G);
	starpu_data_handle_t *L = calloc((size_t)d->nranks, sizeof(*L));
	STARPU_ASSERT(L);
	for (int j = 0; j < d->nranks; j++)
		L[j] = reg_vector(d, j == d->rank ? local : NULL, n, j);
	mpi_sum_into(G, L, 1, d->nranks, "sum_zero", "sum_contrib");
	starpu_mpi_wait_for_all(MPI_COMM_WORLD);
	/* Unregistering brings the sum back into rank 0's `out`. */
	starpu_data_unregister(G);
	for (int j = 0; j < d->nranks; j++)
		starpu_data_unregister(L[j]);
	free(L);
}

static void unreg_all(starpu_data_handle_t *h, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (h[i])
			starpu_data_unregister(h[i]);
}

void dnn_dist_destroy(dnn_model *m)
{
	dnn_dist *d = m->dist;
	if (!d)
		return;
	starpu_mpi_wait_for_all(MPI_COMM_WORLD);
	const int P = m->nparams;
	/* Our own g_local entries are the model's hg handles: the model unregisters those. */
	for (int p = 0; p < P && d->mode == DNN_MODE_SYNC; p++)
		d->g_local[d->rank * P + p] = NULL;
	unreg_all(d->g_local, (size_t)d->nranks * P);
	if (d->g_global)
		unreg_all(d->g_global, (size_t)P);
	if (d->ring_chunk)
		unreg_all(d->ring_chunk, (size_t)P * d->nranks * d->nranks);
	if (d->w_server) {
		unreg_all(d->w_server, (size_t)P);
		unreg_all(d->snap, (size_t)(d->staleness + 1) * P);
		unreg_all(d->delta, (size_t)d->nranks * (d->staleness + 1) * P);
		for (int p = 0; p < P; p++)
			free(d->w_server_mem[p]);
	}
	unreg_all(d->stats_global, (size_t)d->nslots);
	unreg_all(d->stats_local, (size_t)d->nranks * d->nslots);
	free(d->g_local), free(d->g_global), free(d->ring_chunk), free(d->ring_off);
	free(d->w_server), free(d->snap), free(d->delta);
	free(d->w_server_mem), free(d->shard);
	free(d->stats_global), free(d->stats_local), free(d->stats_global_mem), free(d->stats_local_mem);
	free(d);
	m->dist = NULL;
}
