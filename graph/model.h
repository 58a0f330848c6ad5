/* model.h — a net's parameters and the StarPU submission of its iterations.
 *
 * dnn_model owns the trainable tensors (value, momentum, gradient) registered as StarPU vector
 * handles; gradients are STARPU_REDUX targets (grad_accum.h). dnn_plan owns the activation
 * handles of one way of splitting a batch into chunks: one handle per (node, chunk) for the
 * outputs, their gradients and batch-norm statistics, plus `nslots` sets of input/label/stats
 * handles so that up to nslots iterations can be in flight (the window).
 *
 * Submission follows DESIGN.md "The training DAG": per chunk, a load task, forward tasks in
 * topological order and backward tasks in reverse; then one SGD task per parameter tensor.
 * Nothing here waits: dependencies are StarPU's sequential data consistency.
 */
#ifndef DNN_MODEL_H
#define DNN_MODEL_H
#include <starpu.h>
#include <stdint.h>

#include "dataset.h"
#include "graph.h"

typedef struct {
	char name[DNN_NAME_MAX + 16]; // "<node>.weight", "<node>.bias", "<node>.gamma", ...
	long n;
	int no_decay;                 // biases and BN parameters skip weight decay
	float *w, *v, *g;             // value, momentum buffer, gradient (host homes)
	starpu_data_handle_t hw, hv, hg;
} dnn_param;

typedef struct {
	float lr, momentum, weight_decay;
} dnn_sgd_config;

/* Across ranks (StarPU-MPI). Each rank holds a replica of the parameters and a shard of every
 * global batch (DESIGN.md "Across nodes"); only the handles that cross ranks are registered
 * with StarPU-MPI. */
typedef enum { DNN_MODE_SYNC = 0, DNN_MODE_ASYNC = 1 } dnn_dist_mode;
/* sync: how each gradient is all-reduced (graph/dist.c): starpu_mpi_redux_data's tree into rank
 * 0 then a send to every rank, or a ring of reduce-scatter/all-gather tasks over N chunks. */
typedef enum { DNN_ALLREDUCE_TREE = 0, DNN_ALLREDUCE_RING = 1 } dnn_allreduce;

typedef struct {
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
	 * c's first element (c = N: the tensor's size). Tensors too small for the ring use the tree. */
	starpu_data_handle_t *ring_chunk;
	size_t *ring_off;
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
} dnn_dist;

typedef struct {
	dnn_graph *g;
	dnn_dist *dist;                // NULL in a single-process run
	int nparams;
	dnn_param *params;
	int *param_of;                 // per node: index of its first parameter, or -1
	float **running;               // per node: BN running stats (2C) or NULL
	starpu_data_handle_t *hrunning;
	float *in_mean, *in_std;       // per input channel: normalisation of pixels/255
	char **class_names;            // borrowed, g->classes names or NULL: written into checkpoints
	int registered;
} dnn_model;

/* Allocate and initialise (PyTorch-default uniform weights and biases from `seed`, BN gamma=1 beta=0,
 * running mean 0 var 1) and register every tensor with StarPU. */
int dnn_model_create(dnn_model *m, dnn_graph *g, uint64_t seed);
/* Bring every tensor back to host memory (waits for the tasks that write them). */
void dnn_model_sync_to_host(dnn_model *m);
void dnn_model_destroy(dnn_model *m);

/* Turn on multi-rank training (call on every rank, after dnn_model_create, before any plan;
 * nslots = the window). No-op for one rank. */
void dnn_model_enable_dist(dnn_model *m, dnn_dist_mode mode, dnn_allreduce allreduce, int staleness, int lookahead,
			   int nslots);

/* A chunked batch layout. The batch of `batch` samples is split into `nchunks` nearly equal
 * contiguous chunks (the first batch % nchunks chunks get one more sample). */
typedef struct {
	dnn_model *m;
	int batch, nchunks, nslots, train;
	int global_batch;     // the SGD scale is 1/global_batch (= batch without MPI)
	int batch_offset;     // this rank's shard starts here in the global batch's index list
	int distributed;      // a multi-rank training plan (cross-rank reduction of gradients/stats)
	long steps_submitted;
	int *chunk_n, *chunk_off;
	starpu_data_handle_t *y, *dy, *saved; // [node * nchunks + c]; NULL where unused
	/* Fusion level (graph.h dnn_fuse_level: DNN_FUSE=0 none, 1 by default, 2 with conv+bias).
	 * bn_relu[i]: for a batchnorm whose only consumer is a relu, that relu's index, and for that
	 *   relu, the batchnorm's; -1 elsewhere. One task per chunk does both (forward: y of the relu
	 *   = max(BN(x), 0); backward: mask then BN backward); the batchnorm has no y/dy handles.
	 * grad_of[i]: the node whose dy handle holds node i's gradient (i itself, or a residual add
	 *   whose gradient is also i's: no add-backward copy task; see plan_fuse in model.c).
	 * Level 2: a conv with bias=1 adds its bias in the conv's forward task and its bias gradient
	 *   in the backward-filter task (conv2d.h a->bias) instead of separate bias tasks. */
	int fuse;
	int *bn_relu, *grad_of;
	long tasks_per_step;  // tasks the last dnn_submit_step inserted: load, forward, backward, SGD
	                      // (not StarPU's own REDUX init/reduction tasks, nor a multi-rank plan's exchanges)
	starpu_data_handle_t *x, *labels, *stats; // [slot * nchunks + c]
	float *stats_host;                    // [slot][c][2]: loss sum, correct count
} dnn_plan;

int dnn_plan_create(dnn_plan *p, dnn_model *m, int batch, int nchunks, int nslots, int train);
/* The same for this rank's shard of a global batch split over the model's ranks. */
int dnn_plan_create_sharded(dnn_plan *p, dnn_model *m, int global_batch, int nchunks, int nslots);
void dnn_plan_destroy(dnn_plan *p);

/* Submit one step in `slot`: load the samples idx[0..batch) of ds into the chunks, forward,
 * and when p->train, backward and the SGD update with `sgd` (gradients scaled by 1/batch). */
void dnn_submit_step(dnn_plan *p, int slot, const dnn_dataset *ds, const int *idx, const dnn_sgd_config *sgd);
/* Async mode: the server's current parameters into this rank's replica (the end of a run). */
void dnn_dist_pull_final(dnn_model *m);
/* Collective over the ranks (every rank calls it, in the same order): rank 0's `out` receives
 * the element-wise sum of every rank's `local` (n floats; `out` is ignored elsewhere). */
void dnn_dist_sum_to_root(dnn_model *m, float *local, float *out, size_t n);
/* Wait for the step in `slot`; returns its summed loss and correct count over the batch (over
 * the global batch on rank 0 of a multi-rank run, over the rank's shard elsewhere). */
void dnn_wait_step(dnn_plan *p, int slot, double *loss_sum, double *correct);
#endif
