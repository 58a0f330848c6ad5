/* op_harness.h — the one test harness of the ops (tests/op_harness.c runs it, tests/op_cases.c
 * holds the table): for each op of graph/ops/ops.def, a row with a double-precision reference of
 * its forward, the shapes and keys to run, its tolerances, and the op's own extra checks.
 *
 * For each shape the harness builds a tiny net through the graph API,
 *     input x C H W / dropout d0 x p=0 [/ dropout d1 x p=0] / <op> t d0[,d1] <keys> [/ dense, loss]
 * with its model and a training plan of `chunks` chunks, writes the inputs straight into the
 * placeholders' output handles (their own tasks never run) and the parameters into the model's
 * handles, and submits the op's descriptor forward and backward (op.h) for each chunk, as
 * training does. Then, by mode:
 *   unit: forward against the reference (every variant of the row: SIMD paths, fusion levels),
 *         backward against the analytic reference where the row has one;
 *   grad: input and parameter gradients against central finite differences of
 *         L = sum_chunks sum(ref(x) .* r), both overwriting (NaN-filled dx) and accumulating
 *         (dx0 +=), and the parameter gradients through their STARPU_REDUX handles over the chunks
 *         (g0 + sum over the chunks, then twice that after the second pass);
 *   (onnx: `op_harness onnx DIR` writes the rows' ONNX nets and checks for onnx_ops.sh)
 *   gpu:  the same submissions pinned to a CPU and to a CUDA worker; CUDA against CPU (or both
 *         against the reference where the row says so). 77 without a CUDA worker (gpu_util.h).
 * Adding an op = one row in op_cases.c (and its reference function). */
#ifndef DNN_OP_HARNESS_H
#define DNN_OP_HARNESS_H
#include <stddef.h>

#include "exec_config.h"
#include "graph.h"

enum { H_UNIT, H_GRAD, H_GPU, H_NMODES };

/* How a result is compared with its reference (each prints the worst element on failure):
 *   H_MIXED: max |got - ref| / max(1, |ref|)            (test_close_mixed)
 *   H_REL:   max |got - ref| / |ref|, exact where ref = 0 (test_close_rel)
 *   H_TERMS: max |got - ref| / scale, scale = |ref| for a single term, |dx0| + |g| for an
 *            accumulated gradient dx0 + g (the size of the terms a float sum rounds to)
 *   H_EXACT: bit for bit (test_same_bits) */
typedef enum { H_MIXED, H_REL, H_TERMS, H_EXACT } h_metric;
typedef struct {
	h_metric m;
	double tol;
} h_tol;

/* One shape: batch N in `chunks` chunks (0: 1), the input C x H x W, the op's keys; shift is
 * added to every input (large logits). seq: the input is a sequence of H tokens of C channels
 * (`input x seq H C`, token-major; W must be 1). */
typedef struct {
	int N, C, H, W;
	const char *keys;
	int chunks;
	float shift;
	int seq;
} h_shape;

/* What a reference sees: node t (its keys and inferred shape) of a chunk of n samples, the op's
 * inputs x[k] (n x in->C x in->H x in->W doubles; token-major when in->seq) and parameters
 * w[slot]; labels for the loss (n x label_len: T per sample on a sequence). */
typedef struct {
	const dnn_node *nd, *in;
	int n;
	const double *const *x;
	const double *const *w;
	const int *labels;
} h_ref_args;

