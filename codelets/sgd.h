/* sgd.h — fused SGD step for one parameter tensor (PyTorch semantics):
 *   g = grad * scale + weight_decay * w      (scale = 1/B turns the summed gradient into a mean)
 *   v = momentum * v + g
 *   w = w - lr * v
 *   grad = 0                                 (ready for the next iteration's REDUX accumulation)
 */
#ifndef DNN_SGD_H
#define DNN_SGD_H
#include <starpu.h>

typedef struct {
	long n;
	float lr, momentum, weight_decay, scale;
} dnn_sgd_args;

void dnn_sgd_update_cpu(float *w, float *v, float *grad, const dnn_sgd_args *a);

/* (RW w, RW v, RW grad) */
extern struct starpu_codelet cl_sgd_update;
void dnn_insert_sgd_update(const dnn_sgd_args *a, starpu_data_handle_t w, starpu_data_handle_t v,
			   starpu_data_handle_t grad);
#endif
