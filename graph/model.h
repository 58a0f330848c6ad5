/* model.h — a net's parameters and the StarPU submission of its iterations.
 *
 * dnn_model owns the trainable tensors (value, momentum, gradient) registered as StarPU vector
 * handles; a gradient is the fixed-order sum of its chunks' partials (chunksum.h), or with
 * --deterministic off a STARPU_REDUX target (vec.h: dnn_vec_set_sum_redux). dnn_plan owns the
 * activation handles of one way of splitting a batch into chunks: one handle per (node, chunk) for the
 * outputs, their gradients and batch-norm statistics, plus `nslots` sets of input/label/stats
 * handles so that up to nslots iterations can be in flight (the window).
 *
 * Submission follows docs/ARCHITECTURE.md "The training DAG": per chunk, the data source's load
 * task, then each node's forward tasks in topological order and backward tasks in reverse (what
 * one node submits is its op descriptor's: op.h, graph/ops/); then one update task (optim.h) per parameter
 * tensor, or the cross-rank exchange of dist.h. Nothing here waits: dependencies are StarPU's
 * sequential data consistency. Errors return -1 with one line in err; nothing here exits.
 */
#ifndef DNN_MODEL_H
#define DNN_MODEL_H
#include <starpu.h>
#include <stdint.h>

#include "exec_config.h"
#include "graph.h"
#include "optim.h"
#include "starpu_anp.h" /* dnn_optim_config, dnn_dist_mode, dnn_allreduce */

/* Where a step's samples come from: graph/ knows no data set or file, runtime/ implements this
 * (runtime/data_source.c) for in-memory sets and image folders. */
typedef struct dnn_data_source {
	void *ctx;
	/* Insert the task(s) that fill x (n samples, C x H x W floats, normalised as (pixel/255 -
	 * mean[c]) / std[c]) and labels (n int32) with samples idx[0..n) of the source. train: with
	 * augmentation drawn from (seed, step, sample). o: the chunk's insert options (its worker
	 * under --pin-chunks) or NULL. Returns 0 or a negative errno. */
	int (*insert_load)(const struct dnn_data_source *src, const dnn_task_opts *o, const int *idx, int n, int train,
			   long step, const float *mean, const float *std, starpu_data_handle_t x,
			   starpu_data_handle_t labels);
} dnn_data_source;

/* Simulation build: parameters of at least this many floats live in SMPI shared memory, unread
 * and uninitialised (model.c); smaller ones stay private (fewer mappings). */
#define DNN_SIM_SHARED_PARAM_MIN (1L << 16)

typedef struct {
	char name[DNN_NAME_MAX + 16]; // "<node>.weight", "<node>.bias", "<node>.gamma", ...
	long n;
	int no_decay;                 // biases and BN parameters skip weight decay
	int node, slot;               // its node and its slot in the node's op (op.h param_slots)
	float *w, *v, *g;             // value, optimiser state (momentum; adamw, lamb: m then v, 2n), gradient (host homes)
	starpu_data_handle_t hw, hv, hg;
} dnn_param;

/* Across ranks (StarPU-MPI): the multi-rank state, opaque (defined in dist_impl.h; what runtime/
 * reads of it: the accessors of dist.h). dnn_dist_mode and dnn_allreduce are in starpu_anp.h. */
typedef struct dnn_dist dnn_dist;

typedef struct {
	dnn_graph *g;
	dnn_dist *dist;                // NULL in a single-process run
	int nparams, params_cap;       // params_cap: the ops' slots (op.h param_slots) summed over the nodes
	dnn_param *params;
	int *param_of;                 // per node: index of its first parameter, or -1 (dnn_op_param reads them)
	float **running;               // per node: running statistics (op.h running_blocks) or NULL
	size_t *running_n;             // per node: their float count
	starpu_data_handle_t *hrunning;
	float *in_mean, *in_std;       // per input channel: normalisation of pixels/255
	char **class_names;            // borrowed, g->classes names or NULL: written into checkpoints
	uint64_t seed;                 // of the run: initial weights, dropout masks
	int registered;
	dnn_optimizer optimizer;       // whose state params[i].v holds (dnn_model_set_optimizer) [sgd]
	int optimizer_set;             // set by a trainer: a checkpoint must then hold this optimiser's state
} dnn_model;

