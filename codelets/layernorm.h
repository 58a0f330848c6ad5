/* layernorm.h — layer normalisation over the C channels of each row (PyTorch's LayerNorm(C),
 * ONNX's LayerNormalization with axis=-1): a row is one token of a sequence or one sample of a
 * flat C x 1 x 1 input, so a chunk is a rows x C row-major matrix.
 *
 *   mean = sum x / C,  var = sum (x - mean)^2 / C (biased, as PyTorch's),  rstd = 1/sqrt(var + eps)
 *   xhat = (x - mean) * rstd,  y = xhat * gamma + beta
 *   backward, g = dy * gamma:
 *     dx (=|+=) rstd * (g - mean_c(g) - xhat * mean_c(g * xhat))
 *     dgamma += sum over rows of dy * xhat,  dbeta += sum over rows of dy
 *
 * Float rounding: the mean m is a float-lane sum (8 lanes, folded into a double per row), so on
 * rows far from 0 (x ~ 50, spread ~ 1) m alone is off by up to ~1e-6, which the normalised values
 * would carry as a shift of 1e-6 x rstd. The second pass sums d = x - m and d^2 (small terms, so
 * accurately), giving m's rounding dm = mean(d) and var = mean(d^2) - dm^2; then
 * xhat = ((x - m) - dm) * rstd, accurate to a few float roundings whatever the row's offset.
 * Training keeps each row's [m | rstd | dm] in the chunk's saved buffer, [m (rows) | rstd (rows) |
 * dm (rows)], so backward does not sum again. The column sums of dgamma and dbeta run in double
 * over the rows in row order, then are added once into the float gradients.
 *
 * y_bf16 (--precision bf16, the plan's bf16 activation storage, graph/model.h y_bf16): y is
 * written in bf16 (uint16_t), each fp32 value rounded by dnn_bf16_convert (gemm_bf16.h), the
 * rounding its readers' bf16 GEMMs (dense, lm_head) applied to the fp32 y before: they read the
 * same bf16 values. Backward reads x and the saved statistics, never y. */
#ifndef DNN_LAYERNORM_H
#define DNN_LAYERNORM_H
#include <starpu.h>
#include <stddef.h>

#include "dnn_codelet.h"

typedef struct {
	long rows;         // rows normalised: samples x tokens (samples for a flat input)
	int C;             // channels per row
	float eps;         // 1e-5 by default
	int save;          // forward: 1 = write [m | rstd | dm] into the saved buffer (training)
	int accumulate_dx; // backward: 0 = dx = ..., 1 = dx += ...
	int has_dx;        // backward: 0 = the input is the net's (no dx buffer), parameter gradients only
	int y_bf16;        // forward: 1 = y is stored in bf16 (uint16_t); the CUDA functions refuse it
} dnn_layernorm_args;

/* y: float, or uint16_t bf16 values when a->y_bf16; saved (3 rows: [m | rstd | dm]) may be NULL
 * (eval: nothing saved). */
void dnn_layernorm_forward_cpu(void *y, float *saved, const float *x, const float *gamma, const float *beta,
			       const dnn_layernorm_args *a);
/* dx (rows x C, =|+= per a->accumulate_dx; NULL when !a->has_dx), dgamma, dbeta (C, +=).
 * 0, or -1 when the double scratch of 2C could not be had (nothing written then). */
int dnn_layernorm_backward_cpu(float *dx, float *dgamma, float *dbeta, const float *x, const float *gamma,
			       const float *saved, const float *dy, const dnn_layernorm_args *a);
/* 1 (the default): both kernels in AVX-512F registers where the CPU has it, the same bits as 0 (the
 * build's baseline ISA). Returns the choice. For tests. */
int dnn_layernorm_set_simd(int on);

/* fwd (R x, R gamma, R beta, W y[, W saved (3 rows) when a->save])
 * bwd (R x, R gamma, R saved, R dy, grad_mode dgamma, grad_mode dbeta[, W|RW dx when a->has_dx]):
 *   grad_mode is STARPU_RW (a chunk's partial, graph/chunksum.h) or STARPU_REDUX. */
extern struct starpu_codelet cl_layernorm_fwd, cl_layernorm_bwd;
int dnn_insert_layernorm_fwd(const dnn_task_opts *o, const dnn_layernorm_args *a, starpu_data_handle_t x,
			     starpu_data_handle_t gamma, starpu_data_handle_t beta, starpu_data_handle_t y,
			     starpu_data_handle_t saved);
int dnn_insert_layernorm_bwd(const dnn_task_opts *o, const dnn_layernorm_args *a, starpu_data_handle_t x,
			     starpu_data_handle_t gamma, starpu_data_handle_t saved, starpu_data_handle_t dy,
			     starpu_data_handle_t dgamma, starpu_data_handle_t dbeta, int grad_mode,
			     starpu_data_handle_t dx);

#ifdef DNN_HAVE_CUDA
#ifdef __cplusplus
extern "C" {
#endif
void dnn_layernorm_fwd_cuda(void *buffers[], void *cl_arg);
void dnn_layernorm_bwd_cuda(void *buffers[], void *cl_arg);
#ifdef __cplusplus
}
#endif
#endif
#endif
