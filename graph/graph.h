/* graph.h — network files: parsing, validation, shape inference and summaries.
 *
 * A network is a DAG written one node per line (docs/net-format.md):
 *     <op> <name> [<input>[,<input>...]] key=value ...
 * `#` starts a comment. The `input` line gives the sample shape (C H W); the last node is the
 * loss (softmax_xent). Every error is reported as "file:line: message".
 */
#ifndef DNN_GRAPH_H
#define DNN_GRAPH_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define DNN_MAX_INPUTS 8
#define DNN_NAME_MAX 64

typedef enum {
	DNN_OP_INPUT,
	DNN_OP_CONV,
	DNN_OP_DENSE,
	DNN_OP_RELU,
	DNN_OP_MAXPOOL,
	DNN_OP_AVGPOOL,
	DNN_OP_BATCHNORM,
	DNN_OP_ADD,
	DNN_OP_SOFTMAX_XENT,
	DNN_OP_COUNT
} dnn_op;

typedef struct {
	dnn_op op;
	char name[DNN_NAME_MAX];
	int line;                      // line in the net file, for messages
	int ninputs;
	int inputs[DNN_MAX_INPUTS];    // node indices (after parsing: topologically earlier)
	/* attributes (only those of the op are meaningful) */
	int out;                       // conv: output channels; dense: output features
	int k, stride, pad, dilation;  // conv, maxpool (k = kernel size, square)
	int bias;                      // conv (default 0), dense (always 1)
	float eps, momentum;           // batchnorm
	/* inferred per-sample output shape */
	int C, H, W;
	long long params;              // number of trainable parameters
	double flops;                  // forward FLOPs per sample (multiply-add = 2)
	int nconsumers;                // how many nodes read this node's output
} dnn_node;

typedef struct {
	char source[256]; // file name (or "builtin:NAME") used in messages
	int nnodes;
	dnn_node *nodes;  // topological order; nodes[0] is the input, nodes[nnodes-1] the loss
	int classes;      // = the loss input's feature count
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

long long dnn_graph_params(const dnn_graph *g);
double dnn_graph_flops_fwd(const dnn_graph *g);   // per sample
double dnn_graph_flops_train(const dnn_graph *g); // per sample: forward + backward (~3x fwd)
uint64_t dnn_graph_fingerprint(const dnn_graph *g);
void dnn_graph_print_summary(const dnn_graph *g, FILE *out);
const char *dnn_op_name(dnn_op op);

/* Fusion level (graph/model.c), from the environment's DNN_FUSE: 0 = none; 1 (the default) =
 * batchnorm+relu in one task and residual-add gradients in the add's handle; 2 = also a conv's
 * bias in the conv's tasks (off by default: traces then have no bias_fwd/bias_bwd tasks). */
int dnn_fuse_level(void);
/* For a batchnorm node whose only consumer is a relu: that relu's index (the two run as one
 * task per chunk when fusion is on); -1 otherwise. */
int dnn_graph_bn_relu(const dnn_graph *g, int i);

/* Built-in nets: names and their text. */
int dnn_builtin_net_count(void);
const char *dnn_builtin_net_name(int i);
const char *dnn_builtin_net_text(const char *name); // NULL if unknown
#endif
