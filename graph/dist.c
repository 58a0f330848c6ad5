/* dist.c — training across ranks with StarPU-MPI (docs/ARCHITECTURE.md "Across nodes").
 *
 * Every rank runs the same per-chunk tasks on its own shard through the codelets' insert helpers
 * with no options (all their data is rank-local). The cross-rank tasks go through the same
 * helpers, given MPI options (dnn_task_opts: starpu_mpi_task_insert on a node): one insertion
 * path, Chameleon style. Only the handles that cross ranks are registered with StarPU-MPI, and
 * every rank submits the same cross-rank tasks in the same order, as StarPU-MPI requires:
 *
 * sync   per parameter p:  zero(G_p) on rank 0
 *                          for each rank j: G_p += g_p[j]  (STARPU_MPI_REDUX, executed on j)
 *                          StarPU-MPI's reduction tree of cl_vec_redux_add tasks (binary
 *                                                          across nodes, flat on one: mpi_sum_into)
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
 *        --allreduce rhd: the same chunks, summed by recursive halving and gathered by recursive
 *        doubling (power-of-two N; rhd_allreduce_step), 2 log2 N dependent hops instead of 2(N-1).
 *        --bucket-mb M: the tensors below M MiB are packed, in backward order, into buckets of
 *        up to M MiB (slice_put on each rank), each bucket all-reduced as one tensor (with the
 *        ring or rhd when it has N * DNN_RING_MIN_CHUNK elements or more, else the tree) and
 *        unpacked (slice_get) before the updates: the same sums in fewer, bigger messages
 *        (ResNet-50 at 4 MiB: 161 all-reduces -> 22). A bucket's pack waits only for its
 *        members' gradients, so it runs during the backward of the layers below them.
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

#include <errno.h>
#include <math.h>
#include <starpu_mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dnn_codelet.h"
#include "errline.h"
#include "vec.h"
#include "optim.h"

/* Options of a cross-rank task: executed on `node` (-1: where the written data is owned). */
#define ON_NODE(node_, name_) (&(dnn_task_opts){.mpi = 1, .node = (node_), .name = (name_)})

/* Ring all-reduce: below this many elements per chunk a tensor takes the tree (its 2(N-1) hops
 * of a few hundred bytes each cost latency and tasks, and save no bandwidth worth having). */
#define DNN_RING_MIN_CHUNK 256

/* The multi-rank state of a model (model.h: m->dist; opaque outside this file). Each rank
 * holds a replica of the parameters and a shard of every global batch (docs/ARCHITECTURE.md "Across
 * nodes"); only the handles that cross ranks are registered with StarPU-MPI. */

struct dnn_dist {
	int rank, nranks;
	dnn_dist_mode mode;
	int staleness;                     // async: pull for step i waits for server version i - S
	int64_t next_tag;
	/* sync: per parameter, the all-reduced gradient (owner rank 0) and every rank's local
	 * REDUX gradient ([rank * nparams + p]; this rank's entry is params[p].hg). */
	starpu_data_handle_t *g_global, *g_local;
	dnn_allreduce allreduce;
	/* sync ring: per parameter p that takes the ring (ring_chunk non-NULL at p * N * N), every
	 * rank j's chunk c buffer, [(p * N + j) * N + c], owner j; ring_off[p * (N + 1) + c] is chunk
	 * c's first element (c = N: the tensor's size). Tensors too small for the ring use the tree.
	 * Entries P + b are bucket b's, when it takes the ring (--bucket-mb). */
	starpu_data_handle_t *ring_chunk;
	size_t *ring_off;
	/* sync, --bucket-mb: the tensors below the bucket size are packed, in backward order, into
	 * buckets of at most bucket_elems elements, each all-reduced as one tensor (fewer, bigger
	 * messages, as PyTorch DDP's buckets): with the ring or rhd when the bucket is big enough
	 * for it (takes_ring), else with the tree. Per parameter: bucket_of (-1: not bucketed) and bucket_off (its first element in the bucket);
	 * per bucket b: bucket_len, bucket_lead (its lowest parameter index: where its tasks are
	 * submitted), every rank j's packed gradient bucket_local[j * nbuckets + b] (owner j) and,
	 * for a tree bucket, the sum bucket_global[b] (owner 0; NULL for a ring bucket).
	 * allreduces = collectives per step (buckets + the rest). bucket_zeroed[b]: this rank's
	 * bucket was zeroed once (its first pack); its members tile it, so later packs overwrite
	 * every element and need no zeroing (bucket_allreduce_step).
	 */
	size_t bucket_elems;
	int nbuckets, allreduces;
	int *bucket_of, *bucket_lead;
	size_t *bucket_off, *bucket_len;
	char *bucket_zeroed;
	starpu_data_handle_t *bucket_local, *bucket_global;
	/* async: per parameter, the server copy (owner: p's shard rank), S+1 snapshots of it, and
	 * every rank's applied changes of the last S+1 steps ([(rank * (S+1) + k) * nparams + p]). */
	starpu_data_handle_t *w_server, *snap, *delta; // snap[k * nparams + p], k in [0, S]
	float **w_server_mem;
	int *shard;                        // async: server rank of each parameter (by layer)
	int lookahead;                     // async: estimate the others' missing steps by our own
	/* step statistics: [slot] global (owner 0) and [rank * nslots + slot] per-rank sums */
	starpu_data_handle_t *stats_global, *stats_local;
	float *stats_global_mem, *stats_local_mem;
	int nslots;
	double staleness_sum;              // async bookkeeping, for the result line
	long staleness_max, staleness_count;
};

