/* dist.c — training across ranks with StarPU-MPI (docs/ARCHITECTURE.md "Across nodes").
 *
 * Every rank runs the same per-chunk tasks on its own shard through the codelets' insert helpers
 * with no options (all their data is rank-local). The cross-rank tasks go through the same
 * helpers, given MPI options (dnn_task_opts: starpu_mpi_task_insert on a node): one insertion
 * path, Chameleon style. Only the handles that cross ranks are registered with StarPU-MPI, and
 * every rank submits the same cross-rank tasks in the same order, as StarPU-MPI requires.
 *
 * sync   per parameter p (or bucket of them, dist_buckets.c), in the order of the parameters:
 *        its all-reduce, by the algorithm of --allreduce (one file each in allreduce/, a
 *        dnn_allreduce_algo registered in allreduce/allreduce.def: tree.c, ring.c, rhd.c; the
 *        tree for the tensors too small for the chunked ones), then the same SGD step on every
 *        replica with the sum: read where the algorithm left it (the tree: its own handle, read
 *        only, then the local gradient is zeroed), or in the local gradient itself, summed in
 *        place (ring, rhd), which the update reads and zeroes.
 * async  the parameter server: dist_async.c.
 *
 * This file: set-up and tear-down (the handles of every rank's gradients and statistics; each
 * all-reduce entry's through its algorithm), the sync step, the priorities and placement of the
 * all-reduce tasks, the StarPU-MPI sum and broadcast the algorithms share, the statistics.
 */
#include "dist_impl.h"

#include <errno.h>
#include <math.h>
#include <starpu_mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errline.h"
#include "gradclip.h"
#include "optim.h"
#include "vec.h"

/* The all-reduce table, indexed by dnn_allreduce (built from allreduce/allreduce.def). */
static const dnn_allreduce_algo *const algo_table[] = {
#define DNN_ALLREDUCE_ALGO(name, ENUM) [DNN_ALLREDUCE_##ENUM] = &dnn_allreduce_##name,
#include "allreduce/allreduce.def"
#undef DNN_ALLREDUCE_ALGO
};

const dnn_allreduce_algo *dnn_allreduce_algo_get(dnn_allreduce a)
{
	return (unsigned)a < sizeof(algo_table) / sizeof(algo_table[0]) ? algo_table[a] : NULL;
}

/* DNN_ALLREDUCE_PRIO (the plan's config, p->cfg.allreduce_prio; 2 by default: docs/SIMULATION.md, study 5, +4% to
 * +10% at 2-16 simulated K80 nodes). 1 = the sync all-reduce's tasks and the updates of parameter
 * q get StarPU priority P - q, so that the layers the next forward needs first go first (P3,
 * ByteScheduler); 0: every such task at priority 0 (the ring's and rhd's hops keep
 * STARPU_MAX_PRIO either way). 2 = as 1, and under --pin-chunks these tasks are pinned too, to
 * chunk q mod K's worker: a pinned task waits in its worker's own queue, which StarPU serves
 * before the scheduler's, so an unpinned all-reduce task waits for every ready pinned forward or
 * backward task of that worker whatever its priority; pinned, it takes its place by priority. */
int dnn_dist_prio_of(const dnn_plan *p, int q) { return p->cfg.allreduce_prio ? p->m->nparams - q : 0; }

/* The options of parameter q's all-reduce tasks and update (mpi: cross-rank, on `node`). */
dnn_task_opts dnn_dist_ar_opts(const dnn_plan *p, int q, int mpi, int node, int prio)
{
	dnn_task_opts o = {.mpi = mpi, .node = node, .priority = prio, .pin_queue = !p->cfg.pin_by_mask};
	if (p->cfg.allreduce_prio >= 2 && p->chunk_worker)
		o.pinned = 1, o.worker = p->chunk_worker[q % p->nchunks];
	return o;
}

