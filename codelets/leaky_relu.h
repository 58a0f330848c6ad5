/* leaky_relu.h — the leaky rectifier:
 *
 *   y = x if x > 0, else alpha * x          (alpha in [0, 1]; PyTorch's LeakyReLU, ONNX's LeakyRelu)
 *   backward: dx (=|+=) dy if y > 0, else alpha * dy
 *
 * Backward reads y, not x (as relu's): with alpha >= 0, y > 0 exactly when x > 0, so x can be
 * freed after the forward. At x = 0 the slope taken is alpha (PyTorch's choice). */
#ifndef DNN_LEAKY_RELU_H
#define DNN_LEAKY_RELU_H
#include <starpu.h>
#include <stddef.h>

#include "dnn_codelet.h"

typedef struct {
	long n;            // elements
	float alpha;       // slope for x <= 0
	int accumulate_dx; // backward: 0 = dx = ..., 1 = dx += ...
} dnn_leaky_relu_args;

void dnn_leaky_relu_forward_cpu(float *y, const float *x, long n, float alpha);
void dnn_leaky_relu_backward_cpu(float *dx, const float *y, const float *dy, long n, float alpha, int accumulate_dx);

/* fwd (R x, W y); bwd (R y, R dy, W|RW dx per a->accumulate_dx) */
extern struct starpu_codelet cl_leaky_relu_fwd, cl_leaky_relu_bwd;
int dnn_insert_leaky_relu_fwd(const dnn_task_opts *o, const dnn_leaky_relu_args *a, starpu_data_handle_t x,
			      starpu_data_handle_t y);
int dnn_insert_leaky_relu_bwd(const dnn_task_opts *o, const dnn_leaky_relu_args *a, starpu_data_handle_t y,
			      starpu_data_handle_t dy, starpu_data_handle_t dx);

#ifdef DNN_HAVE_CUDA
#ifdef __cplusplus
extern "C" {
#endif
void dnn_leaky_relu_fwd_cuda(void *buffers[], void *cl_arg);
void dnn_leaky_relu_bwd_cuda(void *buffers[], void *cl_arg);
#ifdef __cplusplus
}
#endif
#endif
#endif
