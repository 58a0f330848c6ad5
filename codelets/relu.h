/* relu.h — y = max(x, 0); dx (=|+=) dy * (y > 0). Backward reads y, not x, so x can be freed. */
#ifndef DNN_RELU_H
#define DNN_RELU_H
#include <starpu.h>

#include "dnn_codelet.h"
#include <stddef.h>
#include <stdint.h>

typedef struct {
	long n;
	int accumulate_dx;
	int y_bf16; // 1: y is stored in bf16 (uint16_t, graph/model.h y_bf16): fwd writes it rounded as
	            // dnn_bf16_convert, bwd reads its mask from it (CPU only)
} dnn_relu_args;

void dnn_relu_forward_cpu(float *y, const float *x, long n);
void dnn_relu_backward_cpu(float *dx, const float *y, const float *dy, long n, int accumulate_dx);
/* The same with y stored in bf16 (a->y_bf16): y = bf16(max(x, 0)) rounded as dnn_bf16_convert (gemm_bf16.h), the
 * rounding the conv reading it would apply; the backward's mask is y > 0 of those values. */
void dnn_relu_forward_bf16_cpu(uint16_t *y, const float *x, long n);
void dnn_relu_backward_bf16_cpu(float *dx, const uint16_t *y, const float *dy, long n, int accumulate_dx);

/* fwd (R x, W y); bwd (R y, R dy, W|RW dx) */
extern struct starpu_codelet cl_relu_fwd, cl_relu_bwd;
int dnn_insert_relu_fwd(const dnn_task_opts *o, const dnn_relu_args *a, starpu_data_handle_t x, starpu_data_handle_t y);
int dnn_insert_relu_bwd(const dnn_task_opts *o, const dnn_relu_args *a, starpu_data_handle_t y, starpu_data_handle_t dy,
			 starpu_data_handle_t dx);
#endif
