/* grad_accum.h — gradient zero/accumulate pair, the STARPU_REDUX methods of every gradient. */
#ifndef DNN_GRAD_ACCUM_H
#define DNN_GRAD_ACCUM_H
#include <starpu.h>

#include "dnn_codelet.h"
#include <stddef.h>

/* Plain kernels. */
void dnn_grad_zero_cpu(float *dst, size_t n);                     // dst[n] = 0
void dnn_grad_accum_cpu(float *dst, const float *src, size_t n);  // dst[n] += src[n]
void dnn_grad_axpy_cpu(float *dst, float alpha, const float *src, size_t n); // dst[n] += alpha*src[n]

extern struct starpu_codelet cl_grad_zero;   // (W dst)
extern struct starpu_codelet cl_grad_accum;  // (RW|COMMUTE dst, R src): the reduction method
extern struct starpu_codelet cl_grad_add;    // same kernel, modes given at insert time
extern struct starpu_codelet cl_grad_axpy;   // (RW dst, R src), cl_arg a float alpha: dst += alpha*src
/* Slices of a vector, for the ring all-reduce (graph/dist.c). cl_arg: a size_t offset (in
 * elements) that outlives the task (STARPU_CL_ARGS_NFREE); the slice's length is the chunk's. */
extern struct starpu_codelet cl_grad_slice_get; // (W chunk, R full): chunk[i] = full[off + i]
extern struct starpu_codelet cl_grad_slice_put; // (RW full, R chunk): full[off + i] = chunk[i]

/* Make `grad` (a vector handle) a REDUX target: StarPU gives each worker a zeroed private copy
 * and sums the copies with cl_grad_accum. */
void dnn_grad_set_redux(starpu_data_handle_t grad);

/* dst += src as a task; dst_mode is STARPU_RW, STARPU_REDUX or STARPU_RW|STARPU_COMMUTE. */
int dnn_insert_grad_accum(const dnn_task_opts *o, starpu_data_handle_t dst, int dst_mode, starpu_data_handle_t src);
int dnn_insert_grad_zero(const dnn_task_opts *o, starpu_data_handle_t dst);
/* dst += alpha * src as a task (dst RW). */
int dnn_insert_grad_axpy(const dnn_task_opts *o, starpu_data_handle_t dst, float alpha, starpu_data_handle_t src);

/* dst += src (cl_grad_add); dst_mode STARPU_RW or STARPU_RW|STARPU_COMMUTE; o->color honoured. */
int dnn_insert_grad_add(const dnn_task_opts *o, starpu_data_handle_t dst, int dst_mode, starpu_data_handle_t src);
/* dst = src[off .. off + len(dst)) and src[off ..] = whole dst (STARPU_RW on the full vector). */
int dnn_insert_grad_slice_get(const dnn_task_opts *o, starpu_data_handle_t dst, starpu_data_handle_t src, size_t off);
int dnn_insert_grad_slice_put(const dnn_task_opts *o, starpu_data_handle_t dst, starpu_data_handle_t src, size_t off);

#ifdef DNN_HAVE_CUDA
void dnn_grad_zero_cuda(void *buffers[], void *cl_arg);
void dnn_grad_accum_cuda(void *buffers[], void *cl_arg);
void dnn_grad_axpy_cuda(void *buffers[], void *cl_arg);
void dnn_grad_slice_get_cuda(void *buffers[], void *cl_arg);
void dnn_grad_slice_put_cuda(void *buffers[], void *cl_arg);
#endif
#endif
