/* dist_async.c — --mode async, the parameter server (docs/ARCHITECTURE.md "Across nodes"):
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
#include <stdlib.h>
#include <string.h>

#include "dist_impl.h"
#include "optim.h"
#include "vec.h"

/* Server shard of parameter p: by layer (consecutive params of one node share a shard). */
static int shard_of(const dnn_model *m, int p)
{
	int layer = 0;
	for (int i = 0; i < m->g->nnodes; i++)
		if (m->param_of[i] >= 0 && m->param_of[i] <= p)
			layer = i;
	return layer % m->dist->nranks;
}

/* The server's handles: per parameter its copy (owner: its shard rank, starting from the same
 * initial parameters as every replica), S+1 snapshots, and every rank's last S+1 changes. */
int dnn_dist_async_setup(dnn_model *m, dnn_dist *d)
{
	const int P = m->nparams, rank = d->rank, nranks = d->nranks, K = d->staleness + 1;
	d->w_server = calloc((size_t)P, sizeof(starpu_data_handle_t));
	d->snap = calloc((size_t)K * P, sizeof(starpu_data_handle_t));
	d->delta = calloc((size_t)nranks * K * P, sizeof(starpu_data_handle_t));
	d->w_server_mem = calloc((size_t)P, sizeof(float *));
	d->shard = calloc((size_t)P, sizeof(int));
	if (!d->w_server || !d->snap || !d->delta || !d->w_server_mem || !d->shard)
		return -1;
	for (int p = 0; p < P; p++) {
		int s = d->shard[p] = shard_of(m, p);
		if (s == rank) {
			/* The server starts from the same initial parameters as every replica. */
			d->w_server_mem[p] = malloc(sizeof(float) * (size_t)m->params[p].n);
			if (!d->w_server_mem[p])
				return -1;
			memcpy(d->w_server_mem[p], m->params[p].w, sizeof(float) * (size_t)m->params[p].n);
		}
		d->w_server[p] = dnn_dist_register(d, d->w_server_mem[p], (size_t)m->params[p].n, s);
		for (int k = 0; k < K; k++)
			d->snap[k * P + p] = dnn_dist_register(d, NULL, (size_t)m->params[p].n, s);
	}
	for (int j = 0; j < nranks; j++)
		for (int k = 0; k < K; k++)
			for (int p = 0; p < P; p++)
				d->delta[((size_t)j * K + k) * P + p] = dnn_dist_register(d, NULL, (size_t)m->params[p].n, j);
	return 0;
}

/* dst <- src on `node`, with the vector codelets: zero then add (no copy codelet needed). */
static int mpi_insert_copy(starpu_data_handle_t dst, starpu_data_handle_t src, int node)
{
	DNN_TRY(dnn_insert_vec_zero(ON_NODE(node, "ps_snapshot_zero"), dst));
	return dnn_insert_vec_add(ON_NODE(node, "ps_snapshot"), dst, STARPU_RW, src);
}

int dnn_dist_before_forward(dnn_plan *p, long step)
{
	dnn_model *m = p->m;
	dnn_dist *d = m->dist;
	if (!d || d->mode != DNN_MODE_ASYNC || !p->train)
		return 0;
	long version = step - 1 - d->staleness; /* server version (step index) this step may use */
	long used = version >= 0 ? version : -1; /* -1: the initial parameters */
	long stale = step - 1 - used;
	d->staleness_sum += (double)stale;
	d->staleness_count++;
	if (stale > d->staleness_max)
		d->staleness_max = stale;
	if (version < 0)
		return 0;
	const int P = m->nparams, K = d->staleness + 1;
	/* Lookahead: the snapshot lacks every rank's changes of steps version+1 .. step-1. This
	 * rank adds its own; the other ranks' are estimated by its own too (all replicas train the
	 * same parameters on i.i.d. shards of the batch, so their steps are alike), so the
	 * gradients are taken near the point a synchronous run would use. The server itself only
	 * ever receives the true changes. Without lookahead the others' steps are simply missing. */
	const float own_weight = d->lookahead ? (float)d->nranks : 1.0f;
	for (int q = 0; q < P; q++) {
		starpu_data_handle_t snap = d->snap[(version % K) * P + q];
		/* The snapshot to every rank, then a local copy into this rank's replica plus this
		 * rank's own changes that the snapshot lacks. */
		DNN_TRY(dnn_dist_mpi_broadcast(snap, d->nranks, 0));
		DNN_TRY(dnn_insert_vec_zero(NULL, m->params[q].hw));
		DNN_TRY(dnn_insert_vec_add(NULL, m->params[q].hw, STARPU_RW, snap));
		for (long k = version + 1; k < step; k++)
			DNN_TRY(dnn_insert_vec_axpy(NULL, m->params[q].hw, own_weight,
						d->delta[((size_t)d->rank * K + k % K) * P + q]));
	}
	return 0;
}