/* DNN_ALLREDUCE_ON (the plan's config, p->cfg.allreduce_on): 0 device, 1 host, 2 host-update. */
/* As dnn_dist_ar_opts, for a task of parameter q's all-reduce that DNN_ALLREDUCE_ON puts on the host
 * (`update`: the SGD step, there only at 2): pinned to a CPU worker (q mod the CPU workers, the
 * same id on every rank), whatever the priority level, so that it reads and writes host memory
 * where StarPU-MPI sends and receives; where there is no CPU worker, dnn_dist_ar_opts. */
dnn_task_opts dnn_dist_ar_place(const dnn_plan *p, int q, int mpi, int node, int prio, int update)
{
	dnn_task_opts o = dnn_dist_ar_opts(p, q, mpi, node, prio);
	const int on = p->cfg.allreduce_on;
	if (on == 0 || (update && on < 2))
		return o;
	int cpu[STARPU_NMAXWORKERS];
	const unsigned n = starpu_worker_get_ids_by_type(STARPU_CPU_WORKER, cpu, STARPU_NMAXWORKERS);
	if (n > 0)
		o.pinned = 1, o.worker = cpu[(unsigned)q % n];
	return o;
}

starpu_data_handle_t dnn_dist_register(dnn_dist *d, float *home, size_t n, int owner)
{
	starpu_data_handle_t h;
	if (home)
		starpu_vector_data_register(&h, STARPU_MAIN_RAM, (uintptr_t)home, (uint32_t)n, sizeof(float));
	else
		starpu_vector_data_register(&h, -1, 0, (uint32_t)n, sizeof(float));
	starpu_mpi_data_register(h, d->next_tag++, owner);
	return h;
}

starpu_data_handle_t dnn_dist_register_bf16(dnn_dist *d, size_t n, int owner)
{
	starpu_data_handle_t h;
	starpu_vector_data_register(&h, -1, 0, (uint32_t)n, sizeof(uint16_t));
	starpu_mpi_data_register(h, d->next_tag++, owner);
	return h;
}

starpu_data_handle_t dnn_dist_local(const dnn_dist *d, int e, int j)
{
	return e < d->nparams ? d->g_local[j * d->nparams + e] : d->bucket_local[j * d->nbuckets + (e - d->nparams)];
}

const starpu_data_handle_t *dnn_dist_locals(const dnn_dist *d, int e, size_t *stride)
{
	if (e < d->nparams) {
		*stride = (size_t)d->nparams;
		return d->g_local + e;
	}
	*stride = (size_t)d->nbuckets;
	return d->bucket_local + (e - d->nparams);
}

static int enable_dist(dnn_model *m, dnn_dist *d, int nslots);

int dnn_model_enable_dist(dnn_model *m, dnn_dist_mode mode, dnn_allreduce allreduce, int grad_bf16,
			  int ranks_on_one_node, size_t bucket_elems, int staleness, int lookahead, int nslots, char *err,
			  size_t errlen)
{
	int rank, nranks, rc;
	if ((rc = starpu_mpi_comm_rank(MPI_COMM_WORLD, &rank)) != 0 ||
	    (rc = starpu_mpi_comm_size(MPI_COMM_WORLD, &nranks)) != 0) {
		dnn_set_err(err, errlen, "StarPU-MPI", "cannot read the communicator's rank or size (error %d)", rc);
		return -1;
	}
	if (nranks < 2)
		return 0;
	if (mode == DNN_MODE_SYNC && !dnn_allreduce_algo_get(allreduce)) {
		dnn_set_err(err, errlen, "dnn_model_enable_dist", "--allreduce %s: not an algorithm (resolve auto first)",
			    dnn_allreduce_name(allreduce));
		return -1;
	}
	if (grad_bf16 && mode != DNN_MODE_SYNC) {
		dnn_set_err(err, errlen, "dnn_model_enable_dist", "bf16 gradients on the wire are a sync all-reduce's "
			    "(the async server's pushes are fp32)");
		return -1;
	}
	dnn_dist *d = calloc(1, sizeof(*d));
	if (!d) {
		dnn_set_err(err, errlen, m->g->source, "out of memory setting up %d ranks", nranks);
		return -1;
	}
	d->rank = rank, d->nranks = nranks, d->nparams = m->nparams, d->mode = mode, d->staleness = staleness,
	d->nslots = nslots;
	d->allreduce = allreduce;
	d->grad_bf16 = grad_bf16;
	d->one_node = ranks_on_one_node;
	d->bucket_elems = mode == DNN_MODE_SYNC ? bucket_elems : 0;
	d->lookahead = mode == DNN_MODE_ASYNC && lookahead && staleness > 0;
	d->next_tag = 1;
	m->dist = d;
	if (enable_dist(m, d, nslots) != 0) {
		dnn_set_err(err, errlen, m->g->source, "out of memory setting up the cross-rank handles of %d ranks", nranks);
		dnn_dist_destroy(m);
		return -1;
	}
	return 0;
}

