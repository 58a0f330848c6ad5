/* vec.h — element-wise operations on float vector handles (zero, add, scaled add, slices).
 *
 * They serve whatever is a plain vector: the STARPU_REDUX methods of every summed handle (weight
 * gradients, the cross-rank sums of graph/dist.c, the loss statistics), the parameter server's
 * copies and weight pulls, the ring all-reduce's slices, the async mode's staleness compensation
 * and the add op's inputs beyond the second.
 */
#ifndef DNN_VEC_H
#define DNN_VEC_H
#include <starpu.h>

#include "dnn_codelet.h"
#include <stddef.h>
#include <stdint.h>

/* Plain kernels. */
void dnn_vec_zero_cpu(float *dst, size_t n);                                // dst[n] = 0
void dnn_vec_add_cpu(float *dst, const float *src, size_t n);               // dst[n] += src[n]
void dnn_vec_add_clear_cpu(float *dst, float *src, size_t n);               // dst[n] += src[n]; src[n] = 0
void dnn_vec_add_clear_cpu_d(double *dst, double *src, size_t n);           // the same in double
void dnn_vec_axpy_cpu(float *dst, float alpha, const float *src, size_t n); // dst[n] += alpha*src[n]

extern struct starpu_codelet cl_vec_zero;      // (W dst); also the REDUX init method
extern struct starpu_codelet cl_vec_redux_add; // (RW|COMMUTE dst, R src): the REDUX reduction method
extern struct starpu_codelet cl_vec_add;       // same kernel, modes given at insert time
extern struct starpu_codelet cl_vec_axpy;      // (RW dst, R src), cl_arg a float alpha: dst += alpha*src
/* Slices of a vector, for the ring all-reduce and the gradient buckets (graph/dist.c). cl_arg: a
 * size_t offset (in elements); the slice's length is the chunk's. */
extern struct starpu_codelet cl_vec_slice_get; // (W chunk, R full): chunk[i] = full[off + i]
extern struct starpu_codelet cl_vec_slice_put; // (RW|COMMUTE full, R chunk): full[off + i] = chunk[i]; disjoint puts commute
/* The fixed-order sums over chunks (graph/chunksum.h): (RW dst, RW src): dst += src, then src = 0,
 * float or double vectors (the element size of the handles), element by element, so the result
 * is the same on a CPU and a GPU worker. src is left zeroed for its next accumulation. */
extern struct starpu_codelet cl_vec_add_clear;

/* Gradients on the wire in bf16 (--grad-precision bf16, graph/allreduce/): a message is a vector of n uint16_t
 * (bf16 bits, round to nearest even as codelets/gemm_bf16.h dnn_f32_to_bf16, NaN stays NaN), every sum stays
 * fp32. The pack rounds its source in place too, so that a rank keeps exactly the value it sent: the ring's and
 * rhd's chunk owners and the tree's and server's root then hold the same bits as the ranks they send the sum to. */
void dnn_vec_to_bf16_cpu(uint16_t *dst, float *src, size_t n);         // dst[n] = bf16(src[n]); src[n] = dst[n]
void dnn_vec_from_bf16_cpu(float *dst, const uint16_t *src, size_t n); // dst[n] = src[n] (exact)
void dnn_vec_add_bf16_cpu(float *dst, const uint16_t *src, size_t n);  // dst[n] += src[n] (fp32 add)
/* 1: dnn_vec_to_bf16_cpu runs its AVX-512F loop (the default where the CPU has AVX-512F), 0: the scalar one;
 * the same bits either way (tests/unit_grad_bf16.c). Returns the choice. */
int dnn_vec_bf16_set_simd(int on);
extern struct starpu_codelet cl_vec_to_bf16;   // (W msg bf16, RW src f32): msg = bf16(src), src = msg
extern struct starpu_codelet cl_vec_from_bf16; // (W dst f32, R msg bf16): dst = msg
extern struct starpu_codelet cl_vec_add_bf16;  // (RW dst f32, R msg bf16): dst += msg, in fp32

/* Make h (a float vector handle) a REDUX target whose copies are summed: StarPU gives each
 * worker a private copy zeroed by cl_vec_zero and sums the copies with cl_vec_redux_add. */
void dnn_vec_set_sum_redux(starpu_data_handle_t h);

/* dst = 0 as a task (dst W). */
int dnn_insert_vec_zero(const dnn_task_opts *o, starpu_data_handle_t dst);
/* dst += src as a task (cl_vec_add); dst_mode STARPU_RW, STARPU_RW|STARPU_COMMUTE, STARPU_REDUX
 * or STARPU_MPI_REDUX; o->color honoured. */
int dnn_insert_vec_add(const dnn_task_opts *o, starpu_data_handle_t dst, int dst_mode, starpu_data_handle_t src);
/* dst += src, src = 0 as a task (cl_vec_add_clear; both RW; o->color and o->name honoured). */
int dnn_insert_vec_add_clear(const dnn_task_opts *o, starpu_data_handle_t dst, starpu_data_handle_t src);
/* dst += alpha * src as a task (dst RW). */
int dnn_insert_vec_axpy(const dnn_task_opts *o, starpu_data_handle_t dst, float alpha, starpu_data_handle_t src);
/* dst = src[off .. off + len(dst)) and src[off ..] = whole dst (STARPU_RW on the full vector). */
int dnn_insert_vec_slice_get(const dnn_task_opts *o, starpu_data_handle_t dst, starpu_data_handle_t src, size_t off);
int dnn_insert_vec_slice_put(const dnn_task_opts *o, starpu_data_handle_t dst, starpu_data_handle_t src, size_t off);
/* The bf16 wire's tasks (o->name honoured): msg = bf16(src) and src rounded in place; dst = msg; dst += msg. */
int dnn_insert_vec_to_bf16(const dnn_task_opts *o, starpu_data_handle_t msg, starpu_data_handle_t src);
int dnn_insert_vec_from_bf16(const dnn_task_opts *o, starpu_data_handle_t dst, starpu_data_handle_t msg);
int dnn_insert_vec_add_bf16(const dnn_task_opts *o, starpu_data_handle_t dst, starpu_data_handle_t msg);

#ifdef DNN_HAVE_CUDA
void dnn_vec_zero_cuda(void *buffers[], void *cl_arg);
void dnn_vec_add_cuda(void *buffers[], void *cl_arg);
void dnn_vec_add_clear_cuda(void *buffers[], void *cl_arg);
void dnn_vec_axpy_cuda(void *buffers[], void *cl_arg);
void dnn_vec_slice_get_cuda(void *buffers[], void *cl_arg);
void dnn_vec_slice_put_cuda(void *buffers[], void *cl_arg);
void dnn_vec_to_bf16_cuda(void *buffers[], void *cl_arg);
void dnn_vec_from_bf16_cuda(void *buffers[], void *cl_arg);
void dnn_vec_add_bf16_cuda(void *buffers[], void *cl_arg);
#endif
#endif
