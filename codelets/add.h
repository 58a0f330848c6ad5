/* add.h — residual add y = a + b (n floats). Backward is a fan-out: each input's gradient
 * receives dy, overwritten or accumulated (dx (=|+=) dy), via cl_add_bwd once per input. */
#ifndef DNN_ADD_H
#define DNN_ADD_H
#include <starpu.h>

#include "dnn_codelet.h"

typedef struct {
	long n;
	int accumulate_dx;
	int x_bf16; // fwd: bit k set when input k (0 or 1) is stored in bf16 (uint16_t, graph/model.h y_bf16),
	            // widened exactly before the fp32 sum (CPU only)
} dnn_add_args;

void dnn_add_forward_cpu(float *y, const float *a, const float *b, long n);
/* The same with a (a_bf16) and/or b (b_bf16) stored in bf16 (uint16_t), widened exactly: y = a + b in fp32. */
void dnn_add_forward_mixed_cpu(float *y, const void *a, int a_bf16, const void *b, int b_bf16, long n);
void dnn_add_backward_cpu(float *dx, const float *dy, long n, int accumulate_dx);

/* fwd (R a, R b, W y); bwd (R dy, W|RW dx) */
extern struct starpu_codelet cl_add_fwd, cl_add_bwd;
int dnn_insert_add_fwd(const dnn_task_opts *o, const dnn_add_args *a, starpu_data_handle_t x0, starpu_data_handle_t x1,
			starpu_data_handle_t y);
int dnn_insert_add_bwd(const dnn_task_opts *o, const dnn_add_args *a, starpu_data_handle_t dy, starpu_data_handle_t dx);
#endif