dnn_allreduce dnn_allreduce_resolve(dnn_allreduce a, int nranks, int one_node)
{
	if (a != DNN_ALLREDUCE_AUTO)
		return a;
	if (one_node || nranks < 2)
		return DNN_ALLREDUCE_TREE;
	return (nranks & (nranks - 1)) ? DNN_ALLREDUCE_RING : DNN_ALLREDUCE_RHD;
}

int dnn_allreduce_check_ranks(dnn_allreduce a, int nranks, char *err, size_t errlen)
{
	const dnn_allreduce_algo *al = dnn_allreduce_algo_get(a);
	return al && al->check_ranks ? al->check_ranks(nranks, err, errlen) : 0;
}

int dnn_allreduce_takes_buckets(dnn_allreduce a)
{
	const dnn_allreduce_algo *al = dnn_allreduce_algo_get(a);
	return !al || !al->no_buckets;
}

/* The handles of dnn_model_enable_dist; -1 when an allocation fails (dnn_dist_destroy frees). */
static int enable_dist(dnn_model *m, dnn_dist *d, int nslots)
{
	const int P = m->nparams, rank = d->rank, nranks = d->nranks;
	if (dnn_dist_plan_buckets(m, d) != 0)
		return -1;
	/* Every rank's local gradient; ours is the REDUX handle the backward tasks already use. A
	 * bucketed tensor crosses ranks only inside its bucket: no per-rank copies of it. */
	d->g_local = calloc((size_t)nranks * P, sizeof(starpu_data_handle_t));
	if (!d->g_local)
		return -1;
	for (int j = 0; j < nranks && d->mode == DNN_MODE_SYNC; j++)
		for (int p = 0; p < P; p++) {
			starpu_data_handle_t *h = &d->g_local[j * P + p];
			if (j == rank) {
				*h = m->params[p].hg;
				starpu_mpi_data_register(*h, d->next_tag++, j);
			} else if (!dnn_dist_in_bucket(d, p)) {
				*h = dnn_dist_register(d, NULL, (size_t)m->params[p].n, j);
			}
		}
	if (d->nbuckets > 0) {
		const int NB = d->nbuckets;
		d->bucket_local = calloc((size_t)nranks * NB, sizeof(starpu_data_handle_t));
		if (!d->bucket_local)
			return -1;
		for (int b = 0; b < NB; b++)
			for (int j = 0; j < nranks; j++)
				d->bucket_local[j * NB + b] = dnn_dist_register(d, NULL, d->bucket_len[b], j);
	}
	if (d->mode == DNN_MODE_SYNC) {
		/* The all-reduce entries: the parameters, then the buckets. Each takes the run's
		 * algorithm where that one takes its size, else the tree. */
		const dnn_allreduce_algo *algo = dnn_allreduce_algo_get(d->allreduce);
		const int V = P + d->nbuckets;
		d->entry = calloc((size_t)V, sizeof(*d->entry));
		if (!d->entry)
			return -1;
		for (int e = 0; e < V; e++) {
			const size_t n = e < P ? (size_t)m->params[e].n : d->bucket_len[e - P];
			if (e < P && dnn_dist_in_bucket(d, e))
				continue;
			dnn_dist_entry *en = &d->entry[e];
			en->algo = !algo->takes || algo->takes(d, n) ? algo : &dnn_allreduce_tree;
			if (en->algo->setup(d, e, n) != 0)
				return -1;
		}
	} else if (dnn_dist_async_setup(m, d) != 0) {
		return -1;
	}
	d->stats_global = calloc((size_t)nslots, sizeof(starpu_data_handle_t));
	d->stats_local = calloc((size_t)nranks * nslots, sizeof(starpu_data_handle_t));
	d->stats_global_mem = calloc(2 * (size_t)nslots, sizeof(float));
	d->stats_local_mem = calloc(2 * (size_t)nslots, sizeof(float));
	if (!d->stats_global || !d->stats_local || !d->stats_global_mem || !d->stats_local_mem)
		return -1;
	for (int s = 0; s < nslots; s++) {
		d->stats_global[s] = dnn_dist_register(d, rank == 0 ? d->stats_global_mem + 2 * s : NULL, 2, 0);
		dnn_vec_set_sum_redux(d->stats_global[s]);
		for (int j = 0; j < nranks; j++)
			d->stats_local[j * nslots + s] =
				dnn_dist_register(d, j == rank ? d->stats_local_mem + 2 * s : NULL, 2, j);
	}
	return 0;
}