/* Allocate and initialise (each op's parameters: PyTorch-default uniform weights and biases from
 * `seed`, BN gamma=1 beta=0, running mean 0 var 1) and register every tensor with StarPU.
 * On failure everything is freed. */
int dnn_model_create(dnn_model *m, dnn_graph *g, uint64_t seed, char *err, size_t errlen);
/* The optimiser whose state the parameters keep (their v: n floats, 2n for adamw and lamb), before any task
 * uses the model; the state is zeroed. After it, dnn_model_load refuses a checkpoint of another
 * optimiser (eval, predict and export, which never call it, load any). 0, or -1 with err. */
int dnn_model_set_optimizer(dnn_model *m, dnn_optimizer opt, char *err, size_t errlen);
/* The float count of pr's optimiser state (pr->v). */
long dnn_param_state_n(const dnn_model *m, const dnn_param *pr);
/* The bytes of one copy of every parameter's gradient (the sum of the parameters' floats). */
size_t dnn_model_grad_bytes(const dnn_model *m);
/* Bring every tensor back to host memory (waits for the tasks that write them). */
int dnn_model_sync_to_host(dnn_model *m, char *err, size_t errlen);
void dnn_model_destroy(dnn_model *m);

/* For op descriptors' create_params: node's parameter tensor `slot` of its op's param_slots
 * (op.h), "<node>.<slot name>", n floats (zeroed; the slot says whether weight decay applies)
 * -> its index, or -1 with one line in err. Slots are added in order (0, 1, ...), each at most
 * once, one node's consecutively: anything else is refused. */
int dnn_model_add_param(dnn_model *m, int node, int slot, long n, char *err, size_t errlen);
/* Node-owned state that is not trained but checkpointed (running statistics): the op's
 * running_blocks x C floats, zeroed, or NULL with err (an op without running_blocks, a second
 * call, out of memory). */
float *dnn_model_add_running(dnn_model *m, int node, char *err, size_t errlen);

/* The update arguments of parameter pr: the one place that applies the rules (no weight decay for
 * biases and BN parameters, and no LARS trust ratio for them either; gradients summed over the
 * global batch scaled by 1/global_batch; the optimiser and its hyper-parameters from optim, AdamW's
 * and LAMB's bias corrections 1 - beta^t from optim->t in double).
 * decay_share divides the weight decay (async: every rank pushes its share of it). */
dnn_optim_args dnn_param_optim_args(const dnn_param *pr, const dnn_optim_config *optim, int global_batch, int decay_share);

/* A chunked batch layout. The batch of `batch` samples is split into `nchunks` nearly equal
 * contiguous chunks (the first batch % nchunks chunks get one more sample). */
