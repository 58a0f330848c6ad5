/* dist.h — training across ranks with StarPU-MPI (docs/ARCHITECTURE.md "Across nodes"): the
 * cross-rank parts of a training step, which model.c calls, and the set-up and collectives
 * that runtime/ calls. Every rank calls each of these in the same order (StarPU-MPI's rule). */
#ifndef DNN_DIST_H
#define DNN_DIST_H
#include "model.h"

/* Turn on multi-rank training (call on every rank, after dnn_model_create, before any plan;
 * allreduce: sync, the algorithm (resolved: not auto; dnn_allreduce_resolve); ranks_on_one_node:
 * every rank runs on one node (dnn_runtime_ranks_on_one_node), which shapes the tree's reduction:
 * flat on one node, else binary (dnn_dist_mpi_redux); nslots = the window; bucket_elems: sync,
 * the all-reduce bucket size in floats, 0 = no buckets; grad_bf16: sync, the all-reduces' messages
 * carry bf16, their sums stay fp32 (--grad-precision bf16, graph/allreduce/; async: refused). No-op
 * for one rank. -1 with err on failure. */
int dnn_model_enable_dist(dnn_model *m, dnn_dist_mode mode, dnn_allreduce allreduce, int grad_bf16,
			  int ranks_on_one_node, size_t bucket_elems, int staleness, int lookahead, int nslots, char *err,
			  size_t errlen);
/* --allreduce auto's choice, from the evidence of docs/SIMULATION.md study 5 (e) and
 * docs/NETWORK.md: the tree when every rank runs on one node (ranks that share a machine's cores
 * pay for every dependent hop in scheduling waits, and there the tree's 2 hops beat the ring's
 * and rhd's 2(N-1) and 2 log2 N by 1.2-4.5x), else rhd for a power-of-two number of ranks (the
 * 16-node K80/FDR target: 92.6% per node against the tree's 75.4%) and the ring for the others
 * (best of the three at 4 and 8 nodes). Any other value is returned as it is. */
dnn_allreduce dnn_allreduce_resolve(dnn_allreduce a, int nranks, int one_node);
/* --bucket-mb auto (requested < 0), on every rank before the run: the bucket size in MiB for a
 * model of grad_bytes gradient bytes. Off (0) for one rank or when every rank is on one node
 * (no measurement there favours them); across nodes min(1 MiB, grad_bytes / 4): 1 MiB is the
 * best size simulated on the seeds' cluster (16 x 4 K80 over FDR, ResNet-50: +2.9% over none at
 * 16 nodes, +0.3-0.8% at 2-8; 4 and 16 MiB below it), and no bucket of a net under 4 MiB holds
 * more than a quarter of its gradients, so that its all-reduces still overlap the backward
 * (lenet5: fc1's weight alone, the nine other tensors in one bucket; over the namespace hosts
 * at 100 Mbit/s one bucket for the whole net cost lenet5 17% and resnet8 29-35%, quarter-size
 * buckets nothing; docs/NETWORK.md "Gradient buckets"). A size >= 0 is returned as it is. */
double dnn_dist_choose_bucket_mb(double requested, size_t grad_bytes, int nranks, int ranks_on_one_node);
/* StarPU-MPI's reduction of G's STARPU_MPI_REDUX contributions into G's owner, shaped by d's
 * ranks_on_one_node (dnn_model_enable_dist): flat when every rank is on one node, else a binary
 * tree (dist.c says why). For the gradients' tree and global batch norm's statistics (bnstats.c). */
int dnn_dist_mpi_redux(const dnn_dist *d, starpu_data_handle_t G, int prio);
/* Can all-reduce `a` run over nranks ranks (its descriptor's check_ranks: rhd needs a power of
 * two)? -1 with the usage line in err otherwise (the callers exit with status 2), else 0. */
int dnn_allreduce_check_ranks(dnn_allreduce a, int nranks, char *err, size_t errlen);
/* Does all-reduce `a` take --bucket-mb? (ps does not: the callers resolve auto to 0 and refuse a
 * size, exit 2.) */
int dnn_allreduce_takes_buckets(dnn_allreduce a);
/* Async mode: the server's current parameters into this rank's replica (the end of a run). */
int dnn_dist_pull_final(dnn_model *m, char *err, size_t errlen);
/* Collective over the ranks: rank 0's `out` receives the element-wise sum of every rank's
 * `local` (n floats; `out` is ignored elsewhere). */