/* The reduction tree's shape (d->one_node, from dnn_model_enable_dist): across nodes binary (arity 2): each level
 * pairs the ranks left, one receives the other's partial sum and adds it, so rank 0 receives
 * log2 N sums instead of N - 1, and every add has exactly one operand from elsewhere, so the
 * order of the sum is fixed whatever the order of arrival. Simulated, 16 nodes x 4 K80 dies over
 * FDR, 4 MiB buckets: 3505.2 (flat) -> 4340.5 images/s (docs/SIMULATION.md study 5 (g)). When
 * every rank is on one node, flat (starpu_mpi_redux_data: all N - 1 contributions arrive at
 * rank 0, which adds them in arrival order): ranks that share cores wait for one per dependent
 * hop, and a 4 KiB all-reduce over 4 ranks here took 44-57 ms flat against 72-96 ms binary. */
int dnn_dist_mpi_redux(const dnn_dist *d, starpu_data_handle_t G, int prio)
{
	return d->one_node ? starpu_mpi_redux_data_prio(MPI_COMM_WORLD, G, prio)
			   : starpu_mpi_redux_data_prio_tree(MPI_COMM_WORLD, G, prio, 2);
}

double dnn_dist_choose_bucket_mb(double requested, size_t grad_bytes, int nranks, int ranks_on_one_node)
{
	if (requested >= 0)
		return requested;
	if (nranks < 2 || ranks_on_one_node)
		return 0;
	const double quarter = (double)grad_bytes / 4.0 / (1024.0 * 1024.0);
	return quarter < 1.0 ? quarter : 1.0;
}

/* The task names are <what>_zero and <what>_contrib (trace-summary counts "allreduce_contrib"). */
int dnn_dist_mpi_sum_into(const dnn_dist *d, starpu_data_handle_t G, const starpu_data_handle_t *local, size_t stride,
			  const char *zero_name, const char *contrib_name, const dnn_task_opts *base)
{
	dnn_task_opts o = base ? *base : (dnn_task_opts){0};
	const int prio = o.priority;
	o.mpi = 1, o.node = -1, o.name = zero_name;
	DNN_TRY(dnn_insert_vec_zero(&o, G));
	o.name = contrib_name;
	for (int j = 0; j < d->nranks; j++) {
		o.node = j;
		DNN_TRY(dnn_insert_vec_add(&o, G, STARPU_MPI_REDUX, local[(size_t)j * stride]));
	}
	return dnn_dist_mpi_redux(d, G, prio);
}

int dnn_dist_mpi_broadcast(starpu_data_handle_t h, int nranks, int first)
{
	for (int j = first; j < nranks; j++)
		DNN_TRY(starpu_mpi_get_data_on_node_detached(MPI_COMM_WORLD, h, j, NULL, NULL));
	return 0;
}

