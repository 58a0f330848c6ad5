/* avgpool.h — global average pool. x (N,C,HW) -> y (N,C); dx (=|+=) dy / HW broadcast. */
#ifndef DNN_AVGPOOL_H
#define DNN_AVGPOOL_H
#include <starpu.h>

#include "dnn_codelet.h"

typedef struct {
	int N, C, HW;
	int accumulate_dx;
} dnn_avgpool_args;

void dnn_avgpool_forward_cpu(float *y, const float *x, const dnn_avgpool_args *a);
void dnn_avgpool_backward_cpu(float *dx, const float *dy, const dnn_avgpool_args *a);

/* fwd (R x, W y); bwd (R dy, W|RW dx) */
extern struct starpu_codelet cl_avgpool_fwd, cl_avgpool_bwd;
int dnn_insert_avgpool_fwd(const dnn_task_opts *o, const dnn_avgpool_args *a, starpu_data_handle_t x, starpu_data_handle_t y);
int dnn_insert_avgpool_bwd(const dnn_task_opts *o, const dnn_avgpool_args *a, starpu_data_handle_t dy, starpu_data_handle_t dx);
#endif
