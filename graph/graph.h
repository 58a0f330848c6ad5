/* graph.h — network files: parsing, validation, shape inference and summaries.
 *
 * A network is a DAG written one node per line (docs/net-format.md):
 *     <op> <name> [<input>[,<input>...]] key=value ...
 * `#` starts a comment. The `input` line gives the sample shape: `input x C H W` (images),
 * `input x seq T C` (a float sequence) or `input x tokens T` (T token ids); the last node is the
 * loss (softmax_xent, per token on a sequence). Every error is reported as "file:line: message".
 */
#ifndef DNN_GRAPH_H
#define DNN_GRAPH_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define DNN_MAX_INPUTS 8
#define DNN_NAME_MAX 64

/* The ops, in the order of graph/ops/ops.def (DNN_OP_CONV, ...); each is described once, by its
 * descriptor in graph/ops/<name>.c (op.h). */
typedef enum {
#define DNN_OP(name, ENUM) DNN_OP_##ENUM,
#include "ops/ops.def"
#undef DNN_OP
	DNN_OP_COUNT
} dnn_op;

/* "Absurd size" limits of net files: generous for real nets, small enough that no product overflows. */
#define DNN_MAX_CHANNELS 65536
#define DNN_MAX_SPATIAL 16384
#define DNN_MAX_KERNEL 64
#define DNN_MAX_STRIDE 64
#define DNN_NODE_FATTRS 4

typedef struct {
	dnn_op op;
	char name[DNN_NAME_MAX];
	int line;                      // line in the net file, for messages
	int ninputs;
	int inputs[DNN_MAX_INPUTS];    // node indices (after parsing: topologically earlier)
	/* attributes (only those of the op are meaningful) */
	int out;                       // conv: output channels; dense: output features
	int k, stride, pad, dilation;  // conv, maxpool (k = kernel size, square); attention: k = heads
	int bias;                      // conv (default 0), dense (always 1)
	float eps, momentum;           // batchnorm
	float fattr[DNN_NODE_FATTRS];  // further float keys of an op (its descriptor names them)
	/* inferred per-sample output shape */
	int C, H, W;
	/* seq: the output is a sequence of H = T tokens of C channels each (W = 1), stored token-major:
	 * element (t, c) of a sample at t * C + c, so a chunk of n samples is an (n T) x C matrix.
	 * tokens (the input line only): its values are token ids (exact integers held in floats). */
	int seq, tokens;
	long long params;              // number of trainable parameters
	double flops;                  // forward FLOPs per sample (multiply-add = 2)
	int nconsumers;                // how many nodes read this node's output
} dnn_node;

typedef struct {
	char source[256]; // file name (or "builtin:NAME") used in messages
	int nnodes;
	dnn_node *nodes;  // topological order; nodes[0] is the input, nodes[nnodes-1] the loss
	int classes;      // = the loss input's feature count (a language model: the vocabulary)
	int label_len;    // labels per sample: 1, or T for a per-token loss (a sequence's softmax_xent)
} dnn_graph;

/* Parse text (NUL-terminated) named `source`. Returns 0, or -1 with "source:line: message". */
int dnn_graph_parse(dnn_graph *g, const char *text, const char *source, char *err, size_t errlen);
/* NAME of a built-in net (graph/nets/NAME.net, compiled in) or a path to a .net file. */
int dnn_graph_load(dnn_graph *g, const char *name_or_path, char *err, size_t errlen);
void dnn_graph_free(dnn_graph *g);

/* Rewrite the input line's H and W (ANP app: --input 224); re-runs shape inference. */
int dnn_graph_set_input_hw(dnn_graph *g, int H, int W, char *err, size_t errlen);
/* Rewrite the out= of the dense layer that feeds the loss (ANP app: the class count of an image
 * folder); re-runs shape inference. Fails when the loss's input is not such a dense layer. */
int dnn_graph_set_classes(dnn_graph *g, int classes, char *err, size_t errlen);