/* The sync step of parameter q: its all-reduce, then the same update on every replica with the
 * sum. Where the sum is the local gradient itself (summed in place: ring, rhd), the update reads
 * it and zeroes it; else (the tree) the update reads the algorithm's handle and keeps it, and the
 * local gradient is zeroed after. defer (--clip-grad-norm): no update yet; the handle it is to
 * read goes into p->clip_grad[q] (and p->clip_keep[q]: read only), for clipped_update. */
static int param_allreduce_step(dnn_plan *p, int q, const dnn_optim_config *optim, int defer)
{
	dnn_model *m = p->m;
	dnn_dist *d = m->dist;
	const dnn_task_opts h = dnn_dist_ar_place(p, q, 0, -1, dnn_dist_prio_of(p, q), 0);
	starpu_data_handle_t G;
	DNN_TRY(d->entry[q].algo->reduce(p, q, &h, &G));
	dnn_param *pr = &m->params[q];
	if (defer) {
		p->clip_grad[q] = G, p->clip_keep[q] = G != pr->hg;
		return 0;
	}
	dnn_optim_args a = dnn_param_optim_args(pr, optim, p->global_batch, 1);
	const dnn_task_opts u = dnn_dist_ar_place(p, q, 0, -1, dnn_dist_prio_of(p, q), 1);
	if (G == pr->hg)
		return dnn_insert_optim_update(&u, &a, pr->hw, pr->hv, pr->hg);
	a.keep_grad = 1;
	DNN_TRY(dnn_insert_optim_update(&u, &a, pr->hw, pr->hv, G));
	const dnn_task_opts o = dnn_dist_ar_opts(p, q, 0, -1, dnn_dist_prio_of(p, q));
	return dnn_insert_vec_zero(&o, pr->hg);
}

/* Where parameter q's update runs (and, clipping, its sum of squares): a bucket's members where
 * their bucket's tasks run (dnn_dist_bucket_step), the others where DNN_ALLREDUCE_ON puts it. */
static dnn_task_opts update_place(const dnn_plan *p, int q)
{
	const dnn_dist *d = p->m->dist;
	if (dnn_dist_in_bucket(d, q)) {
		const int lead = d->bucket_lead[d->bucket_of[q]];
		return dnn_dist_ar_opts(p, lead, 0, -1, dnn_dist_prio_of(p, lead));
	}
	return dnn_dist_ar_place(p, q, 0, -1, dnn_dist_prio_of(p, q), 1);
}

/* --clip-grad-norm, after every all-reduce: parameter q's update with the coefficient, reading
 * the handle its all-reduce left (param_allreduce_step, dnn_dist_bucket_step with defer). */
static int clipped_update(dnn_plan *p, int slot, int q, const dnn_optim_config *optim)
{
	dnn_param *pr = &p->m->params[q];
	dnn_optim_args a = dnn_param_optim_args(pr, optim, p->global_batch, 1);
	const dnn_task_opts u = update_place(p, q);
	if (!p->clip_keep[q])
		return dnn_insert_optim_update_clipped(&u, &a, pr->hw, pr->hv, p->clip_grad[q], dnn_clip_coef(p, slot));
	a.keep_grad = 1;
	DNN_TRY(dnn_insert_optim_update_clipped(&u, &a, pr->hw, pr->hv, p->clip_grad[q], dnn_clip_coef(p, slot)));
	const dnn_task_opts o = dnn_dist_ar_opts(p, q, 0, -1, dnn_dist_prio_of(p, q));
	return dnn_insert_vec_zero(&o, pr->hg);
}

/* Sync with --clip-grad-norm: every entry's all-reduce first, then the clipping tasks over the
 * all-reduced gradients (the same bits on every rank, so every rank computes the same
 * coefficient: gradclip.h), then the updates. The coefficient's task runs at the first layer's
 * priority: every update waits for it. */
