/* sgd.h — fused SGD step for one parameter tensor (PyTorch semantics):
 *   g = grad * scale + weight_decay * w      (scale = 1/B turns the summed gradient into a mean)
 *   v = momentum * v + g
 *   w = w - lr * v
 *   grad = 0                                 (ready for the next iteration's REDUX accumulation)
 *                                            unless keep_grad: then grad is only read (STARPU_R),
 *                                            e.g. an all-reduced gradient shared by several updates
 */
#ifndef DNN_SGD_H
#define DNN_SGD_H
#include <starpu.h>

#include "dnn_codelet.h"

typedef struct {
	long n;
	float lr, momentum, weight_decay, scale;
	int keep_grad;   // 1: grad is read-only, not zeroed
	int write_delta; // 1: a 4th buffer receives the applied change, delta = -lr * v (async push)
} dnn_sgd_args;

void dnn_sgd_update_cpu(float *w, float *v, float *grad, const dnn_sgd_args *a);
/* delta may be NULL (write_delta == 0). */
void dnn_sgd_update_delta_cpu(float *w, float *v, float *grad, float *delta, const dnn_sgd_args *a);

/* (RW w, RW v, RW grad) — or R grad with keep_grad */
extern struct starpu_codelet cl_sgd_update;
int dnn_insert_sgd_update(const dnn_task_opts *o, const dnn_sgd_args *a, starpu_data_handle_t w, starpu_data_handle_t v,
			   starpu_data_handle_t grad);
/* With write_delta: (RW w, RW v, RW|R grad, W delta). */
int dnn_insert_sgd_update_delta(const dnn_task_opts *o, const dnn_sgd_args *a, starpu_data_handle_t w, starpu_data_handle_t v,
				 starpu_data_handle_t grad, starpu_data_handle_t delta);
#endif