typedef struct h_op h_op;
struct h_op {
	const char *op;     // the descriptor's name (graph/ops/<op>.c)
	int ninputs;        // placeholders before it: 1, or 2 (add)
	int fanout;         // add: the same placeholder for both inputs ("add t d0,d0")
	/* Optional: the net's lines from the input line to the op's line ("... t ..."), for shape s,
	 * when the default ones do not fit (an op that reads a token input or another op's table).
	 * Placeholders are still d0 (and d1); d0 may be the net's input itself (`input d0 tokens T`:
	 * ids uniform in [0, V) for the vocab=V of s->keys, no gradient, no finite difference). The
	 * dense layer and the loss follow as usual. Returns the length written. */
	int (*net)(const h_shape *s, char *buf, size_t len);
	const char *param_node; // the node whose parameters are set and checked (NULL: the op's, t)
	int is_loss;        // softmax_xent: forward writes dlogits; ref gives the loss sum
	/* y (n x nd->C x nd->H x nd->W) = the op's training forward, in double. The loss: y[0] =
	 * the summed loss, y[1] = the correct count. NULL: no forward reference (dropout's mask). */
	void (*ref)(const h_ref_args *a, double *y);
	/* Optional analytic backward of input 0: dx (= part) from dy, in double. */
	void (*ref_bwd)(const h_ref_args *a, const double *dy, double *dx);
	/* Optional: input k's values for this mode (default uniform in [-1, 1)); params likewise. */
	void (*fill)(int mode, int k, float *x, size_t n);
	void (*fill_param)(int slot, float *w, size_t n);
	h_tol fwd, bwd, grad, gpu;
	double fd_eps;      // finite-difference step
	double dy_min;      // |dL/dy| at least this (0: uniform in [-1, 1)), so a relative check of a
	                    // finite difference stays above its rounding
	int fd_points;      // at most this many elements per tensor get a finite difference (0: all)
	int gpu_vs_ref;     // gpu mode: each device against the reference, not CUDA against CPU
	int gpu_y_exact;    // gpu mode: CUDA's forward equals the CPU's (a selection: max pooling)
	/* Variants of the CPU path to run each unit shape under (SIMD kernels, fusion levels):
	 * set_variant(v) selects variant v < nvariants and returns 1 when it runs here, else 0. */
	int nvariants;
	int variants_same_bits; // every variant's y, dx and dx += equal the first's bit for bit
	int (*set_variant)(int v, char *name, size_t len);
	const h_shape *shapes[H_NMODES];
	int nshapes[H_NMODES];
	/* The op's own checks that are no shape sweep (ties, argument checks, bit-identity of SIMD
	 * kernels on chosen inputs, ...), per mode; they count failures in test_failures. */
	void (*extra[H_NMODES])(void);
	int seed[H_NMODES];
	/* ONNX (tests/scripts/onnx_ops.sh, through `op_harness onnx DIR`): a small net using the op
	 * (the lines after "input x 1 28 28", ending with the loss) that trains a few steps on
	 * synthetic data, is exported, checked with onnx.checker and run by onnxruntime against
	 * `starpu_anp predict`; onnx_py: Python lines run on the model (sys.argv[1]) that check the
	 * op's nodes. NULL: the op's export is covered elsewhere (onnx_export.sh's nets). */
	const char *onnx_net, *onnx_py;
};

/* The bf16 kernels' checks (tests/op_bf16.c): dense (lm_head runs its kernels) and attention
 * against their fp32 kernels, under a bound derived from bf16's significand, with a negative
 * control; the dense and attention rows' unit extras. */
void h_extra_dense_bf16(void);
void h_extra_attention_bf16(void);
/* bf16 activation storage (op_bf16.c): layernorm's and gelu's bf16 outputs against their fp32 ones */
void h_extra_layernorm_bf16(void);
void h_extra_gelu_bf16(void);
void h_extra_conv_bf16(void); /* every CPU conv path in bf16 against its fp32 kernel (op_bf16.c) */
void h_extra_conv_act_bf16(void); /* the conv's tasks with a bf16 x (stored activations, op_bf16.c) */
void h_extra_conv_out_bf16(void); /* the conv's forward task writing a bf16 y (stored activations, op_bf16.c) */
void h_extra_act_bf16(void);      /* batchnorm+relu, relu and add writing or reading bf16 activations (op_bf16.c) */
void h_extra_dense_bf16_gpu(void); /* gpu mode: dense's bf16 codelets on CUDA against the CPU's fp32 */

extern const h_op h_ops[];
extern const int h_nops;

/* For extras that need a CPU and a CUDA worker (gpu mode): their ids (gpu_util.h). */
int h_cpu_worker(void);
int h_cuda_worker(void);
/* The execution config every net the harness builds is planned with (the plan copies it): a
 * row's set_variant may change its fusion level or conv algorithm before the net is made. */
extern dnn_exec_config h_cfg;

#endif