static int sync_step_clipped(dnn_plan *p, int slot, const dnn_optim_config *optim)
{
	dnn_dist *d = p->m->dist;
	const int P = p->m->nparams;
	for (int q = 0; q < P; q++) {
		if (!dnn_dist_in_bucket(d, q))
			DNN_TRY(param_allreduce_step(p, q, optim, 1));
		else if (d->bucket_lead[d->bucket_of[q]] == q)
			DNN_TRY(dnn_dist_bucket_step(p, d->bucket_of[q], optim, 1));
	}
	dnn_task_opts *opts = malloc(sizeof(dnn_task_opts) * (size_t)(P > 0 ? P : 1));
	if (!opts)
		return -ENOMEM;
	for (int q = 0; q < P; q++)
		opts[q] = update_place(p, q), opts[q].name = "grad_sumsq";
	const dnn_task_opts copt = dnn_dist_ar_opts(p, 0, 0, -1, dnn_dist_prio_of(p, 0));
	const int n = dnn_clip_submit(p, slot, p->clip_grad, opts, &copt, optim->clip_norm);
	free(opts);
	if (n < 0)
		return n;
	for (int q = 0; q < P; q++)
		DNN_TRY(clipped_update(p, slot, q, optim));
	return 0;
}

int dnn_dist_after_backward(dnn_plan *p, int slot, long step, const dnn_optim_config *optim)
{
	dnn_dist *d = p->m->dist;
	if (p->clip_used)
		p->clip_used[slot] = 0;
	if (optim->clip_norm > 0) {
		if (d->mode != DNN_MODE_SYNC) /* refused before: dnn_submit_step */
			return -EINVAL;
		return sync_step_clipped(p, slot, optim);
	}
	for (int q = 0; q < p->m->nparams; q++) {
		if (dnn_dist_in_bucket(d, q)) {
			if (d->bucket_lead[d->bucket_of[q]] == q)
				DNN_TRY(dnn_dist_bucket_step(p, d->bucket_of[q], optim, 0));
		} else if (d->mode == DNN_MODE_ASYNC)
			DNN_TRY(dnn_dist_async_push_step(p, q, step, optim));
		else
			DNN_TRY(param_allreduce_step(p, q, optim, 0));
	}
	return 0;
}

/* One sync all-reduce (and update) of parameter q alone, by the path dnn_dist_after_backward
 * takes for it (the microbenchmark runtime/allreduce_bench.c times this; a bucketed q: its bucket). */
int dnn_dist_allreduce_param(dnn_plan *p, int q, const dnn_optim_config *optim)
{
	dnn_dist *d = p->m->dist;
	if (!d || d->mode != DNN_MODE_SYNC || q < 0 || q >= p->m->nparams)
		return -EINVAL;
	if (dnn_dist_in_bucket(d, q))
		return dnn_dist_bucket_step(p, d->bucket_of[q], optim, 0);
	return param_allreduce_step(p, q, optim, 0);
}

int dnn_dist_reduce_param(dnn_plan *p, int q, starpu_data_handle_t *sum)
{
	dnn_dist *d = p->m->dist;
	if (!d || d->mode != DNN_MODE_SYNC || q < 0 || q >= p->m->nparams || dnn_dist_in_bucket(d, q))
		return -EINVAL;
	const dnn_task_opts h = dnn_dist_ar_place(p, q, 0, -1, dnn_dist_prio_of(p, q), 0);
	return d->entry[q].algo->reduce(p, q, &h, sum);
}