/* DNN_ALLREDUCE_PRIO (dnn_dist_set_priorities; 2 by default: docs/SIMULATION.md, study 5, +4% to
 * +10% at 2-16 simulated K80 nodes). 1 = the sync all-reduce's tasks and the updates of parameter
 * q get StarPU priority P - q, so that the layers the next forward needs first go first (P3,
 * ByteScheduler); 0: every such task at priority 0 (the ring's and rhd's hops keep
 * STARPU_MAX_PRIO either way). 2 = as 1, and under --pin-chunks these tasks are pinned too, to
 * chunk q mod K's worker: a pinned task waits in its worker's own queue, which StarPU serves
 * before the scheduler's, so an unpinned all-reduce task waits for every ready pinned forward or
 * backward task of that worker whatever its priority; pinned, it takes its place by priority. */
static int g_prio = 2;

void dnn_dist_set_priorities(int level) { g_prio = level; }

static int prio_of(const dnn_model *m, int q) { return g_prio ? m->nparams - q : 0; }

/* The options of parameter q's all-reduce tasks and update (mpi: cross-rank, on `node`). */
static dnn_task_opts ar_opts(const dnn_plan *p, int q, int mpi, int node, int prio)
{
	dnn_task_opts o = {.mpi = mpi, .node = node, .priority = prio};
	if (g_prio >= 2 && p->chunk_worker)
		o.pinned = 1, o.worker = p->chunk_worker[q % p->nchunks];
	return o;
}

/* DNN_ALLREDUCE_ON (dnn_dist_set_allreduce_on; graph/dist.h): 0 device, 1 host, 2 host-update. */
static int g_on;

void dnn_dist_set_allreduce_on(int where) { g_on = where; }

/* As ar_opts, for a task of parameter q's all-reduce that DNN_ALLREDUCE_ON puts on the host
 * (`update`: the SGD step, there only at 2): pinned to a CPU worker (q mod the CPU workers, the
 * same id on every rank), whatever the priority level, so that it reads and writes host memory
 * where StarPU-MPI sends and receives; where there is no CPU worker, ar_opts. */
static dnn_task_opts ar_place(const dnn_plan *p, int q, int mpi, int node, int prio, int update)
{
	dnn_task_opts o = ar_opts(p, q, mpi, node, prio);
	if (g_on == 0 || (update && g_on < 2))
		return o;
	int cpu[STARPU_NMAXWORKERS];
	const unsigned n = starpu_worker_get_ids_by_type(STARPU_CPU_WORKER, cpu, STARPU_NMAXWORKERS);
	if (n > 0)
		o.pinned = 1, o.worker = cpu[(unsigned)q % n];
	return o;
}

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

static int enable_dist(dnn_model *m, dnn_dist *d, dnn_dist_mode mode, int staleness, int nslots);

