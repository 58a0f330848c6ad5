/* gelu.h — the GELU activation, tanh form (GPT-2's; PyTorch's gelu(approximate='tanh')):
 *
 *   y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
 *   backward: dx (=|+=) dy * gelu'(x)          (the formulas: act_formulas.h)
 *
 * Backward reads x, not y: gelu is not monotonic below x = -0.75, so y does not give x back.
 * y_bf16 (--precision bf16, the plan's bf16 activation storage, graph/model.h y_bf16): the forward
 * writes y in bf16, each fp32 value rounded by dnn_bf16_convert (gemm_bf16.h), the rounding that
 * its reader's bf16 GEMM (the mlp dense) applied to the fp32 y before: the same bf16 values. */
#ifndef DNN_GELU_H
#define DNN_GELU_H
#include <starpu.h>
#include <stddef.h>

#include "dnn_codelet.h"

typedef struct {
	long n;            // elements
	int accumulate_dx; // backward: 0 = dx = ..., 1 = dx += ...
	int y_bf16;        // forward: 1 = y is stored in bf16 (uint16_t); the CUDA functions refuse it
} dnn_gelu_args;

void dnn_gelu_forward_cpu(float *y, const float *x, long n);
/* The same values rounded to bf16 (dnn_bf16_convert): y (n) bf16, x (n). */
void dnn_gelu_forward_bf16_cpu(uint16_t *y, const float *x, long n);
void dnn_gelu_backward_cpu(float *dx, const float *x, const float *dy, long n, int accumulate_dx);
/* The CPU kernels' form: 1 = AVX2 (the sigmoid form, chosen by default where the CPU has AVX2 and
 * FMA; on 16 lanes where it has AVX-512F, the same bits per element), 2 = the same form on 8 lanes
 * only (tests: the two give the same bits), 0 = portable (the shared formulas, libm's tanhf). set
 * returns what is in effect. */
int dnn_gelu_set_simd(int on);
int dnn_gelu_simd(void);
/* The loops in effect, for the result line: "avx512" (16 lanes), "avx2" (8) or "portable". */
const char *dnn_gelu_isa(void);

/* fwd (R x, W y); bwd (R x, R dy, W|RW dx per a->accumulate_dx) */
extern struct starpu_codelet cl_gelu_fwd, cl_gelu_bwd;
int dnn_insert_gelu_fwd(const dnn_task_opts *o, const dnn_gelu_args *a, starpu_data_handle_t x, starpu_data_handle_t y);
int dnn_insert_gelu_bwd(const dnn_task_opts *o, const dnn_gelu_args *a, starpu_data_handle_t x, starpu_data_handle_t dy,
			starpu_data_handle_t dx);

#ifdef DNN_HAVE_CUDA
#ifdef __cplusplus
extern "C" {
#endif
void dnn_gelu_fwd_cuda(void *buffers[], void *cl_arg);
void dnn_gelu_bwd_cuda(void *buffers[], void *cl_arg);
#ifdef __cplusplus
}
#endif
#endif
#endif