int dnn_dist_reduce_stats(dnn_plan *p, int slot)
{
	dnn_dist *d = p->m->dist;
	starpu_data_handle_t mine = d->stats_local[d->rank * d->nslots + slot];
	DNN_TRY(dnn_insert_vec_zero(NULL, mine));
	for (int c = 0; c < p->nchunks; c++)
		DNN_TRY(dnn_insert_vec_add(NULL, mine, STARPU_RW, p->stats[slot * p->nchunks + c]));
	return dnn_dist_mpi_sum_into(d, d->stats_global[slot], d->stats_local + slot, (size_t)d->nslots, "stats_zero",
				     "stats_contrib", NULL);
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

int dnn_dist_report(int rc, const char *what, char *err, size_t errlen)
{
	if (rc != 0)
		dnn_set_err(err, errlen, "StarPU-MPI", "%s failed: %s", what, strerror(rc < 0 ? -rc : rc));
	return rc != 0 ? -1 : 0;
}

int dnn_dist_sum_to_root(dnn_model *m, float *local, float *out, size_t n, char *err, size_t errlen)
{
	dnn_dist *d = m->dist;
	if (!d || n == 0 || n > UINT32_MAX) {
		dnn_set_err(err, errlen, "dnn_dist_sum_to_root", "needs a multi-rank model and 1 to 2^32-1 floats (got %zu)", n);
		return -1;
	}
	starpu_data_handle_t *L = calloc((size_t)d->nranks, sizeof(*L));
	if (!L) {
		dnn_set_err(err, errlen, "dnn_dist_sum_to_root", "out of memory");
		return -1;
	}
	starpu_data_handle_t G = dnn_dist_register(d, d->rank == 0 ? out : NULL, n, 0);
	dnn_vec_set_sum_redux(G);
	for (int j = 0; j < d->nranks; j++)
		L[j] = dnn_dist_register(d, j == d->rank ? local : NULL, n, j);
	int rc = dnn_dist_mpi_sum_into(d, G, L, 1, "sum_zero", "sum_contrib", NULL);
	int wrc = starpu_mpi_wait_for_all(MPI_COMM_WORLD);
	/* Unregistering brings the sum back into rank 0's `out`. */
	starpu_data_unregister(G);
	for (int j = 0; j < d->nranks; j++)
		starpu_data_unregister(L[j]);
	free(L);
	return dnn_dist_report(rc ? rc : wrc, "summing over the ranks", err, errlen);
}

void dnn_dist_unregister_all(starpu_data_handle_t *h, size_t n)
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
	/* Tear-down: a failed wait has nothing left to report to (the run is ending either way). */
	(void)starpu_mpi_wait_for_all(MPI_COMM_WORLD);
	const int P = m->nparams;
	/* Our own g_local entries are the model's hg handles: the model unregisters those. */
	for (int p = 0; p < P && d->mode == DNN_MODE_SYNC && d->g_local; p++)
		d->g_local[d->rank * P + p] = NULL;
	if (d->g_local)
		dnn_dist_unregister_all(d->g_local, (size_t)d->nranks * P);
	for (int e = 0; d->entry && e < P + d->nbuckets; e++) {
		if (d->entry[e].h)
			dnn_dist_unregister_all(d->entry[e].h, d->entry[e].nh);
		free(d->entry[e].h), free(d->entry[e].off);
	}
	dnn_dist_async_destroy(m, d);
	if (d->bucket_local)
		dnn_dist_unregister_all(d->bucket_local, (size_t)d->nranks * d->nbuckets);
	if (d->stats_global)
		dnn_dist_unregister_all(d->stats_global, (size_t)d->nslots);
	if (d->stats_local)
		dnn_dist_unregister_all(d->stats_local, (size_t)d->nranks * d->nslots);
	free(d->g_local), free(d->entry);
	free(d->bucket_of), free(d->bucket_off), free(d->bucket_lead), free(d->bucket_len), free(d->bucket_zeroed);
	free(d->bucket_local);
	free(d->stats_global), free(d->stats_local), free(d->stats_global_mem), free(d->stats_local_mem);
	free(d);
	m->dist = NULL;
}

int64_t dnn_dist_reserve_tags(dnn_dist *d, int64_t n)
{
	const int64_t first = d->next_tag;
	d->next_tag += n;
	return first;
}

int dnn_dist_is_sync(const dnn_dist *d) { return d && d->mode == DNN_MODE_SYNC; }

int dnn_dist_rank(const dnn_dist *d) { return d ? d->rank : 0; }
int dnn_dist_nranks(const dnn_dist *d) { return d ? d->nranks : 1; }

void dnn_dist_get_info(const dnn_dist *d, dnn_dist_info *info)
{
	*info = (dnn_dist_info){0};
	if (!d)
		return;
	info->allreduces = d->allreduces;
	info->lookahead = d->lookahead;
	info->staleness_mean = d->staleness_count ? d->staleness_sum / (double)d->staleness_count : 0.0;
	info->staleness_max = d->staleness_max;
}
