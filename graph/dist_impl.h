/* dist_impl.h — what the files of the cross-rank training share (private to graph/dist*.c and
 * graph/allreduce/; docs/ARCHITECTURE.md "Across nodes"): the multi-rank state of a model,
 * the all-reduce descriptor, and the StarPU-MPI helpers.
 *
 *   dist.c               set-up and tear-down, the sync step of a parameter (its all-reduce, then
 *                        the update), the step statistics, priorities and placement, the
 *                        all-reduce table (built from allreduce/allreduce.def)
 *   dist_buckets.c       --bucket-mb: the tensors packed into buckets, each all-reduced as one
 *   dist_async.c         --mode async: the sharded parameter server
 *   allreduce/<name>.c   one all-reduce algorithm each (tree.c, ring.c, rhd.c, ps.c), behind a
 *                        dnn_allreduce_algo; allreduce/chunks.c: the chunks ring and rhd share
 */
#ifndef DNN_DIST_IMPL_H
#define DNN_DIST_IMPL_H
#include "dist.h"
#include "dnn_codelet.h"

/* Options of a cross-rank task: executed on `node` (-1: where the written data is owned). */
#define ON_NODE(node_, name_) (&(dnn_task_opts){.mpi = 1, .node = (node_), .name = (name_)})

/* ---- all-reduce algorithms (one file each in allreduce/, one line in allreduce/allreduce.def)
 *
 * An all-reduce sums one "entry" over the ranks: a parameter's gradient (entry q < P, the model's
 * nparams) or a bucket of them (entry P + b, --bucket-mb). Rank j's contribution is
 * dnn_dist_local(d, e, j) (owner j; this rank's is the REDUX gradient or its packed bucket). Every
 * rank submits every task of every entry in the same order (StarPU-MPI's rule), and each
 * algorithm fixes the order of its sums (the result is the same bits on every rank and run). */
typedef struct dnn_allreduce_algo {
	const char *name; // the --allreduce value
	/* NULL (any count), or -1 with the usage line in err when it cannot run over nranks ranks. */
	int (*check_ranks)(int nranks, char *err, size_t errlen);
	/* NULL (every size), or whether an entry of n elements takes it; those that do not take the
	 * tree (its small tensors cost a chunked algorithm latency and tasks, and save no bandwidth). */
	int (*takes)(const dnn_dist *d, size_t n);
	/* 1: no --bucket-mb (dnn_allreduce_takes_buckets): each tensor is its own entry. */
	int no_buckets;
	/* On every rank, in the same order: register what entry e of n elements needs (StarPU-MPI
	 * handles from dnn_dist_register, kept in d->entry[e].h: dnn_dist_destroy unregisters them;
	 * offsets in d->entry[e].off, freed there too). -1 when an allocation fails. */
	int (*setup)(dnn_dist *d, int e, size_t n);
	/* Submit entry e's all-reduce: every rank ends with the sum over the ranks j of
	 * dnn_dist_local(d, e, j), in *sum: the contribution itself (summed in place) or a handle of the
	 * algorithm's, which the caller only reads (d->grad_bf16: always the contribution).
	 * base: placement and priority of the entry's tasks
	 * (an algorithm may use its own). 0 or a negative errno. */
	int (*reduce)(dnn_plan *p, int e, const dnn_task_opts *base, starpu_data_handle_t *sum);
} dnn_allreduce_algo;

#define DNN_ALLREDUCE_ALGO(name, ENUM) extern const dnn_allreduce_algo dnn_allreduce_##name;
#include "allreduce/allreduce.def"
#undef DNN_ALLREDUCE_ALGO

/* The descriptor of a (resolved) --allreduce value; NULL for auto or an unknown value. */
const dnn_allreduce_algo *dnn_allreduce_algo_get(dnn_allreduce a);

/* One all-reduce entry's state (d->entry[e]). */
typedef struct {
	const dnn_allreduce_algo *algo; // NULL: none of its own (a bucketed parameter)
	starpu_data_handle_t *h;        // the handles algo->setup registered (nh)
	size_t nh;
	size_t *off;                    // offsets, as the algorithm lays its entry out (or NULL)
} dnn_dist_entry;

/* The multi-rank state of a model (model.h: m->dist; opaque outside the dist files). Each rank
 * holds a replica of the parameters and a shard of every global batch; only the handles that
 * cross ranks are registered with StarPU-MPI. */