int dnn_dist_sum_to_root(dnn_model *m, float *local, float *out, size_t n, char *err, size_t errlen);

/* ---- for model.c; each returns 0 or a negative errno (a task StarPU refused) */
/* Before the step's forward (async: pull parameters from the server snapshot of step t-1-S, add
 * this rank's own later changes and, with lookahead, the same again for each other rank). */
int dnn_dist_before_forward(dnn_plan *p, long step);
/* After the step's backward (the step in `slot`): sync = all-reduce + identical update on every
 * rank (with optim->clip_norm > 0: every all-reduce, then the clipping tasks of gradclip.h over
 * the all-reduced gradients, then the updates); async = push the local gradient to the parameter
 * server (and snapshot it; no clipping: -EINVAL). */
int dnn_dist_after_backward(dnn_plan *p, int slot, long step, const dnn_optim_config *optim);
/* Sync: one all-reduce (and update) of parameter q alone, as dnn_dist_after_backward does it for
 * q without clipping (the all-reduce microbenchmark, `starpu_anp bench --allreduce-bytes`, which
 * times the all-reduce alone). -EINVAL: no sync run. */
int dnn_dist_allreduce_param(dnn_plan *p, int q, const dnn_optim_config *optim);
/* Sync: parameter q's all-reduce alone, no update: *sum is the handle that holds the sum on this rank (read it
 * after starpu_mpi_wait_for_all; the bf16 wire's check, tests/gradwire.c). -EINVAL: no sync run, or q is in a
 * bucket. */
int dnn_dist_reduce_param(dnn_plan *p, int q, starpu_data_handle_t *sum);
/* Sum the step's loss/correct statistics over the ranks into rank 0. */
int dnn_dist_reduce_stats(dnn_plan *p, int slot);
/* The statistics handle to wait for in dnn_wait_step. */
starpu_data_handle_t dnn_dist_stats_handle(dnn_plan *p, int slot, float **host);
void dnn_dist_destroy(dnn_model *m);
/* For handles registered outside this file (bnstats.c): n fresh StarPU-MPI tags (the first one
 * returned), and whether this is a sync run (the ranks' sums meet every step). */
int64_t dnn_dist_reserve_tags(dnn_dist *d, int64_t n);
int dnn_dist_is_sync(const dnn_dist *d);
/* DNN_ALLREDUCE_PRIO and DNN_ALLREDUCE_ON travel in the plan's config (graph/exec_config.h):
 * allreduce_prio 1 = the sync all-reduce's tasks and updates of the first layers first (StarPU
 * priority nparams - q for parameter q), 2 = as 1 and pinned to the chunks' workers under
 * --pin-chunks (the default), 0 = all at priority 0, unpinned. allreduce_on 0 = device (the
 * default: every all-reduce task where the chunks' compute runs), 1 = host: a rank's gradient,
 * already summed over its chunks, is read once on a CPU worker, and the cross-rank hops and sums
 * run on CPU workers on host buffers next to StarPU-MPI; the update stays on the chunks' worker
 * (the sum goes up once); 2 = as 1 with the update on the host too (the weights go up once).
 * Without a CPU worker both are 0. */

/* ---- what runtime/ reads of a model's multi-rank state (m->dist; NULL: one process) */
int dnn_dist_rank(const dnn_dist *d);   /* 0 for NULL */
int dnn_dist_nranks(const dnn_dist *d); /* 1 for NULL */
/* For the result line: collectives per step (sync), lookahead and the staleness of the pulls
 * (async). All 0 for NULL. */
typedef struct {
	int allreduces, lookahead;
	double staleness_mean;
	long staleness_max;
} dnn_dist_info;
void dnn_dist_get_info(const dnn_dist *d, dnn_dist_info *info);
/* Return a non-zero status (a negative errno) from a helper or a StarPU-MPI call to the caller:
 * the error propagation of the cross-rank code (dist*.c, allreduce/, bnstats.c). */
#define DNN_TRY(call)                      \
	do {                               \
		int dnn_try_rc_ = (call);  \
		if (dnn_try_rc_ != 0)      \
			return dnn_try_rc_; \
	} while (0)

#endif
