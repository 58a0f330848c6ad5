/* op.h — the one description of an op (graph/ops/<name>.c), and what its functions are given.
 *
 * A descriptor says everything the rest of graph/ needs to know about an op: its keyword and
 * keys (parser), how many inputs it takes, its shape inference, its trainable parameters and
 * extra per-chunk buffers (model.c), and how one chunk's forward and backward become tasks.
 * graph.c and model.c only loop over nodes and call these, and so does the ONNX export
 * (onnx_emit.h); no switch on the op elsewhere.
 * The list of ops is graph/ops/ops.def (one line per op).
 */
#ifndef DNN_OP_H
#define DNN_OP_H
#include <stddef.h>
#include <stdint.h>

#include "graph.h"
#include "model.h"

/* A key=value attribute: an int or float field of dnn_node, with its accepted range. */
typedef struct {
	const char *key;
	char type;        // 'i': int field, 'f': float field
	double lo, hi;    // accepted range (inclusive)
	size_t offset;    // offsetof(dnn_node, field)
} dnn_op_key;
#define DNN_KEY_INT(k, lo, hi, field) {k, 'i', lo, hi, offsetof(dnn_node, field)}
#define DNN_KEY_FLOAT(k, lo, hi, field) {k, 'f', lo, hi, offsetof(dnn_node, field)}

/* What a forward or backward function works on: one chunk of one step. */
typedef struct {
	dnn_plan *p;
	dnn_model *m;
	const dnn_graph *g;
	int slot, c;      // window slot, chunk
	int n;            // samples in the chunk
	long step;        // global step number (dropout masks, augmentation)
	int sample0;      // the chunk's first sample's position in the global batch
	char *written;    // backward: written[j] = node j's gradient handle already holds a contribution
	const dnn_task_opts *opts; // the chunk's insert options (its worker under --pin-chunks) or NULL
} dnn_op_ctx;

struct dnn_onnx_ctx; /* onnx_emit.h */

/* A trainable parameter tensor of an op: node i's tensor `slot` is "<node>.<name>". */
typedef struct {
	const char *name; // "weight", "bias", "gamma", ...
	int no_decay;     // no weight decay (biases, batch-norm parameters)
} dnn_op_param_slot;
/* The slots of conv and dense (dnn_op_params_linear): the weight, then the bias (bias=1). */
enum { DNN_SLOT_WEIGHT, DNN_SLOT_BIAS };
extern const dnn_op_param_slot dnn_op_linear_slots[2];

typedef struct {
	const char *name;           // keyword in net files
	int min_inputs, max_inputs; // 0, 0 for the input line
	const dnn_op_key *keys;
	int nkeys;
	/* Defaults before the keys are read (optional; stride=1, dilation=1, eps, momentum are set
	 * for every op), and checks after (optional: required keys). Errors: "src:line: message". */
	void (*defaults)(dnn_node *nd);
	int (*check)(const dnn_node *nd, const char *src, char *err, size_t errlen);
	/* Shape inference: nd->C/H/W, params, flops from its inputs (already inferred). */
	int (*infer)(dnn_graph *g, dnn_node *nd, char *err, size_t errlen);
	/* Trainable parameters: the tensors a node may have, in the order create_params adds them
	 * (dnn_model_add_param(m, i, slot, ...) with slot 0, 1, ...; trailing ones may be left out,
	 * as conv's bias). Read them with dnn_op_param(m, i, slot), never by position. */
	const dnn_op_param_slot *param_slots;
	int nparam_slots;
	/* Running statistics (state that is not trained but checkpointed, as batch norm's): blocks of
	 * C floats each (C = the node's channels), named running_blocks[k] ("mean", "var"), in that
	 * order in m->running[i] (m->running_n[i] = nrunning_blocks x C: dnn_model_add_running). */
	const char *const *running_blocks;
	int nrunning_blocks;
	/* Create the parameters and the running statistics (and initialise them); optional. */
	int (*create_params)(dnn_model *m, int i, uint64_t *rng, char *err, size_t errlen);
	/* Whether a chunk of n samples fits the op's kernels (cuDNN takes int tensor sizes:
	 * dnn_op_check_int_elems); optional. dnn_plan_create calls it with its largest chunk before
	 * it registers any handle. 0, or -1 with "src:line: name: message" in err. */
	int (*check_chunk)(const dnn_graph *g, const dnn_node *nd, int n, char *err, size_t errlen);
	/* Floats of a per-chunk buffer kept from forward to backward (training), 0: none; optional:
	 * saved_floats(nd) + saved_floats_per_sample(nd) x the chunk's samples (per-token statistics:
	 * layernorm's mean and rstd of each row). */
	size_t (*saved_floats)(const dnn_node *nd);
	size_t (*saved_floats_per_sample)(const dnn_node *nd);
	/* bf16 activation storage (model.h dnn_plan.y_bf16), both optional (NULL: never). bf16_out:
	 * 1 when node i's tasks in plan p (its fusion partner's, for a node another op's task writes)
	 * can write its output y in bf16, and its own backward can read it so. bf16_in: 1 when node
	 * i's forward and backward tasks can read its input j (the node index) in bf16. Asked once,
	 * by dnn_plan_create, after the fusion plan (p->fuse, bn_relu, ...) is made. */
	int (*bf16_out)(const dnn_plan *p, int i);
	int (*bf16_in)(const dnn_plan *p, int i, int j);
	/* Bytes node i's CUDA tasks ask of their worker's scratch block (dnn_cuda_scratch: conv's bf16
	 * copies) for a chunk of n samples under p's configuration, the largest of its passes; optional
	 * (none). The GPU memory preflight (runtime/preflight.c) counts the largest over the nodes. */
	size_t (*cuda_scratch_bytes)(const dnn_plan *p, int i, int n);
	/* Submit node i's tasks for ctx's chunk; return 0 or a negative errno. backward may be
	 * NULL (nothing to do). Backward writes input 0's gradient with dnn_op_take_dx. */
	int (*forward)(dnn_op_ctx *ctx, int i);
	int (*backward)(dnn_op_ctx *ctx, int i);
	/* Write node i's ONNX node(s), eval mode, and set x->v[i] (onnx_emit.h); 0, or -1 with
	 * dnn_onnx_fail. NULL: the op cannot be exported (the export fails naming it). */
	int (*export_onnx)(struct dnn_onnx_ctx *x, int i);
	/* The op routes its inputs' gradients itself (add: one per input), so the loop does not
	 * mark input 0's gradient as written after its backward. */
	int routes_grads;
	/* The op works on images only (C x H x W, channel-major): the parser refuses a sequence input
	 * (graph.h: seq). */
	int image_only;
} dnn_op_desc;