struct dnn_dist {
	int rank, nranks;
	int nparams; // the model's (P)
	dnn_dist_mode mode;
	int staleness;  // async: pull for step i waits for server version i - S
	int one_node;   // every rank on one node: shapes the tree's reduction (dnn_dist_mpi_redux)
	int64_t next_tag;
	/* sync: every rank's local REDUX gradient of each parameter ([rank * nparams + p]; this
	 * rank's entry is params[p].hg; NULL for a bucketed parameter on the other ranks). */
	starpu_data_handle_t *g_local;
	dnn_allreduce allreduce;
	/* sync, --grad-precision bf16: every algorithm's messages are bf16 vectors (dnn_dist_register_bf16), packed
	 * by the sender (cl_vec_to_bf16, which rounds the sender's own copy to what it sent) and widened by the
	 * receiver, whose sums stay fp32 (cl_vec_add_bf16); each algorithm's file says where its roundings are. */
	int grad_bf16;
	/* sync: the all-reduce entries, the parameters then the buckets (nparams + nbuckets): each
	 * takes d->allreduce's algorithm, or the tree where that one does not take its size. */
	dnn_dist_entry *entry;
	/* sync, --bucket-mb (dist_buckets.c): the tensors below the bucket size are packed, in
	 * backward order, into buckets of at most bucket_elems elements, each all-reduced as one
	 * tensor (fewer, bigger messages, as PyTorch DDP's buckets; entry P + b). Per parameter:
	 * bucket_of (-1: not bucketed) and bucket_off (its first element in the bucket); per bucket
	 * b: bucket_len, bucket_lead (its lowest parameter index: where its tasks are submitted) and
	 * every rank j's packed gradient bucket_local[j * nbuckets + b] (owner j). allreduces =
	 * collectives per step (buckets + the rest). bucket_zeroed[b]: this rank's bucket was zeroed
	 * once (its first pack); its members tile it, so later packs overwrite every element and need
	 * no zeroing (dnn_dist_bucket_step). */
	size_t bucket_elems;
	int nbuckets, allreduces;
	int *bucket_of, *bucket_lead;
	size_t *bucket_off, *bucket_len;
	char *bucket_zeroed;
	starpu_data_handle_t *bucket_local;
	/* async (dist_async.c): per parameter, the server copy (owner: p's shard rank), S+1
	 * snapshots of it, and every rank's applied changes of the last S+1 steps
	 * ([(rank * (S+1) + k) * nparams + p]). */
	starpu_data_handle_t *w_server, *snap, *delta; // snap[k * nparams + p], k in [0, S]
	float **w_server_mem;
	int *shard;    // async: server rank of each parameter (by layer)
	int lookahead; // async: estimate the others' missing steps by our own
	/* step statistics: [slot] global (owner 0) and [rank * nslots + slot] per-rank sums */
	starpu_data_handle_t *stats_global, *stats_local;
	float *stats_global_mem, *stats_local_mem;
	int nslots;
	double staleness_sum; // async bookkeeping, for the result line
	long staleness_max, staleness_count;
};

/* ---- helpers (dist.c) */
/* A StarPU-MPI vector of n floats owned by `owner` (home: this rank's memory, or NULL), with the
 * next tag. */
starpu_data_handle_t dnn_dist_register(dnn_dist *d, float *home, size_t n, int owner);
/* The same for a bf16 message of n elements (uint16_t; --grad-precision bf16), with no home. */
starpu_data_handle_t dnn_dist_register_bf16(dnn_dist *d, size_t n, int owner);
/* Rank j's contribution to entry e: parameter e's local gradient (e < P), else rank j's packed
 * bucket e - P; the array of all ranks' (local[j * stride]) in dnn_dist_locals. */
starpu_data_handle_t dnn_dist_local(const dnn_dist *d, int e, int j);
const starpu_data_handle_t *dnn_dist_locals(const dnn_dist *d, int e, size_t *stride);
/* The options of parameter (or entry) q's all-reduce tasks and update (mpi: cross-rank, on
 * `node`): DNN_ALLREDUCE_PRIO's pinning (p->cfg.allreduce_prio) ... */
dnn_task_opts dnn_dist_ar_opts(const dnn_plan *p, int q, int mpi, int node, int prio);
/* ... and, for a task DNN_ALLREDUCE_ON puts on the host (`update`: the SGD step, there only at
 * 2), pinned to a CPU worker (DNN_ALLREDUCE_ON: p->cfg.allreduce_on). */
dnn_task_opts dnn_dist_ar_place(const dnn_plan *p, int q, int mpi, int node, int prio, int update);
/* The StarPU priority of parameter q's all-reduce and update (DNN_ALLREDUCE_PRIO). */
int dnn_dist_prio_of(const dnn_plan *p, int q);
/* G <- the sum over ranks j of local[j * stride], into G's owner: zero G, one STARPU_MPI_REDUX
 * contribution executed on each rank, then StarPU-MPI's reduction tree (dnn_dist_mpi_redux).
 * Tasks named zero_name and contrib_name, with base's other options (NULL: none). */
int dnn_dist_mpi_sum_into(const dnn_dist *d, starpu_data_handle_t G, const starpu_data_handle_t *local,
			  size_t stride, const char *zero_name, const char *contrib_name, const dnn_task_opts *base);
/* Every rank takes part in every transfer of h to ranks first..N-1 (the owner posts the sends). */
int dnn_dist_mpi_broadcast(starpu_data_handle_t h, int nranks, int first);
/* Sync: the sum of bucket b's members over the ranks (dist_buckets.c), and their updates (defer,
 * --clip-grad-norm: not yet; each member's gradient goes into p->clip_grad, read and zeroed by
 * its later update). */
int dnn_dist_bucket_step(dnn_plan *p, int b, const dnn_optim_config *optim, int defer);
/* Unregister the non-NULL handles of h[0..n). */
void dnn_dist_unregister_all(starpu_data_handle_t *h, size_t n);
/* 0 for rc = 0; else -1 with "<what> failed: <rc's message>" in err. */
int dnn_dist_report(int rc, const char *what, char *err, size_t errlen);
/* Is parameter p's gradient all-reduced inside a bucket? */
int dnn_dist_in_bucket(const dnn_dist *d, int p);
/* --bucket-mb: plan the buckets (d->bucket_*, nbuckets, allreduces; the same on every rank). -1
 * when an allocation fails. */
int dnn_dist_plan_buckets(const dnn_model *m, dnn_dist *d);
/* Async (dist_async.c): register the server, snapshots and changes; -1 when an allocation fails. */
int dnn_dist_async_setup(dnn_model *m, dnn_dist *d);
/* Async: the step's local update and push of parameter q to its server shard. */
int dnn_dist_async_push_step(dnn_plan *p, int q, long step, const dnn_optim_config *optim);
/* Async: unregister and free the server's state. */
void dnn_dist_async_destroy(dnn_model *m, dnn_dist *d);
#endif
