/* dist.h — the cross-rank parts of a training step (StarPU-MPI), used by model.c. */
#ifndef DNN_DIST_H
#define DNN_DIST_H
#include "model.h"

/* Before the step's forward (async: pull parameters from the server snapshot of step t-1-S, add
 * this rank's own later changes and, with lookahead, the same again for each other rank). */
void dnn_dist_before_forward(dnn_plan *p, long step);
/* After the step's backward: sync = all-reduce + identical update on every rank; async = push
 * the local gradient to the parameter server (and snapshot it). */
void dnn_dist_after_backward(dnn_plan *p, int slot, long step, const dnn_sgd_config *sgd);
/* Sum the step's loss/correct statistics over the ranks into rank 0. */
void dnn_dist_reduce_stats(dnn_plan *p, int slot);
/* The statistics handle to wait for in dnn_wait_step. */
starpu_data_handle_t dnn_dist_stats_handle(dnn_plan *p, int slot, float **host);
void dnn_dist_destroy(dnn_model *m);
#endif
