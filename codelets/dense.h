/* dense.h — fully connected layer. x (N,IN), w (OUT,IN) (PyTorch layout), b (OUT), y (N,OUT).
 * y = x w^T + b. dw, db += (REDUX handles); dx overwritten or accumulated per accumulate_dx.
 * Without a bias (b and db NULL in the kernels, NULL bias handles in the insert helpers, which
 * then use the _nobias codelets): y = x w^T, dw += dy^T x (lm_head's tied output layer).
 * bf16 = 1 (--precision bf16): the three GEMMs multiply bf16-rounded operands with fp32 sums
 * (gemm_bf16.h); w, y and the gradients stay fp32 tensors, the bias and db sums fp32.
 * x_bf16 = 1 (with bf16; the plan's bf16 activation storage, graph/model.h y_bf16): x holds bf16
 * values (uint16_t, rounded by its writer with dnn_bf16_convert), which the forward and weight-
 * gradient GEMMs read in place: the same bits as rounding the fp32 x they were rounded from. */
#ifndef DNN_DENSE_H
#define DNN_DENSE_H
#include <starpu.h>

#include "dnn_codelet.h"

typedef struct {
	int N, IN, OUT;
	int accumulate_dx;
	int bf16;   // 1: the GEMMs in bf16 (gemm_bf16.h); part of the perf-model footprint (dnn_args_footprint)
	int x_bf16; // 1 (bf16 only): x is stored in bf16 (uint16_t); the CUDA functions refuse it
	int y_bf16; // 1 (bf16 only): y is written in bf16 (dnn_gemm_bf16_out: the fp32 y's rounding); CUDA refuses it
} dnn_dense_args;

double dnn_dense_flops_fwd(const dnn_dense_args *a); // 2*N*IN*OUT

/* 0, or -1 when a bf16 GEMM cannot run (its buffers, oneDNN; x_bf16 or y_bf16 without bf16): the
 * output is then not written. x: float, or uint16_t bf16 values when a->x_bf16; y likewise with
 * a->y_bf16 (forward only). */
int dnn_dense_forward_cpu(void *y, const void *x, const float *w, const float *b, const dnn_dense_args *a);
int dnn_dense_backward_data_cpu(float *dx, const float *dy, const float *w, const dnn_dense_args *a);
int dnn_dense_backward_weight_cpu(float *dw, float *db, const void *x, const float *dy, const dnn_dense_args *a);

/* fwd (R x, R w, R b, W y); bwd_data (R dy, R w, W|RW dx); bwd_weight (R x, R dy, REDUX dw, REDUX db);
 * fwd_nobias (R x, R w, W y); bwd_weight_nobias (R x, R dy, REDUX|RW dw) */
extern struct starpu_codelet cl_dense_fwd, cl_dense_bwd_data, cl_dense_bwd_weight;
extern struct starpu_codelet cl_dense_fwd_nobias, cl_dense_bwd_weight_nobias;

/* b == NULL (fwd) or db == NULL (bwd_weight): no bias, the _nobias codelet. */
int dnn_insert_dense_fwd(const dnn_task_opts *o, const dnn_dense_args *a, starpu_data_handle_t x, starpu_data_handle_t w,
			  starpu_data_handle_t b, starpu_data_handle_t y);
int dnn_insert_dense_bwd_data(const dnn_task_opts *o, const dnn_dense_args *a, starpu_data_handle_t dy, starpu_data_handle_t w,
			       starpu_data_handle_t dx);
int dnn_insert_dense_bwd_weight(const dnn_task_opts *o, const dnn_dense_args *a, starpu_data_handle_t x, starpu_data_handle_t dy,
				 starpu_data_handle_t dw, starpu_data_handle_t db, int grad_mode);
#endif