typedef struct {
	dnn_model *m;
	dnn_exec_config cfg;  // the execution config the plan's tasks run with (exec_config.h; a copy)
	int batch, nchunks, nslots, train;
	int global_batch;     // the update scale is 1/global_batch (= batch without MPI)
	int batch_offset;     // this rank's shard starts here in the global batch's index list
	int distributed;      // a multi-rank training plan (cross-rank reduction of gradients/stats)
	long steps_submitted;
	char *written;        // backward scratch (op.h dnn_op_ctx.written), one byte per node
	int *chunk_n, *chunk_off;
	int *chunk_worker;    // --pin-chunks: the worker of each chunk's tasks; NULL: the scheduler's
	starpu_data_handle_t *y, *dy, *saved; // [node * nchunks + c]; NULL where unused
	/* Fusion level (cfg.fuse clamped to 0..3, fuse.h: DNN_FUSE=0 none, 1 by default, 2 with conv+bias, 3 with
	 * batch norm in the convs).
	 * bn_relu[i]: for a batchnorm whose only consumer is a relu, that relu's index, and for that
	 *   relu, the batchnorm's; -1 elsewhere. One task per chunk does both (forward: y of the relu
	 *   = max(BN(x), 0); backward: mask then BN backward); the batchnorm has no y/dy handles.
	 * grad_of[i]: the node whose dy handle holds node i's gradient (i itself, or a residual add
	 *   whose gradient is also i's: no add-backward copy task; see fuse.c).
	 * relu_pool[i]: for a relu (not fused with a batchnorm) whose only consumer is a maxpool and
	 *   whose input's only consumer is the relu, that maxpool's index, and for that maxpool, the
	 *   relu's; -1 elsewhere. The maxpool's tasks apply the relu (forward: relu of the window's
	 *   max, which is the max of the relu'd window; backward: dy masked by y > 0, routed to the
	 *   relu's input's gradient); the relu has no task and no y/dy handles.
	 * Level 2: a conv with bias=1 adds its bias in the conv's forward task and its bias gradient
	 *   in the backward-filter task (conv2d.h a->bias) instead of separate bias tasks.
	 * Level 3 (fuse.h dnn_graph_bn_conv, codelets/conv2d_bnfuse.h): for a batchnorm fused with its relu whose input
	 *   is a conv read by nothing else (A) and whose relu is read by one conv only (B), in a training plan with
	 *   local statistics and no CUDA worker: bn_stats_conv[bn] = A and bn_stats_conv[A] = bn (A's forward task
	 *   writes the batchnorm's saved statistics); bn_apply_conv[bn] = B and bn_apply_conv[B] = bn (B's forward
	 *   and weight-gradient tasks read A's output and normalise it themselves; the relu's output is never
	 *   stored; the batchnorm's backward recomputes its mask); -1 elsewhere. */
	int fuse;
	/* y_bf16[i] = 1: node i's output y is stored in bf16 (2 bytes an element; its gradient dy stays
	 * fp32). Set by dnn_plan_create under --precision bf16 (cfg.bf16 and cfg.bf16_act, no CUDA
	 * worker) for a node whose descriptor says its tasks write y in bf16 (bf16_out) and whose every
	 * reader's says its tasks read that input in bf16 (bf16_in); the input node and the logits
	 * never. Ops ask with dnn_op_out_bf16. */
	unsigned char *y_bf16;
	int *bn_relu, *relu_pool, *grad_of;
	int *bn_stats_conv, *bn_apply_conv;
	long tasks_per_step;  // tasks the last dnn_submit_step inserted: load, forward, backward, the
	                      // fixed-order sums over chunks, optim_update (not StarPU's own REDUX init/reduction
	                      // tasks, nor a multi-rank plan's exchanges)
	/* Sums over chunks (chunksum.h). sum_redux = 1 (--deterministic off): every chunk adds into one
	 * STARPU_REDUX handle, in the order workers finish; 0 (the default): chunk c accumulates into
	 * its own partial, gpart[param * nchunks + c] (c = 0: the parameter's hg; training plans
	 * only), and a fixed tree over chunk index adds them. bn_part: the same for --batchnorm
	 * global's sums, [k * nchunks + c] with k as bn_sums (c = 0: bn_sums[k]); NULL under one chunk. */
	int sum_redux;
	starpu_data_handle_t *gpart, *bn_part;
	/* --batchnorm global (bnstats.h: dnn_plan_set_batchnorm; 0 = local, per-chunk statistics).
	 * Per batchnorm node i, slot s and phase ph (0 forward, 1 backward), k = (i * nslots + s) *
	 * 2 + ph: bn_sums[k], this process's double sums that its chunks add into (REDUX), and
	 * multi-rank (sync), bn_rank_sums[k * nranks + j] every rank's (owner j) and bn_gsums[k]
	 * their sum (owner 0, sent to every rank). bn_global_n: the samples the sums cover. */
	int bn_global, bn_global_n, bn_nranks;
	starpu_data_handle_t *bn_sums, *bn_rank_sums, *bn_gsums;
	starpu_data_handle_t *x, *labels, *stats; // [slot * nchunks + c]
	float *stats_host;                    // [slot][c][2]: loss sum, correct count
	/* --clip-grad-norm (gradclip.h; training plans): per parameter its gradient's sum of squares
	 * (1 double), per slot the coefficient (1 float) and the norm (1 double, host home
	 * clip_norm_host, NaN until computed; clip_used: that slot's last step was clipped); clip_grad
	 * and clip_keep: the sync step's scratch (dist.c), the handle each update reads and whether
	 * it only reads it. */
	starpu_data_handle_t *clip_sumsq, *clip_coef, *clip_norm, *clip_grad;
	double *clip_norm_host;
	char *clip_used, *clip_keep;
} dnn_plan;

