/* batchsum.h — sums over a batch whose bits do not depend on how the batch is cut into chunks
 * and ranks, nor on the order the pieces are added in.
 *
 * Float addition is not associative, so a float sum over the images of a batch gives other bits
 * when the batch is cut otherwise (1 chunk, 4 chunks, 4 ranks x 4 chunks): the weight gradient
 * then moves by about one rounding, and Winograd F(4x4)'s larger rounding error amplifies that
 * into a trajectory that forks (docs/studies/2026-12-07-f4-default.md). Here each image's
 * contribution, computed alone (so in an order that depends on the image only), is rounded
 * once onto a fixed-point grid of step 2^-DNN_BSUM_FRAC and added as a 128-bit integer: integer
 * addition is associative, so any grouping (per chunk, a tree over chunks, a ring over ranks)
 * gives the same integers, rounded to float once at the end. A float of magnitude at least
 * 2^(23 - DNN_BSUM_FRAC) lands on the grid exactly; smaller ones are truncated toward zero by the
 * same rule wherever they are added. */
#ifndef DNN_BATCHSUM_H
#define DNN_BATCHSUM_H
#include <stddef.h>
#include <stdint.h>

#include "conv2d.h"

/* Grid step 2^-80: exact for |x| >= 2^-57 (6.9e-18); the sum of up to 2^14 terms, each below
 * DNN_BSUM_MAX, stays below 2^46 < 2^47, the int128's range at this step. */
#define DNN_BSUM_FRAC 80
#define DNN_BSUM_MAX 4294967296.0f /* 2^32: a larger |x| (or inf, NaN) is flagged, not added */

typedef __int128 dnn_bsum; /* one element of an exact accumulator, in units of 2^-DNN_BSUM_FRAC */

/* acc (n) += x (n) on the grid. Returns the number of elements not added (|x| >= DNN_BSUM_MAX,
 * inf or NaN): the caller reports them (a diverged run), the sum is then not the batch's. */
size_t dnn_bsum_add_f32(dnn_bsum *acc, const float *x, size_t n);
/* Whether dnn_bsum_add_f32 runs its AVX-512 loop (by default where the CPU has AVX-512 F)
 * rather than the scalar one; the bits are the same. on = 0 forces the scalar loop (tests,
 * measurements). Returns the choice in effect. */
int dnn_bsum_set_simd(int on);
/* acc (n) += b (n): combines two partial sums (chunks, ranks), in any order. */
void dnn_bsum_merge(dnn_bsum *acc, const dnn_bsum *b, size_t n);
/* y (n) = acc (n) rounded to the nearest float (ties to even), once. */
void dnn_bsum_round(float *y, const dnn_bsum *acc, size_t n);

/* The weight gradient of a conv as an exact batch sum: acc (K, C, R, S) += sum over the blocks
 * of `block` consecutive images of x of dw_b, each block's dw_b computed by
 * dnn_conv2d_backward_filter_cpu on that block alone (its floats then depend on the block's
 * images only, not on the chunk around it), in work (K*C*R*S floats). The bits are the same for
 * every cut of a batch into chunks whose sizes are multiples of `block` (the last chunk's last
 * block may be shorter only where the batch itself ends). block = 1: any cut. Returns what
 * dnn_bsum_add_f32 returns, summed over the blocks. */
size_t dnn_conv2d_backward_filter_bsum_cpu(dnn_bsum *acc, const float *x, const float *dy, const dnn_conv2d_args *a,
					   int block, float *work);
#endif