const dnn_op_desc *dnn_op_get(dnn_op op);

/* ---------------------------------------------------------------- helpers for op files */
/* Handles of chunk ctx->c: node j's output (the slot's input tensor for the input node), its
 * gradient (NULL for the input node; shared with a residual add per the plan's fusion), and
 * its per-chunk saved buffer. */
starpu_data_handle_t dnn_op_out(const dnn_op_ctx *ctx, int j);
starpu_data_handle_t dnn_op_dy(const dnn_op_ctx *ctx, int j);
starpu_data_handle_t dnn_op_saved(const dnn_op_ctx *ctx, int j);
/* 1 when node j's output (dnn_op_out) is stored in bf16 (dnn_plan.y_bf16), 0 when fp32. */
int dnn_op_out_bf16(const dnn_op_ctx *ctx, int j);
/* For a backward writing the gradient of input j: 1 when it must accumulate (+=) into it,
 * 0 when it is the first writer of this step (=); marks it written. */
int dnn_op_take_dx(dnn_op_ctx *ctx, int j);
/* Point ctx at chunk c of its plan (size, first sample, insert options in *buf, its `written`
 * bytes): for an op whose tasks of every chunk wait for all chunks (batch norm's global
 * statistics: the plan then submits layer by layer, model.c). */
void dnn_op_ctx_chunk(dnn_op_ctx *ctx, int c, dnn_task_opts *buf);
/* Count one more task of the step (dnn_plan.tasks_per_step); returns rc. */
int dnn_op_count(dnn_op_ctx *ctx, int rc);
#define DNN_OP_SUBMIT(ctx, call)                              \
	do {                                                  \
		int dnn_op_rc_ = dnn_op_count((ctx), (call)); \
		if (dnn_op_rc_ != 0)                          \
			return dnn_op_rc_;                    \
	} while (0)

/* "src:line: message" (line 0: "src: message"); returns -1. */
int dnn_op_fail(char *err, size_t errlen, const char *src, int line, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
/* For check_chunk: 0 when `what` of node nd (the output of node t: nd itself or one of its
 * inputs) for a chunk of n samples has at most INT_MAX elements, the most a cuDNN tensor
 * descriptor takes; else -1 with "src:line: name: its <what> for a chunk of n samples ...". */
int dnn_op_check_int_elems(const dnn_graph *g, const dnn_node *nd, const char *what, const dnn_node *t, int n,
			   char *err, size_t errlen);
/* Output shape = input 0's shape (element-wise ops). */
int dnn_op_infer_same_shape(dnn_graph *g, dnn_node *nd, char *err, size_t errlen);
/* Parameter `slot` of node i (param_slots), or NULL when the node has no such tensor. */
dnn_param *dnn_op_param(const dnn_model *m, int i, int slot);
/* The handle chunk ctx->c's backward accumulates (+=) parameter pr's gradient into, and the
 * access mode to insert it with (*mode): its partial in STARPU_RW (fixed-order sums, chunksum.h)
 * or, with --deterministic off, pr->hg in STARPU_REDUX. */
starpu_data_handle_t dnn_op_grad(const dnn_op_ctx *ctx, const dnn_param *pr, int *mode);
/* Weight (and bias) of a conv or dense layer (dnn_op_linear_slots): PyTorch's default uniform
 * init in +-1/sqrt(fan_in). */
int dnn_op_params_linear(dnn_model *m, int i, long fan_in, long nweights, uint64_t *rng, char *err, size_t errlen);
#endif