/* dnn_plan_create: cfg (copied into p->cfg; NULL: DNN_EXEC_CONFIG_DEFAULTS) is what the plan's
 * tasks run with. 0, or -1 with one line in err: among others, when a chunk is too large for an
 * op's kernels (op.h check_chunk, e.g. a conv tensor over cuDNN's INT_MAX elements), checked first,
 * before anything is allocated. */
/* --pin-chunks: chunk c's load, forward and backward tasks all run on one worker, the CUDA
 * workers', or without GPUs the CPU workers', in blocks of neighbouring chunks (K chunks on n
 * workers: chunk c on worker c * n / K), so that the fixed-order sum's first levels stay on one. The scheduler still places the
 * updates and the reductions. Without it a scheduler may move a chunk between GPUs layer by
 * layer, and its activations with it (docs/SIMULATION.md). 0, or -1 with a message. */
int dnn_plan_pin_chunks(dnn_plan *p, char *err, size_t errlen);
int dnn_plan_create(dnn_plan *p, dnn_model *m, int batch, int nchunks, int nslots, int train,
		    const dnn_exec_config *cfg, char *err, size_t errlen);
/* The same for this rank's shard of a global batch split over the model's ranks. */
int dnn_plan_create_sharded(dnn_plan *p, dnn_model *m, int global_batch, int nchunks, int nslots,
			    const dnn_exec_config *cfg, char *err, size_t errlen);
void dnn_plan_destroy(dnn_plan *p);
/* The bytes of one CUDA worker's scratch block (dnn_cuda_scratch) once p's tasks ran on chunks of n samples: the
 * largest any node's CUDA tasks ask (the descriptors' cuda_scratch_bytes: conv's bf16 copies), as the block
 * dnn_cuda_scratch allocates for it (dnn_cuda_scratch_alloc_bytes; it only grows, each time to that rule for the
 * request at hand, so this bounds it); 0 when no task asks for one (fp32). */
double dnn_plan_cuda_scratch_bytes(const dnn_plan *p, int n);

/* Submit global step `step` in `slot`: load the samples idx[0..batch) of src into the chunks,
 * forward, and when p->train, backward and the update with `optim` (gradients scaled by
 * 1/global batch; with optim->clip_norm > 0 clipped to that global norm first: gradclip.h).
 * Returns 0, or -1 with err when StarPU refused a task (or clipping under --mode async). */
int dnn_submit_step(dnn_plan *p, int slot, const dnn_data_source *src, const int *idx, long step,
		    const dnn_optim_config *optim, char *err, size_t errlen);
/* Wait for the step in `slot`; its summed loss and correct count over the batch (over the
 * global batch on rank 0 of a multi-rank run, over the rank's shard elsewhere). -1 with err when
 * the wait fails or a task reported an error (dnn_worker_error). */
int dnn_wait_step(dnn_plan *p, int slot, double *loss_sum, double *correct, char *err, size_t errlen);
#endif