/* "The same net". A net's canonical text is one line per node in topological order, each with
 * every key of its op (ints as %d, floats as %.9g, which reads back as the same float). Two nets
 * are the same net iff their canonical texts are equal: dnn_graph_compare says where they first
 * differ, dnn_graph_fingerprint hashes that text. Every command that pairs a net with a
 * checkpoint (train --resume, eval, predict, export) decides with these alone. */

/* Node i as one net-file line (no newline): "conv c1 x out=6 k=5 ..." with every key of its op.
 * Returns its length, or -1 when it does not fit in len. */
int dnn_graph_node_line(const dnn_graph *g, int i, char *buf, size_t len);
/* The whole net as net-file text (after every rewrite: --input, the class count), one line per
 * node in topological order, after an optional "# comment" line; without the comment, the
 * canonical text. It parses back to the same net. Allocated (free()), NULL when out of memory. */
char *dnn_graph_to_text(const dnn_graph *g, const char *comment);

/* Where two nets first differ, in the order of their canonical text. */
#define DNN_DIFF_TEXT 2048 /* a node's whole line fits (its inputs: DNN_MAX_INPUTS names; every key) */
typedef struct {
	int node;                 // 1-based position of the first node that differs; 0: the same net
	char name[DNN_NAME_MAX];  // that node's name (in a; in the longer net when one has no such node)
	char key[DNN_NAME_MAX];   // "op", "name", "inputs", "C"/"H"/"W" (input line), a key of the op,
				  // or "node" (one net has no node there)
	char a[DNN_DIFF_TEXT];    // the value in a, and in b ("node": the node's line, or "(none)")
	char b[DNN_DIFF_TEXT];
} dnn_graph_diff;
/* 0 when a and b are the same net (d->node = 0), else 1 with the first difference in d. */
int dnn_graph_compare(const dnn_graph *a, const dnn_graph *b, dnn_graph_diff *d);
/* d as one message fragment naming the node and the key: "node 4 (d1): p=0.899999976 in
 * A_LABEL, p=0.25 in B_LABEL" (or "node 14 is '...' in A_LABEL, '(none)' in B_LABEL"). */
void dnn_graph_diff_line(const dnn_graph_diff *d, const char *a_label, const char *b_label, char *buf, size_t len);
/* FNV-1a 64 of the canonical text: equal for the same net, and (but for a hash collision)
 * different otherwise. What checkpoints of format version 3 store. */
uint64_t dnn_graph_fingerprint(const dnn_graph *g);
/* The hash that checkpoints of format versions 1 and 2 stored as their fingerprint: ops, names,
 * wiring, the integer keys and the shapes, but no float key (eps, momentum, p). Only for reading
 * those checkpoints; it is not a test of the same net. */
uint64_t dnn_graph_structure_hash(const dnn_graph *g);

long long dnn_graph_params(const dnn_graph *g);
double dnn_graph_flops_fwd(const dnn_graph *g);   // per sample
double dnn_graph_flops_train(const dnn_graph *g); // per sample: forward + backward (~3x fwd)
/* The layer table, the totals and the line of fused tasks at fusion level `fuse` (DNN_FUSE, fuse.h). */
void dnn_graph_print_summary(const dnn_graph *g, int fuse, FILE *out);
const char *dnn_op_name(dnn_op op);

/* What a training run of `batch` samples in `chunks` chunks keeps in memory, in bytes, from the
 * net alone (graph/model.c allocates the same): the parameters; their gradients (one partial per
 * chunk: the fixed-order sums); the optimiser's state (state_mult floats per parameter: 1 for
 * SGD and LARS, 2 for AdamW and LAMB); every node's output and gradient and its saved buffer for
 * the batch (an upper bound: fusion stores fewer); the `window` slots of input and labels. The
 * process adds its libraries, StarPU's and OpenBLAS's buffers and the data set. */
typedef struct {
	double params, grads, state, activations, inputs, total;
} dnn_mem_estimate;
dnn_mem_estimate dnn_graph_train_memory(const dnn_graph *g, int batch, int chunks, int window, int state_mult);

/* Built-in nets: names and their text. */
int dnn_builtin_net_count(void);
const char *dnn_builtin_net_name(int i);
const char *dnn_builtin_net_text(const char *name); // NULL if unknown
#endif
