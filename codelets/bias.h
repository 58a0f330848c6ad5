/* bias.h — per-channel bias on NCHW data. y (N,C,HW) += b (C); db (C) += sum over N,HW of dy. */
#ifndef DNN_BIAS_H
#define DNN_BIAS_H
#include <starpu.h>

#include "dnn_codelet.h"

typedef struct {
	int N, C, HW;
} dnn_bias_args;

void dnn_bias_forward_cpu(float *y, const float *b, const dnn_bias_args *a);
void dnn_bias_backward_cpu(float *db, const float *dy, const dnn_bias_args *a);

/* fwd (RW y, R b); bwd (R dy, REDUX db) */
extern struct starpu_codelet cl_bias_fwd, cl_bias_bwd;
int dnn_insert_bias_fwd(const dnn_task_opts *o, const dnn_bias_args *a, starpu_data_handle_t y, starpu_data_handle_t b);
int dnn_insert_bias_bwd(const dnn_task_opts *o, const dnn_bias_args *a, starpu_data_handle_t dy, starpu_data_handle_t db, int db_mode);
#endif
