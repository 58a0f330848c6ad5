/* fuse.h — every fusion decision, in one place.
 *
 * Fusion level (the plan's cfg.fuse: the environment's DNN_FUSE, graph/exec_config.h): 0 = none; 1 (the default) = batchnorm+relu in
 * one task, a relu in its maxpool's tasks, and residual-add gradients in the add's handle; 2 = also a conv's bias in the conv's
 * tasks (off by default: traces then have no bias_fwd/bias_bwd tasks); 3 = also batch norm inside the convs
 * around it (dnn_graph_bn_conv; codelets/conv2d_bnfuse.h). The op files (graph/ops)
 * only ask these questions; the answers for a plan are computed once by dnn_fuse_plan. */
#ifndef DNN_FUSE_H
#define DNN_FUSE_H
#include <stdio.h>

#include "graph.h"
#include "model.h"

/* For a batchnorm node whose only consumer is a relu: that relu's index; -1 otherwise. */
int dnn_graph_bn_relu(const dnn_graph *g, int i);

/* For a relu node fused into its maxpool at level >= 1 (model.h relu_pool): that maxpool's index;
 * -1 otherwise. */
int dnn_graph_relu_pool(const dnn_graph *g, int i);

/* Fill p->fuse, p->bn_relu, p->relu_pool and p->grad_of (model.h) for the plan's graph; -1 on allocation failure. */
int dnn_fuse_plan(dnn_plan *p, char *err, size_t errlen);
/* Node i is a batchnorm or a relu fused with each other: the partner's index; -1 otherwise. */
int dnn_fuse_bn_relu_partner(const dnn_plan *p, int i);
/* Node i is a relu fused into its maxpool, or that maxpool: the partner's index; -1 otherwise. */
int dnn_fuse_relu_pool_partner(const dnn_plan *p, int i);
/* For a batchnorm i fused with its relu (level >= 1) whose input is a conv without bias read by nothing else
 * (*conv_a) and whose relu is read by one single-input conv only (*conv_b): 0; -1 otherwise. */
int dnn_graph_bn_conv(const dnn_graph *g, int i, int *conv_a, int *conv_b);
/* Level 3, for conv A or its batchnorm: the other's index (A's forward task computes the batchnorm's
 * statistics); -1 otherwise (and always under --batchnorm global). */
int dnn_fuse_bn_stats_conv(const dnn_plan *p, int i);
/* Level 3, for conv B or the batchnorm: the other's index (B's tasks apply the batchnorm and its relu to
 * their input, A's output, which they read instead of the relu's output); -1 otherwise. */
int dnn_fuse_bn_apply_conv(const dnn_plan *p, int i);
/* Conv i adds its bias in its own forward and backward-filter tasks. */
int dnn_fuse_conv_bias(const dnn_plan *p, int i);
/* Input ik of add node a has its gradient in the add's own handle: no add-backward task for it. */
int dnn_fuse_shares_grad(const dnn_plan *p, int ik, int a);
/* The summary's line: how many tasks the fusions merge at `level` (DNN_FUSE: 0 to 3). */
void dnn_fuse_print_summary(const dnn_graph *g, int level, FILE *out);
#endif