int dnn_model_enable_dist(dnn_model *m, dnn_dist_mode mode, dnn_allreduce allreduce, size_t bucket_elems,
			  int staleness, int lookahead, int nslots, char *err, size_t errlen)
{
	int rank, nranks, rc;
	if ((rc = starpu_mpi_comm_rank(MPI_COMM_WORLD, &rank)) != 0 ||
	    (rc = starpu_mpi_comm_size(MPI_COMM_WORLD, &nranks)) != 0) {
		dnn_set_err(err, errlen, "StarPU-MPI", "cannot read the communicator's rank or size (error %d)", rc);
		return -1;
	}
	if (nranks < 2)
		return 0;
	dnn_dist *d = calloc(1, sizeof(*d));
	if (!d) {
		dnn_set_err(err, errlen, m->g->source, "out of memory setting up %d ranks", nranks);
		return -1;
	}
	d->rank = rank, d->nranks = nranks, d->mode = mode, d->staleness = staleness, d->nslots = nslots;
	d->allreduce = allreduce;
	d->bucket_elems = mode == DNN_MODE_SYNC ? bucket_elems : 0;
	d->lookahead = mode == DNN_MODE_ASYNC && lookahead && staleness > 0;
	d->next_tag = 1;
	m->dist = d;
	if (enable_dist(m, d, mode, staleness, nslots) != 0) {
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
	if (a == DNN_ALLREDUCE_RHD && (nranks & (nranks - 1))) {
		snprintf(err, errlen, "--allreduce rhd needs a power-of-two number of ranks, not %d (use tree or ring)",
			 nranks);
		return -1;
	}
	return 0;
}

/* Does a tensor of n elements take the ring, or recursive halving-doubling (both cut it into N
 * chunks, ring_chunk), else the tree? */
static int takes_ring(const dnn_dist *d, long n)
{
	return (d->allreduce == DNN_ALLREDUCE_RING || d->allreduce == DNN_ALLREDUCE_RHD) &&
	       (size_t)n >= (size_t)d->nranks * DNN_RING_MIN_CHUNK;
}

/* Close the open bucket b of `members` tensors: 1 when it is kept; a bucket of one tensor is no
 * bucket (that tensor, its lead, keeps its own all-reduce) and b is reused. */
static int close_bucket(dnn_dist *d, int b, int members)
{
	if (members > 1)
		return 1;
	d->bucket_of[d->bucket_lead[b]] = -1, d->bucket_off[d->bucket_lead[b]] = 0;
	d->bucket_len[b] = 0;
	return 0;
}

/* Sync, --bucket-mb: group the tensors smaller than a bucket, in backward order (the last
 * parameter's gradient is complete first), into buckets of at most bucket_elems elements; a
 * bucket is closed as soon as the next tensor would not fit. A tensor of a bucket's size or more
 * keeps its own all-reduce. Same result on every rank: it depends only on the parameter sizes
 * and the rank count. -1 when an allocation fails. */
static int plan_buckets(const dnn_model *m, dnn_dist *d)
{
	const int P = m->nparams;
	d->allreduces = P;
	if (d->bucket_elems == 0)
		return 0;
	d->bucket_of = malloc((size_t)P * sizeof(int));
	d->bucket_off = calloc((size_t)P, sizeof(size_t));
	d->bucket_lead = malloc((size_t)P * sizeof(int));
	d->bucket_len = calloc((size_t)P, sizeof(size_t));
	d->bucket_zeroed = calloc((size_t)P, 1);
	if (!d->bucket_of || !d->bucket_off || !d->bucket_lead || !d->bucket_len || !d->bucket_zeroed)
		return -1;
	int nb = 0, members = 0; /* the open bucket is nb, holding `members` tensors */
	for (int p = P - 1; p >= 0; p--) {
		const size_t n = (size_t)m->params[p].n;
		d->bucket_of[p] = -1;
		if (n >= d->bucket_elems)
			continue;
		if (members > 0 && d->bucket_len[nb] + n > d->bucket_elems)
			nb += close_bucket(d, nb, members), members = 0;
		d->bucket_of[p] = nb, d->bucket_off[p] = d->bucket_len[nb], d->bucket_lead[nb] = p;
		d->bucket_len[nb] += n, members++;
	}
	if (members > 0)
		nb += close_bucket(d, nb, members);
	d->nbuckets = nb;
	for (int p = 0; p < P; p++)
		d->allreduces -= d->bucket_of[p] >= 0;
	d->allreduces += nb;
	return 0;
}

/* Is parameter p's gradient all-reduced inside a bucket? */
static int in_bucket(const dnn_dist *d, int p)
{
	return d->bucket_of && d->bucket_of[p] >= 0;
}

/* The handles of dnn_model_enable_dist; -1 when an allocation fails (dnn_dist_destroy frees). */
static int enable_dist(dnn_model *m, dnn_dist *d, dnn_dist_mode mode, int staleness, int nslots)
{
	const int P = m->nparams, rank = d->rank, nranks = d->nranks;
	if (plan_buckets(m, d) != 0)
		return -1;
	/* Every rank's local gradient; ours is the REDUX handle the backward tasks already use. A
	 * bucketed tensor crosses ranks only inside its bucket: no per-rank copies of it. */
	d->g_local = calloc((size_t)nranks * P, sizeof(starpu_data_handle_t));
	if (!d->g_local)
		return -1;
	for (int j = 0; j < nranks && mode == DNN_MODE_SYNC; j++)
		for (int p = 0; p < P; p++) {
			starpu_data_handle_t *h = &d->g_local[j * P + p];
			if (j == rank) {
				*h = m->params[p].hg;
				starpu_mpi_data_register(*h, d->next_tag++, j);
			} else if (!in_bucket(d, p)) {
				*h = reg_vector(d, NULL, (size_t)m->params[p].n, j);
			}
		}
	if (d->nbuckets > 0) {
		const int NB = d->nbuckets;
		d->bucket_local = calloc((size_t)nranks * NB, sizeof(starpu_data_handle_t));
		d->bucket_global = calloc((size_t)NB, sizeof(starpu_data_handle_t));
		if (!d->bucket_local || !d->bucket_global)
			return -1;
		for (int b = 0; b < NB; b++) {
			for (int j = 0; j < nranks; j++)
				d->bucket_local[j * NB + b] = reg_vector(d, NULL, d->bucket_len[b], j);
			if (takes_ring(d, (long)d->bucket_len[b]))
				continue; /* its ring chunks: below */
			d->bucket_global[b] = reg_vector(d, NULL, d->bucket_len[b], 0);
			dnn_vec_set_sum_redux(d->bucket_global[b]);
		}
	}
	if (mode == DNN_MODE_SYNC) {
		const int N = nranks;
		d->g_global = calloc((size_t)P, sizeof(starpu_data_handle_t));
		const size_t V = (size_t)P + (size_t)d->nbuckets; /* the parameters, then the buckets */
		d->ring_chunk = calloc(V * N * N, sizeof(starpu_data_handle_t));
		d->ring_off = calloc(V * (N + 1), sizeof(size_t));
		if (!d->g_global || !d->ring_chunk || !d->ring_off)
			return -1;
		for (int p = 0; p < (int)V; p++) {
			const size_t n = p < P ? (size_t)m->params[p].n : d->bucket_len[p - P];
			if (p < P && in_bucket(d, p))
				continue;
			if (takes_ring(d, (long)n)) {
				size_t *off = &d->ring_off[(size_t)p * (N + 1)];
				for (int c = 0; c <= N; c++) /* the first n % N chunks get one more element */
					off[c] = (size_t)c * (n / N) + (size_t)(c < (int)(n % N) ? c : (int)(n % N));
				for (int j = 0; j < N; j++)
					for (int c = 0; c < N; c++)
						d->ring_chunk[((size_t)p * N + j) * N + c] =
							reg_vector(d, NULL, off[c + 1] - off[c], j);
			} else if (p < P) {
				d->g_global[p] = reg_vector(d, NULL, n, 0);
				dnn_vec_set_sum_redux(d->g_global[p]);
			}
		}
	} else {
		const int K = staleness + 1;
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
	if (!d->stats_global || !d->stats_local || !d->stats_global_mem || !d->stats_local_mem)
		return -1;
	for (int s = 0; s < nslots; s++) {
		d->stats_global[s] = reg_vector(d, rank == 0 ? d->stats_global_mem + 2 * s : NULL, 2, 0);
		dnn_vec_set_sum_redux(d->stats_global[s]);
		for (int j = 0; j < nranks; j++)
			d->stats_local[j * nslots + s] = reg_vector(d, j == rank ? d->stats_local_mem + 2 * s : NULL, 2, j);
	}
	return 0;
}

/* dst <- src on `node`, with the vector codelets: zero then add (no copy codelet needed). */
static int mpi_insert_copy(starpu_data_handle_t dst, starpu_data_handle_t src, int node)
{
	DNN_TRY(dnn_insert_vec_zero(ON_NODE(node, "ps_snapshot_zero"), dst));
	return dnn_insert_vec_add(ON_NODE(node, "ps_snapshot"), dst, STARPU_RW, src);
}

/* The reduction tree's shape (dnn_dist_choose_allreduce): across nodes binary (arity 2): each level
 * pairs the ranks left, one receives the other's partial sum and adds it, so rank 0 receives
 * log2 N sums instead of N - 1, and every add has exactly one operand from elsewhere, so the
 * order of the sum is fixed whatever the order of arrival. Simulated, 16 nodes x 4 K80 dies over
 * FDR, 4 MiB buckets: 3505.2 (flat) -> 4340.5 images/s (docs/SIMULATION.md study 5 (g)). When
 * every rank is on one node, flat (starpu_mpi_redux_data: all N - 1 contributions arrive at
 * rank 0, which adds them in arrival order): ranks that share cores wait for one per dependent
 * hop, and a 4 KiB all-reduce over 4 ranks here took 44-57 ms flat against 72-96 ms binary. */
static int g_one_node;

dnn_allreduce dnn_dist_choose_allreduce(dnn_allreduce a, int nranks, int ranks_on_one_node)
{
	g_one_node = ranks_on_one_node;
	return dnn_allreduce_resolve(a, nranks, ranks_on_one_node);
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

int dnn_dist_mpi_redux(starpu_data_handle_t G, int prio)
{
	return g_one_node ? starpu_mpi_redux_data_prio(MPI_COMM_WORLD, G, prio)
			  : starpu_mpi_redux_data_prio_tree(MPI_COMM_WORLD, G, prio, 2);
}

/* G <- the sum over ranks j of local[j * stride], into G's owner: zero G, one STARPU_MPI_REDUX
 * contribution executed on each rank, then StarPU-MPI's reduction tree (binary or flat, above).
 * The task names are <what>_zero and <what>_contrib (trace-summary counts "allreduce_contrib"). */
static int mpi_sum_into(starpu_data_handle_t G, const starpu_data_handle_t *local, size_t stride, int nranks,
			const char *zero_name, const char *contrib_name, const dnn_task_opts *base)
{
	dnn_task_opts o = base ? *base : (dnn_task_opts){0};
	const int prio = o.priority;
	o.mpi = 1, o.node = -1, o.name = zero_name;
	DNN_TRY(dnn_insert_vec_zero(&o, G));
	o.name = contrib_name;
	for (int j = 0; j < nranks; j++) {
		o.node = j;
		DNN_TRY(dnn_insert_vec_add(&o, G, STARPU_MPI_REDUX, local[(size_t)j * stride]));
	}
	return dnn_dist_mpi_redux(G, prio);
}

/* Every rank takes part in every transfer of h to every rank (the owner posts the sends). */
static int mpi_broadcast(starpu_data_handle_t h, int nranks, int first)
{
	for (int j = first; j < nranks; j++)
		DNN_TRY(starpu_mpi_get_data_on_node_detached(MPI_COMM_WORLD, h, j, NULL, NULL));
	return 0;
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
		DNN_TRY(mpi_broadcast(snap, d->nranks, 0));
		DNN_TRY(dnn_insert_vec_zero(NULL, m->params[q].hw));
		DNN_TRY(dnn_insert_vec_add(NULL, m->params[q].hw, STARPU_RW, snap));
		for (long k = version + 1; k < step; k++)
			DNN_TRY(dnn_insert_vec_axpy(NULL, m->params[q].hw, own_weight,
						d->delta[((size_t)d->rank * K + k % K) * P + q]));
	}
	return 0;
}

/* Rank j's gradient that the ring or rhd sums as entry q: parameter q's (q < P), else rank j's
 * packed bucket q - P. */
static starpu_data_handle_t ring_source(const dnn_dist *d, int P, int q, int j)
{
	return q < P ? d->g_local[j * P + q] : d->bucket_local[j * d->nbuckets + (q - P)];
}

/* The ring's and rhd's first stage: every rank copies its gradient of parameter q (or bucket
 * q - P, ring_source) into its N chunks A[j * N + c] (the slices at off[c]). Tasks named `name`,
 * with o's other options. */
static int chunks_copy_in(dnn_plan *p, int q, dnn_task_opts *o, const char *name)
{
	dnn_dist *d = p->m->dist;
	const int N = d->nranks, P = p->m->nparams;
	starpu_data_handle_t *A = &d->ring_chunk[(size_t)q * N * N];
	const size_t *off = &d->ring_off[(size_t)q * (N + 1)];
	o->name = name;
	for (int j = 0; j < N; j++)
		for (int c = 0; c < N; c++) {
			o->node = j;
			DNN_TRY(dnn_insert_vec_slice_get(o, A[j * N + c], ring_source(d, P, q, j), off[c]));
		}
	return 0;
}

/* Their last stage: every rank's chunks, now the global sums, go back into its gradient, which
 * then holds the global sum: the update reads it and zeroes it for the next step (a bucket's
 * members are unpacked and updated by bucket_allreduce_step). */
static int chunks_copy_out_update(dnn_plan *p, int q, dnn_task_opts *o, const char *name, const dnn_optim_config *optim)
{
	dnn_model *m = p->m;
	dnn_dist *d = m->dist;
	const int N = d->nranks, P = m->nparams;
	starpu_data_handle_t *A = &d->ring_chunk[(size_t)q * N * N];
	const size_t *off = &d->ring_off[(size_t)q * (N + 1)];
	o->name = name;
	for (int j = 0; j < N; j++)
		for (int c = 0; c < N; c++) {
			o->node = j;
			DNN_TRY(dnn_insert_vec_slice_put(o, ring_source(d, P, q, j), A[j * N + c], off[c]));
		}
	if (q >= P)
		return 0;
	dnn_param *pr = &m->params[q];
	dnn_optim_args a = dnn_param_optim_args(pr, optim, p->global_batch, 1);
	const dnn_task_opts u = ar_place(p, q, 0, -1, prio_of(m, q), 1);
	return dnn_insert_optim_update(&u, &a, pr->hw, pr->hv, pr->hg);
}

/* The sync step of parameter q with the ring (header comment): all ranks submit every task. */
static int ring_allreduce_step(dnn_plan *p, int q, const dnn_optim_config *optim)
{
	dnn_dist *d = p->m->dist;
	const int N = d->nranks;
	starpu_data_handle_t *A = &d->ring_chunk[(size_t)q * N * N]; /* A[j * N + c] */
	/* Top priority: each hop waits for a worker on the next rank, and the chain of 2(N-1) hops is
	 * on the path to the next step's forward; backward and forward tasks can wait for these. */
	dnn_task_opts o = ar_place(p, q, 1, -1, STARPU_MAX_PRIO, 0);
	DNN_TRY(chunks_copy_in(p, q, &o, "ring_copy_in"));
	o.name = "ring_reduce_scatter";
	for (int s = 0; s < N - 1; s++)
		for (int r = 0; r < N; r++) {
			const int c = ((r - s) % N + N) % N, to = (r + 1) % N;
			o.node = to;
			DNN_TRY(dnn_insert_vec_add(&o, A[to * N + c], STARPU_RW, A[r * N + c]));
		}
	o.name = "ring_all_gather";
	for (int s = 0; s < N - 1; s++)
		for (int r = 0; r < N; r++) {
			const int c = ((r + 1 - s) % N + N) % N, to = (r + 1) % N;
			o.node = to;
			DNN_TRY(dnn_insert_vec_slice_get(&o, A[to * N + c], A[r * N + c], 0));
		}
	return chunks_copy_out_update(p, q, &o, "ring_copy_out", optim);
}

/* The sync step of parameter q by recursive halving-doubling (N = 2^k ranks, the ring's N chunks
 * and slice codelets). Reduce-scatter by recursive halving, m = N/2, N/4, .., 1: every rank r
 * keeps the half of its current block of 2m chunks that holds chunk r, and adds the partner
 * r^m's copy of it, A[r][c] += A[r^m][c] on r (the partner does the same with the other half), so
 * that chunk c ends summed over all ranks on rank c, in log2 N dependent steps. All-gather by
 * recursive doubling, m = 1, 2, .., N/2: r copies the partner's block of m summed chunks,
 * A[r][c] = A[r^m][c]. Every chunk's sum is computed once (on rank c) and copied, so the replicas
 * stay identical; each rank sends and receives (N-1)/N of the tensor per phase, as the ring, but
 * the chain is 2 log2 N hops long instead of 2(N-1). All ranks submit every task. */
static int rhd_allreduce_step(dnn_plan *p, int q, const dnn_optim_config *optim)
{
	dnn_dist *d = p->m->dist;
	const int N = d->nranks;
	starpu_data_handle_t *A = &d->ring_chunk[(size_t)q * N * N]; /* A[j * N + c] */
	dnn_task_opts o = ar_place(p, q, 1, -1, STARPU_MAX_PRIO, 0); /* on the path to the next forward */
	DNN_TRY(chunks_copy_in(p, q, &o, "rhd_copy_in"));
	o.name = "rhd_reduce_scatter";
	for (int half = N / 2; half >= 1; half /= 2)
		for (int r = 0; r < N; r++) {
			const int first = r & ~(half - 1); /* r's half: chunks first .. first + half - 1 */
			o.node = r;
			for (int c = first; c < first + half; c++)
				DNN_TRY(dnn_insert_vec_add(&o, A[r * N + c], STARPU_RW, A[(r ^ half) * N + c]));
		}
	o.name = "rhd_all_gather";
	for (int half = 1; half < N; half *= 2)
		for (int r = 0; r < N; r++) {
			const int first = (r ^ half) & ~(half - 1); /* the partner's block of summed chunks */
			o.node = r;
			for (int c = first; c < first + half; c++)
				DNN_TRY(dnn_insert_vec_slice_get(&o, A[r * N + c], A[(r ^ half) * N + c], 0));
		}
	return chunks_copy_out_update(p, q, &o, "rhd_copy_out", optim);
}

/* The sync step of parameter q with the tree: the sum into rank 0, sent to every rank, and the
 * same update on every replica with it (read-only); then the local gradient is zeroed. */
static int tree_allreduce_step(dnn_plan *p, int q, const dnn_optim_config *optim)
{
	dnn_model *m = p->m;
	dnn_dist *d = m->dist;
	starpu_data_handle_t G = d->g_global[q];
	const dnn_task_opts o = ar_opts(p, q, 0, -1, prio_of(m, q));
	const dnn_task_opts h = ar_place(p, q, 0, -1, prio_of(m, q), 0), u = ar_place(p, q, 0, -1, prio_of(m, q), 1);
	DNN_TRY(mpi_sum_into(G, d->g_local + q, (size_t)m->nparams, d->nranks, "allreduce_zero", "allreduce_contrib", &h));
	DNN_TRY(mpi_broadcast(G, d->nranks, 1));
	dnn_param *pr = &m->params[q];
	dnn_optim_args a = dnn_param_optim_args(pr, optim, p->global_batch, 1);
	a.keep_grad = 1;
	DNN_TRY(dnn_insert_optim_update(&u, &a, pr->hw, pr->hv, G));
	return dnn_insert_vec_zero(&o, pr->hg);
}

/* The async step of parameter q: a local step that also writes the applied change, pushed to
 * the parameter's server shard, which then snapshots its copy for the pulls of later steps. */
static int async_push_step(dnn_plan *p, int q, long step, const dnn_optim_config *optim)
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

/* The sync step of bucket b: each rank packs its members' gradients into its bucket, the buckets
 * are all-reduced as one tensor (the ring or rhd when the bucket takes it: its chunks are entry
 * P + b; else the tree: summed into rank 0 and sent to every rank), and every rank unpacks the sum
 * into its members' gradients, which their updates read and zero (as the ring does). */
static int bucket_allreduce_step(dnn_plan *p, int b, const dnn_optim_config *optim)
{
	dnn_model *m = p->m;
	dnn_dist *d = m->dist;
	const int NB = d->nbuckets, P = m->nparams;
	starpu_data_handle_t mine = d->bucket_local[d->rank * NB + b], G = d->bucket_global[b];
	const dnn_task_opts o = ar_opts(p, d->bucket_lead[b], 0, -1, prio_of(m, d->bucket_lead[b]));
	dnn_task_opts pack = o, unpack = o;
	pack.name = "bucket_pack", unpack.name = "bucket_unpack";
	/* The members tile the bucket (plan_buckets: bucket_len is the sum of their sizes, no gap),
	 * so every pack overwrites all of it: only the first needs the zero, which gives StarPU a
	 * written buffer for the slices' RW accesses. Later zeroing cost a pass over every bucket per
	 * step: 14 ms of a K80 step on rank 0's critical path, 7 ms of an H200 one (simulated,
	 * docs/SIMULATION.md study 5 (f), (i)). */
	if (!d->bucket_zeroed[b]) {
		DNN_TRY(dnn_insert_vec_zero(&pack, mine));
		d->bucket_zeroed[b] = 1;
	}
	for (int q = d->bucket_lead[b]; q < P; q++)
		if (d->bucket_of[q] == b)
			DNN_TRY(dnn_insert_vec_slice_put(&pack, mine, m->params[q].hg, d->bucket_off[q]));
	if (!G && d->allreduce == DNN_ALLREDUCE_RHD) {
		DNN_TRY(rhd_allreduce_step(p, P + b, optim)); /* the sum back in `mine` */
		G = mine;
	} else if (!G) {
		DNN_TRY(ring_allreduce_step(p, P + b, optim));
		G = mine;
	} else {
		DNN_TRY(mpi_sum_into(G, d->bucket_local + b, (size_t)NB, d->nranks, "allreduce_zero", "allreduce_contrib", &o));
		DNN_TRY(mpi_broadcast(G, d->nranks, 1));
	}
	for (int q = d->bucket_lead[b]; q < P; q++) {
		if (d->bucket_of[q] != b)
			continue;
		dnn_param *pr = &m->params[q];
		DNN_TRY(dnn_insert_vec_slice_get(&unpack, pr->hg, G, d->bucket_off[q]));
		dnn_optim_args a = dnn_param_optim_args(pr, optim, p->global_batch, 1);
		DNN_TRY(dnn_insert_optim_update(&o, &a, pr->hw, pr->hv, pr->hg));
	}
	return 0;
}

int dnn_dist_after_backward(dnn_plan *p, long step, const dnn_optim_config *optim)
{
	dnn_dist *d = p->m->dist;
	for (int q = 0; q < p->m->nparams; q++) {
		if (in_bucket(d, q)) {
			if (d->bucket_lead[d->bucket_of[q]] == q)
				DNN_TRY(bucket_allreduce_step(p, d->bucket_of[q], optim));
		} else if (d->mode == DNN_MODE_ASYNC)
			DNN_TRY(async_push_step(p, q, step, optim));
		else if (d->g_global[q])
			DNN_TRY(tree_allreduce_step(p, q, optim));
		else if (d->allreduce == DNN_ALLREDUCE_RHD)
			DNN_TRY(rhd_allreduce_step(p, q, optim));
		else
			DNN_TRY(ring_allreduce_step(p, q, optim));
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
	if (in_bucket(d, q))
		return bucket_allreduce_step(p, d->bucket_of[q], optim);
	if (d->g_global[q])
		return tree_allreduce_step(p, q, optim);
	return d->allreduce == DNN_ALLREDUCE_RHD ? rhd_allreduce_step(p, q, optim) : ring_allreduce_step(p, q, optim);
}

int dnn_dist_reduce_stats(dnn_plan *p, int slot)
{
	dnn_dist *d = p->m->dist;
	starpu_data_handle_t mine = d->stats_local[d->rank * d->nslots + slot];
	DNN_TRY(dnn_insert_vec_zero(NULL, mine));
	for (int c = 0; c < p->nchunks; c++)
		DNN_TRY(dnn_insert_vec_add(NULL, mine, STARPU_RW, p->stats[slot * p->nchunks + c]));
	return mpi_sum_into(d->stats_global[slot], d->stats_local + slot, (size_t)d->nslots, d->nranks, "stats_zero",
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

static int report(int rc, const char *what, char *err, size_t errlen)
{
	if (rc != 0)
		dnn_set_err(err, errlen, "StarPU-MPI", "%s failed: %s", what, strerror(rc < 0 ? -rc : rc));
	return rc != 0 ? -1 : 0;
}

static int pull_final(dnn_model *m)
{
	dnn_dist *d = m->dist;
	for (int q = 0; q < m->nparams; q++) {
		DNN_TRY(mpi_broadcast(d->w_server[q], d->nranks, 0));
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
	return report(pull_final(m), "pulling the server's parameters", err, errlen);
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
	starpu_data_handle_t G = reg_vector(d, d->rank == 0 ? out : NULL, n, 0);
	dnn_vec_set_sum_redux(G);
	for (int j = 0; j < d->nranks; j++)
		L[j] = reg_vector(d, j == d->rank ? local : NULL, n, j);
	int rc = mpi_sum_into(G, L, 1, d->nranks, "sum_zero", "sum_contrib", NULL);
	int wrc = starpu_mpi_wait_for_all(MPI_COMM_WORLD);
	/* Unregistering brings the sum back into rank 0's `out`. */
	starpu_data_unregister(G);
	for (int j = 0; j < d->nranks; j++)
		starpu_data_unregister(L[j]);
	free(L);
	return report(rc ? rc : wrc, "summing over the ranks", err, errlen);
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
	/* Tear-down: a failed wait has nothing left to report to (the run is ending either way). */
	(void)starpu_mpi_wait_for_all(MPI_COMM_WORLD);
	const int P = m->nparams;
	/* Our own g_local entries are the model's hg handles: the model unregisters those. */
	for (int p = 0; p < P && d->mode == DNN_MODE_SYNC && d->g_local; p++)
		d->g_local[d->rank * P + p] = NULL;
	if (d->g_local)
		unreg_all(d->g_local, (size_t)d->nranks * P);
	if (d->g_global)
		unreg_all(d->g_global, (size_t)P);
	if (d->ring_chunk)
		unreg_all(d->ring_chunk, ((size_t)P + (size_t)d->nbuckets) * d->nranks * d->nranks);
	if (d->w_server)
		unreg_all(d->w_server, (size_t)P);
	if (d->snap)
		unreg_all(d->snap, (size_t)(d->staleness + 1) * P);
	if (d->delta)
		unreg_all(d->delta, (size_t)d->nranks * (d->staleness + 1) * P);
	for (int p = 0; p < P && d->w_server_mem; p++)
		free(d->w_server_mem[p]);
	if (d->bucket_local)
		unreg_all(d->bucket_local, (size_t)d->nranks * d->nbuckets);
	if (d->bucket_global)
		unreg_all(d->bucket_global, (size_t)d->nbuckets);
	if (d->stats_global)
		unreg_all(d->stats_global, (size_t)d->nslots);
	if (d->stats_local)
		unreg_all(d->stats_local, (size_t)d->nranks * d->nslots);
	free(d->g_local), free(d->g_global), free(d->ring_chunk), free(d->ring_off);
	free(d->bucket_of), free(d->bucket_off), free(d->bucket_lead), free(d->bucket_len), free(d->bucket_zeroed);
	free(d->bucket_local), free(d->bucket_global);
	free(d->w_server), free(d->snap), free(d->delta);
	free(d->w_server_mem), free(d->shard);
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