/* The async step of parameter q: a local step that also writes the applied change, pushed to
 * the parameter's server shard, which then snapshots its copy for the pulls of later steps. */
int dnn_dist_async_push_step(dnn_plan *p, int q, long step, const dnn_optim_config *optim)
{
	dnn_model *m = p->m;
	dnn_dist *d = m->dist;
	const int K = d->staleness + 1, P = m->nparams, s = d->shard[q];
	dnn_param *pr = &m->params[q];
	/* Weight decay split over the ranks so that the pushed changes add up. */
	dnn_optim_args a = dnn_param_optim_args(pr, optim, p->global_batch, d->nranks);
	DNN_TRY(dnn_insert_optim_update_delta(NULL, &a, pr->hw, pr->hv, pr->hg, d->delta[((size_t)d->rank * K + step % K) * P + q]));
	dnn_task_opts push = {.mpi = 1, .node = s, .name = "ps_push", .color = DNN_COLOR_UPDATE};
	for (int j = 0; j < d->nranks; j++)
		DNN_TRY(dnn_insert_vec_add(&push, d->w_server[q], STARPU_RW | STARPU_COMMUTE,
					d->delta[((size_t)j * K + step % K) * P + q]));
	/* D is rewritten next time by a rank-local task the server never sees: drop the server's
	 * received copy from StarPU-MPI's cache, or it would reuse the stale one. */
	for (int j = 0; j < d->nranks; j++)
		starpu_mpi_cache_flush(MPI_COMM_WORLD, d->delta[((size_t)j * K + step % K) * P + q]);
	return mpi_insert_copy(d->snap[(step % K) * P + q], d->w_server[q], s);
}

static int pull_final(dnn_model *m)
{
	dnn_dist *d = m->dist;
	for (int q = 0; q < m->nparams; q++) {
		DNN_TRY(dnn_dist_mpi_broadcast(d->w_server[q], d->nranks, 0));
		DNN_TRY(dnn_insert_vec_zero(NULL, m->params[q].hw));
		DNN_TRY(dnn_insert_vec_add(NULL, m->params[q].hw, STARPU_RW, d->w_server[q]));
	}
	return starpu_mpi_wait_for_all(MPI_COMM_WORLD);
}

int dnn_dist_pull_final(dnn_model *m, char *err, size_t errlen)
{
	dnn_dist *d = m->dist;
	if (!d || d->mode != DNN_MODE_ASYNC)
		return 0;
	return dnn_dist_report(pull_final(m), "pulling the server's parameters", err, errlen);
}

void dnn_dist_async_destroy(dnn_model *m, dnn_dist *d)
{
	const int P = m->nparams;
	if (d->w_server)
		dnn_dist_unregister_all(d->w_server, (size_t)P);
	if (d->snap)
		dnn_dist_unregister_all(d->snap, (size_t)(d->staleness + 1) * P);
	if (d->delta)
		dnn_dist_unregister_all(d->delta, (size_t)d->nranks * (d->staleness + 1) * P);
	for (int p = 0; p < P && d->w_server_mem; p++)
		free(d->w_server_mem[p]);
	free(d->w_server), free(d->snap), free(d->delta);
	free(d->w_server_mem), free(d->shard);
}
