/* conv2d_algo.c — the CPU conv kernels of conv2d.h: which algorithm runs each pass.
 *
 * Forward: Winograd F(2x2, 3x3) or F(4x4, 3x3) (conv2d_winograd_f2.c, _f4.c) where the algorithm choice allows it, else
 * the direct AVX-512 kernels of 1x1 convs (conv2d_pointwise.c) and of 3x3 stride-2 convs (conv2d_stride2.c) under
 * POINTWISE_RULE and STRIDE2_RULE (all three passes), else the direct AVX2 path (conv2d_direct.c) for stride-1 convs
 * with few channels, else im2col + GEMM (conv2d_im2col.c). Backward data of a stride-1 conv with enough channels runs
 * as the
 * forward conv of dy with the flipped kernel (so through the same choice); other backward data
 * and the weight gradient run im2col, or Winograd for the weight gradient under its own rule. Under --precision bf16,
 * oneDNN's convolution primitives (conv2d_onednn.c) take a pass first where ONEDNN_CONV_RULE says.
 * The scratch every kernel needs is the worker's (dnn_cpu_scratch); when it cannot be
 * allocated the kernel records a worker error and returns.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conv2d_bnfuse.h"
#include "conv2d_impl.h"
#include "conv2d_winograd.h"
#include "dnn_codelet.h"
#include "gemm_bf16.h"

/* Backward data of a stride-1 conv runs as a forward conv from this many input channels on. */
#define CONV_FLIP_MIN_C 16

float *dnn_conv_scratch(size_t nfloats)
{
	float *p = dnn_cpu_scratch(nfloats ? nfloats : 1);
	if (!p)
		dnn_worker_error("conv2d: out of memory for %zu floats of scratch", nfloats);
	return p;
}

/* ------------------------------------------------------------------ Winograd dispatch
 *
 * 3x3, stride-1, undilated convs may run as Winograd F(2x2, 3x3) or F(4x4, 3x3)
 * (codelets/conv2d_winograd_f2.c, conv2d_winograd_f4.c): forward, and backward data through its
 * forward conv with the flipped kernel; the weight gradient only as F(2x2, 3x3). Which one runs is
 * the conv's dnn_conv2d_args.algo (the plan sets it from DNN_CONV_ALGO: im2col, winograd,
 * winograd4 or auto, graph/exec_config.h), else auto: WINO_RULE, then WINO4_RULE below. */
/* Auto rule, from forward-pass timings of 16 images, one core, im2col time / Winograd time
 * (same run, best of 15-40 calls, thread CPU clock; the ratios moved by ~10% between runs):
 *   ResNet stages  C16 32x32 K16: 2.0   C32 16x16 K32: 1.9   C64 8x8 K64: 1.4 (backward data
 *                  1.9, 2.2, 1.3);
 *   other shapes   C8 K16 32x32: 1.5   C16 K8: 1.4   C16 16x16 K16: 1.8   C64 K4 32x32: 2.0
 *                  C8 K64: 1.2   C64 2x2 K64: 1.07   C128 4x4 K128: 1.15   C128 8x8/16x16 K128:
 *                  1.3/1.6   C64 8x8 K256: 1.4;
 *   not faster     C3/C4 32x32 K64: 0.9-1.1   C256 8x8 K256: 1.07   and where the direct path
 *                  runs (C*K <= 128, e.g. C8 K8 16x16: 0.85, the C3 K16 stem: 1.08).
 * So: Winograd from 8 to 128 input channels, unless the direct path takes the conv. */
#define WINO_RULE(g) (!dnn_conv_direct_applies(g) && (g)->C >= 8 && (g)->C <= 128)

/* The weight gradient has its own rule (16 images, same method): C16 32x32 K16: 1.66
 * C32 16x16 K32: 1.34-1.46  C64 8x8 K64: 1.1-1.2  C8 32x32 K16: 1.39  C8 16x16 K8: 1.44-1.67
 * C128 8x8 K64: 1.12  C3 32x32 K16 (the CIFAR stem): 1.23-1.29; but C64 8x8 K128 0.91,
 * C64 16x16 K128 0.94, C128 8x8 K128 0.96, C3 32x32 K64 0.88-0.95, C1 28x28 K8 0.70-0.83.
 * So: 3 <= C <= 128, K <= 64 and K <= 8 C. */
#define WINO_FILTER_RULE(g) ((g)->C >= 3 && (g)->C <= 128 && (g)->K <= 64 && (g)->K <= 8 * (g)->C)
/* Under --precision bf16 the weight gradient's Winograd GEMMs run on vdpbf16ps over tile pairs
 * (conv2d_winograd_f2.c), im2col's on oneDNN's bf16 brgemm. dnn_op_bench bwd_filter, 64 images, one core, ms,
 * Winograd bf16 / im2col bf16 (docs/studies/2026-12-07-wgrad-bf16.md, 5 rounds, load 9.5-9.9): C3 32x32 K16
 * 0.40 / 0.49   C16 32x32 K16 1.25 / 1.99   C16 28x28 K16 1.01 / 1.58   C32 16x16 K32 0.95 / 1.41   C32 14x14
 * K32 0.98 / 1.16   C64 8x8 K64 1.02 / 1.32   C64 7x7 K64 0.99 / 1.13 (before that kernel, with rounded operands
 * on the fp32 loops: Winograd only from 8 to 16 channels). Not measured in bf16 past 64 channels. So in bf16:
 * WINO_FILTER_RULE up to 64 input channels. */
#define WINO_FILTER_BF16_RULE(g) (WINO_FILTER_RULE(g) && (g)->C <= 64)

/* Where F(4x4, 3x3) replaces F(2x2, 3x3) under auto (among WINO_RULE's convs). Forward, 16
 * images, one core, F(2x2) time / F(4x4) time, in a harness that alternates im2col, F(2x2) and
 * F(4x4) call by call (best of 12-20 calls each, thread CPU clock; Intel Xeon model 167 under
 * a load average of 4-16 from other sessions: +-10%):
 *   wide images (8 tiles a row and more)  C16 32x32 K16 0.99-1.11 (backward data 1.08)
 *           C32 32x32 K16 1.09   C16 32x32 K32 1.24   C32 32x32 K32 1.20   C64 32x32 K64 1.17
 *           C8 32x32 K64 1.23   C128 32x32 K128 1.48   C16 64x64 K16 1.31;
 *   row groups (1 to 4 tiles a row, codelets/conv2d_winograd_f4.c)  C32 16x16 K32 1.20 (backward
 *           data 1.02)   C16 16x16 K16 1.44   C32 16x16 K16 1.23   C64 8x8 K64 1.26 (1.18)
 *           C128 8x8 K128 1.19   C64 8x8 K256 1.15   C16 4x4 K64 1.49   C128 4x4 K128 1.03
 *           C64 4x4 K64 1.22; with partial tiles (ResNet-8's 14x14 and 7x7): C32 14x14 K32 1.28
 *           (1.31)   C16 14x14 K16 1.32   C64 7x7 K64 1.33 (1.32)   but 2x2 outputs: C64 2x2
 *           K64 0.83, C128 2x2 K128 0.65;
 *   strips (5 to 7 tiles a row; 3 with 9-12 columns)  C16 28x28 K16 1.12-1.19   C32 28x28 K32
 *           1.85   C16 24x24 K16 0.96-1.05   C32 12x12 K32 1.17   C32 10x10 K32 1.02   but
 *           C16 20x20 K16 0.83 (5 tiles a row: 1 slot in 6 wasted);
 *   few output channels: C16 32x32 K8 0.86-0.96, C64 32x32 K4 0.76, C64 16x16 K4 0.75.
 * So: 16 output channels and more, on images of 4 columns and more but not 17 to 20. */
#define WINO4_RULE(g) ((g)->K >= 16 && (g)->Q >= 4 && ((g)->Q <= 16 || (g)->Q >= 21))
/* Outside WINO_RULE, against what auto ran before (the direct path or im2col), same method:
 * the RGB stem C3 32x32 K16: 1.40 (dnn_op_bench: 0.26-0.29 -> 0.155-0.165 ms), C3 K32: 1.25,
 * C3 K64: 1.10; but C4 32x32 K64 0.88, C1 32x32 K16 0.60, C8 32x32 K8 1.04. So also: C = 3
 * with 16 to 32 output channels on images of 32 columns and more. */
#define WINO4_STEM_RULE(g) ((g)->C == 3 && (g)->K >= 16 && (g)->K <= 32 && (g)->Q >= 32)
/* auto takes F(4x4) by the two rules above only when this is 1 (use_winograd says why it is 0,
 * and what it would take). A build can set it (-DWINO4_ENABLED_IN_AUTO=1 in CMAKE_C_FLAGS) to
 * measure the step time auto would give with it (bench/f4_default.sh). */
#ifndef WINO4_ENABLED_IN_AUTO
#define WINO4_ENABLED_IN_AUTO 0
#endif

/* ------------------------------------------------------------------ direct 1x1 and stride-2 dispatch
 *
 * 1x1 unpadded convs of stride 1 or 2 and 3x3 stride-2 convs with padding 1 run the direct AVX-512 kernels of
 * conv2d_pointwise.c and conv2d_stride2.c (forward, backward data, backward filter) unless the algorithm is
 * DNN_CONV_ALGO=im2col, which keeps the GEMMs of conv2d_im2col.c (side-by-side measurements). */
/* Rules per pass (0 forward, 1 backward data, 2 backward filter), from dnn_op_bench --op conv2d --batch 64 --clock cpu
 * --reps 20 --conv-algo im2col,auto (one core, the two algorithms timed one after the other per shape and pass, at
 * the measured priority; AMD EPYC Zen 5 under a load average of 15 from other sessions, 2 rounds: +-5%), im2col
 * time / direct time:
 *   3x3 stride 2  C16 32x32 K32: fwd 1.56  bwd data 1.75-1.87  filter 1.09
 *                 C16 28x28 K32: fwd 1.55  bwd data 1.81        filter 1.20      (ResNet-8)
 *                 C32 16x16 K64: fwd 1.18  bwd data 1.15        filter 0.85
 *                 C32 14x14 K64: fwd 1.22  bwd data 1.26        filter 0.93      (ResNet-8)
 *   1x1 stride 2  C16 32x32 K32: fwd 1.10  bwd data 1.16        filter 0.93
 *                 C16 28x28 K32: fwd 1.03  bwd data 1.15        filter 1.00
 *                 C32 16x16 K64: fwd 0.83  bwd data 1.08        filter 0.94
 *                 C32 14x14 K64: fwd 0.75  bwd data 1.17        filter 0.89
 * The 3x3 stride-2 weight gradient has since become outer products over the output pixels only, without lane
 * reductions (conv2d_stride2.c; it had computed on the forward's (P + 1) x (Q + 1) grid and lost from 32 input
 * channels on, 0.85-0.93): im2col time / direct time, batch 16, thread CPU time, best of 30, one core, two rounds
 * (AMD EPYC Zen 5, load 3-6; docs/studies/2026-12-07-resnet8-fp32b.md): C16 32x32 K32 1.54, C32 16x16 K64 1.57,
 * C16 28x28 K32 1.66, C32 14x14 K64 1.70-1.72. The backward data became outer products too (2 rows x 4 column pairs
 * a tile; docs/studies/2026-12-07-s2bwd.md): phase-grid time / tile time, batch 16, same clock, load 5-6: C16 32x32
 * K32 1.04-1.12, C32 16x16 K64 1.55, C16 28x28 K32 1.27, C32 14x14 K64 1.40. The 1x1 forward loses where OpenBLAS's
 * sgemm has 32 input channels to amortise its packing. So: 3x3 stride 2 in every pass; 1x1 stride 2 for backward
 * data, and forward with at most 16 input channels. 1x1 stride 1 (no ResNet here has one) was not measured: it stays
 * with sgemm. */
#define STRIDE2_RULE(g, pass) ((void)(g), (void)(pass), 1)
#define POINTWISE_RULE(g, pass) ((g)->stride == 2 && ((pass) == 1 || ((pass) == 0 && (g)->C <= 16)))

/* fp32 only: under --precision bf16 these convs keep the paths that round their operands (im2col's bf16 GEMMs);
 * a bf16 form of these kernels replaces their loops, dnn_conv_taps_gemm, dnn_conv_taps_dot and conv2d_stride2.c's
 * s2f_block, s2d_tile and s2w_block. So they never see a bf16 y (which needs bf16); a bf16 form would round its output
 * blocks as conv2d_direct.c does. */
static int use_pointwise(const conv_geom *g, int pass)
{
	return g->algo != DNN_CONV_ALGO_IM2COL && !g->bf16 && !g->y_bf16 && dnn_conv_pointwise_applies(g) &&
	       POINTWISE_RULE(g, pass);
}

static int use_stride2(const conv_geom *g, int pass)
{
	return g->algo != DNN_CONV_ALGO_IM2COL && !g->bf16 && !g->y_bf16 && dnn_conv_stride2_applies(g) &&
	       STRIDE2_RULE(g, pass);
}

/* ------------------------------------------------------------------ oneDNN's bf16 convolution primitives
 *
 * Under --precision bf16, conv2d_onednn.c runs a pass through oneDNN's convolution primitive (with its reorders of
 * the fp32 NCHW tensors) where DNN_CONV_ALGO=onednn forces it, or under auto where ONEDNN_CONV_RULE(g, pass)
 * (0 forward, 1 backward data, 2 weight gradient) says it is faster than the path auto takes otherwise. */
/* Rule per pass, from dnn_op_bench --op conv2d --clock cpu --conv-algo auto,onednn --precision fp32,bf16 at 64 and 16
 * images (a chunk of ResNet-20's batch 64 over 2 workers), one core, 2-3 rounds (the ratios moved by <= 0.05 between
 * rounds; AMD EPYC Zen 5 under a load average of 5-6 from other sessions; docs/studies/2026-12-07-onednn-conv.md),
 * time of what auto ran before in bf16 / oneDNN's conv time (its reorders included), N64 and N16:
 *   3x3 stride 2  C16 32x32 K32: fwd 1.37 1.38  bwd data 1.43 1.41  filter 0.87 0.87
 *                 C32 16x16 K64: fwd 1.68 1.66  bwd data 1.77 1.76  filter 0.97 0.99
 *                 C16 28x28 K32: fwd 1.56 1.47  bwd data 1.99 2.00  filter 0.99 0.98   (ResNet-8)
 *                 C32 14x14 K64: fwd 2.02 1.96  bwd data 2.09 2.00  filter 1.00 1.00   (ResNet-8)
 *   3x3 stride 1  C16 32x32 K16: fwd 0.70 0.78  bwd data 0.76 0.77  filter 1.29 1.27
 *                 C32 16x16 K32: fwd 1.08 1.12  bwd data 1.08 1.13  filter 1.16 1.15
 *                 C64 8x8 K64:   fwd 1.37 1.56  bwd data 1.34 1.56  filter 1.14 1.14
 *                 C16 28x28 K16: fwd 1.33 1.31  bwd data 1.28 1.34  filter 1.46 1.45   (ResNet-8)
 *                 C32 14x14 K32: fwd 1.49 1.57  bwd data 1.48 1.58  filter 1.27 1.25   (ResNet-8)
 *                 C64 7x7 K64:   fwd 1.93 2.13  bwd data 1.54 1.78  filter 1.10 1.15   (ResNet-8)
 *                 C3 32x32 K16 (the RGB stem): 0.54-0.85 in every pass
 *   1x1 stride 2  0.28-1.00 in every pass and shape (the reorders of x and dy cost more than the GEMMs)
 *   5x5           C6 14x14 K16 (LeNet-5's C3): fwd 1.95 1.89  bwd data 1.30 1.29  filter 2.16 1.94; C1 28x28 K6 (its
 *                 stem): 0.21-0.51
 * The 32x32 stage's forward and backward data lose where its 4 MB activations' reorders (fp32 NCHW -> bf16 blocked)
 * cost more than our Winograd's vdpbf16ps kernel saves (docs/studies/2026-12-07-conv-bf16.md, section 1 (b)). So:
 * 3x3 stride 2 forward and backward data; 3x3 stride 1 from 16 channels, its forward and backward data only from 32
 * channels or on images of at most 28 columns; 5x5 from 6 channels; undilated only (dilated convs not measured).
 * Re-measured once the vdpbf16ps Winograd weight gradient and the fp32 Winograd split/output changes were merged
 * (the same command at 32 images, auto,winograd,onednn, best of 5, load 4.4-5.9; ms, Winograd / oneDNN):
 *   3x3 stride 1 weight gradient: C16 32x32 0.424/0.754, C32 16x16 0.364/0.553, C64 8x8 0.408/0.502,
 *                 C16 28x28 0.318/0.556, C32 14x14 0.374/0.440, C64 7x7 0.408/0.433: Winograd everywhere it applies
 *                 in bf16 (WINO_FILTER_BF16_RULE, up to 64 channels), so oneDNN only above 64 channels;
 *   forward / backward data: C32 16x16 0.350/0.385 and 0.350/0.385 (Winograd), C64 8x8 0.356/0.344 and
 *                 0.360/0.361 (tie), C16 28x28 0.415/0.409 and 0.416/0.409 (tie), C32 14x14 0.349/0.314 and
 *                 0.354/0.314, C64 7x7 0.356/0.246 and 0.362/0.311 (oneDNN): oneDNN on images of at most 14
 *                 columns.
 * Re-measured with F(2x2)'s bf16 input side and its 32-tile transforms (docs/studies/2026-12-07-winotrans-bf16.md):
 * dnn_op_bench (warm inputs) then has Winograd's forward ahead at 14x14 (0.94 of oneDNN's time) and 8x8 (0.91), but
 * with the inputs cold as in a step (its rule_harness.c, 3 x 9 rounds, load 4.1) oneDNN stays ahead there (Winograd /
 * oneDNN 1.12-1.15 at 14x14, 1.02-1.03 at 8x8), and a step with those forwards on Winograd ran its conv forward
 * 2.5-3% slower: the rule stays. */
#define ONEDNN_CONV_RULE(g, pass)                                                                                      \
	((g)->dil == 1 && (g)->R == (g)->S &&                                                                          \
	 (((g)->R == 3 && (g)->stride == 2 && (pass) != 2) ||                                                          \
	  ((g)->R == 3 && (g)->stride == 1 && (g)->C >= 16 && ((pass) == 2 ? (g)->C > 64 : (g)->W <= 14)) ||          \
	  ((g)->R == 5 && (g)->stride == 1 && (g)->C >= 6)))

/* A build can set it to 0 (-DONEDNN_CONV_IN_AUTO=0 in CMAKE_C_FLAGS) to measure the step without the rule
 * (bench/onednn_conv_ab.sh); DNN_CONV_ALGO=onednn still forces it. */
#ifndef ONEDNN_CONV_IN_AUTO
#define ONEDNN_CONV_IN_AUTO 1
#endif

static int use_onednn(const conv_geom *g, int pass)
{
	return (g->algo == DNN_CONV_ALGO_ONEDNN ||
		(ONEDNN_CONV_IN_AUTO && g->algo == DNN_CONV_ALGO_AUTO && ONEDNN_CONV_RULE(g, pass))) &&
	       dnn_conv_onednn_applies(g);
}

static dnn_wino_shape wino_shape(const conv_geom *g)
{
	dnn_wino_shape s = {.N = g->N, .C = g->C, .H = g->H, .W = g->W, .K = g->K, .P = g->P,
			    .Q = g->Q, .pad_h = g->pad_h, .pad_w = g->pad_w, .bf16 = g->bf16, .x_bf16 = g->x_bf16,
			    .y_bf16 = g->y_bf16, .bias = g->ybias};
	return s;
}

/* The Winograd output tile (2 or 4) the conv runs with, 0 for none, given the auto rule's
 * verdict for it (rule: 0, 2 or 4); tile4: whether a forced Winograd4 applies to this pass. */
static int winograd_choice(const conv_geom *g, int rule, int tile4)
{
	if (!(g->R == 3 && g->S == 3 && g->stride == 1 && g->dil == 1 && g->pad_h >= 0 &&
	      g->pad_w >= 0 && dnn_wino_supported()))
		return 0;
	switch ((dnn_conv_algo)g->algo) {
	case DNN_CONV_ALGO_IM2COL:
		return 0;
	case DNN_CONV_ALGO_WINOGRAD:
		return 2;
	case DNN_CONV_ALGO_WINOGRAD4:
		return tile4 ? 4 : 2;
	default:
		return rule;
	}
}

/* Forward (and backward data through it): 0, 2 or 4. */
static int use_winograd(const conv_geom *g)
{
	/* auto does not take F(4x4) (WINO4_RULE, WINO4_STEM_RULE: where it pays): with it, resnet8
	 * with global batch norm over 4 ranks x 4 chunks leaves one process with 1 chunk by 3.58e-5
	 * on the parameters, 3.05e-5 on the loss after 20 steps (mpi_bn_global's bound: 1e-5;
	 * F(2x2): 7.1e-8, 4.2e-7). Not because an image's F(4x4) result depends on the chunks: it
	 * does not, bit for bit (tests/unit_wino_invariance.c). What differs between chunkings is
	 * the float summation order of the sums over the batch, the weight gradient's above all
	 * (2.3e-10 on the parameters after one step, with any algorithm). F(4x4)'s larger rounding
	 * error (5-10x F(2x2)'s) turns such a perturbation of the weights into larger output
	 * differences (one weight moved by 1 ulp moves C16..64 outputs by 1.3-2.1e-8 rms relative,
	 * F(2x2) 0.24-1e-8, im2col 0.09-0.4e-8), and the 20-step trajectory forks sooner (jumps at
	 * isolated steps, as tests/scripts/bnlib.sh describes at larger learning rates): in one
	 * process, K = 2, 3, 4, 8, 16 chunks against 1, F(4x4) 5.2-6.6e-6 every time, F(2x2)
	 * 5.8e-8 at K = 2, 4, 8 but 1.7e-6 at 3 and 1.0e-6 at 16. Taking it needs sums over the
	 * batch that do not depend on the cut, or a test less sensitive to the trajectory: such
	 * sums exist for the weight gradient (batchsum.h, 1.0-2.1x its cost), but on an AMD Zen 5
	 * F(4x4) by these rules gave no step gain to pay for them (0.91-1.07x;
	 * docs/studies/2026-12-07-f4-default.md). DNN_CONV_ALGO=winograd4 forces F(4x4). */
	const int rule = WINO_RULE(g) ? (WINO4_ENABLED_IN_AUTO && WINO4_RULE(g) ? 4 : 2)
			 : (WINO4_ENABLED_IN_AUTO && WINO4_STEM_RULE(g)) ? 4
									 : 0;
	return winograd_choice(g, rule, 1);
}

/* The weight gradient has only F(2x2, 3x3): 0 or 2. */
static int use_winograd_filter(const conv_geom *g)
{
	return winograd_choice(g, (g->bf16 ? WINO_FILTER_BF16_RULE(g) : WINO_FILTER_RULE(g)) ? 2 : 0, 0);
}

/* Floats of scratch that conv_forward needs. */
static size_t forward_work(const conv_geom *g)
{
	const int tile = use_winograd(g);
	if (tile) {
		dnn_wino_shape s = wino_shape(g);
		return tile == 4 ? dnn_wino4_work(&s) : dnn_wino_work(&s);
	}
	if (use_pointwise(g, 0))
		return dnn_conv_pointwise_work(g);
	if (use_stride2(g, 0))
		return dnn_conv_stride2_work(g);
	if (dnn_conv_direct_applies(g))
		return dnn_conv_direct_work(g);
	return dnn_conv_im2col_forward_work(g);
}

/* A bf16 x (g->x_bf16, a stored activation): oneDNN's reorder (conv2d_onednn.c), im2col's padded copy (not a 1x1
 * conv's, which has none) and F(2x2)'s AVX-512 image split (dnn_wino_reads_bf16) read it as it is (as_is: the path
 * is one of these); for the other paths it is widened here into the worker's second scratch (the kernels take the
 * first), and g then says fp32. Returns x as the path reads it; NULL, with a worker error, without memory. */
static const float *x_for_path(const float *x, conv_geom *g, int as_is)
{
	if (!g->x_bf16 || as_is)
		return x;
	const size_t n = (size_t)g->N * g->C * g->H * g->W;
	float *xw = dnn_cpu_scratch_aux(n);
	if (!xw) {
		dnn_worker_error("conv2d: out of memory widening a bf16 input of %zu elements", n);
		return NULL;
	}
	dnn_bf16_widen(xw, (const uint16_t *)x, n);
	g->x_bf16 = 0;
	return xw;
}

/* y = conv(x, w) (beta = 0) or y += conv(x, w) (beta = 1); work: forward_work(g) floats. With a
 * bias (or NULL), the direct path also adds it in its store: returns 1 when the bias was added (or nothing can be
 * done: the error is recorded). x: bf16 values when g->x_bf16. A bf16 y (g->y_bf16, beta 0): every path here
 * rounds its own output blocks, the bias g->ybias added first (returns 1). */
static int conv_forward(float *y, const float *x, const float *w, const float *bias, const conv_geom *gx,
			float beta, float *work)
{
	conv_geom gl = *gx;
	const conv_geom *g = &gl;
	const int tile = use_winograd(g);
	const dnn_wino_shape s0 = wino_shape(g);
	const int im2col = !tile && !use_pointwise(g, 0) && !use_stride2(g, 0) && !dnn_conv_direct_applies(g);
	if (!(x = x_for_path(x, &gl, (im2col && !conv_is_pointwise(g)) || (tile == 2 && dnn_wino_reads_bf16(&s0)))))
		return 1;
	if (tile) {
		dnn_wino_shape s = wino_shape(g);
		(tile == 4 ? dnn_wino4_forward : dnn_wino_forward)(y, x, w, &s, beta, work);
		return g->y_bf16;
	} else if (use_pointwise(g, 0)) {
		dnn_conv_pointwise_forward(y, x, w, g, beta, work);
	} else if (use_stride2(g, 0)) {
		dnn_conv_stride2_forward(y, x, w, g, beta, work);
	} else if (dnn_conv_direct_applies(g)) {
		dnn_conv_direct_forward(y, x, w, bias, g, beta, work);
		return bias != NULL;
	} else {
		dnn_conv_im2col_forward(y, x, w, g, beta, work);
		return g->y_bf16;
	}
	return 0;
}

int dnn_conv2d_forward_bias_cpu(float *y, const float *x, const float *w, const float *bias, const dnn_conv2d_args *a)
{
	conv_geom g = conv_geom_of(a);
	if (g.y_bf16) /* the paths add it before they round */
		g.ybias = bias;
	if (use_onednn(&g, 0) && dnn_conv_onednn_forward(y, x, w, &g, 0.0f) == 0) /* reads a bf16 x as it is */
		return g.y_bf16; /* fp32 y: the caller adds the bias */
	float *work = dnn_conv_scratch(forward_work(&g));
	return work ? conv_forward(y, x, w, bias, &g, 0.0f, work) : 1; /* no scratch: the error is recorded */
}

void dnn_conv2d_forward_cpu(float *y, const float *x, const float *w, const dnn_conv2d_args *a)
{
	dnn_conv2d_forward_bias_cpu(y, x, w, NULL, a);
}

/* Batch norm + relu applied in the F(2x2) input copy (conv2d_bnfuse.h): 0 when this pass does not run as
 * F(2x2) here (the caller then normalises the input itself). */
int dnn_conv2d_forward_bnin_cpu(float *y, const float *x, const float *w, const float *bn_in, float *bn_row,
				const dnn_conv2d_args *a)
{
	conv_geom g = conv_geom_of(a);
	if (use_onednn(&g, 0) || use_winograd(&g) != 2)
		return 0;
	dnn_wino_shape s = wino_shape(&g);
	s.bn_in = bn_in, s.bn_row = bn_row;
	float *work = dnn_conv_scratch(dnn_wino_work(&s));
	if (work) /* else the error is recorded */
		dnn_wino_forward(y, x, w, &s, 0.0f, work);
	return 1;
}

int dnn_conv2d_backward_filter_bnin_cpu(float *dw, const float *x, const float *dy, const float *bn_in, float *bn_row,
					const dnn_conv2d_args *a)
{
	conv_geom g = conv_geom_of(a);
	if (use_onednn(&g, 2) || !use_winograd_filter(&g))
		return 0;
	dnn_wino_shape s = wino_shape(&g);
	s.bn_in = bn_in, s.bn_row = bn_row;
	float *work = dnn_conv_scratch(dnn_wino_filter_work(&s));
	if (work)
		dnn_wino_backward_filter(dw, x, dy, &s, work);
	return 1;
}

/* Backward data of a stride-1 conv as a forward conv: dx = conv(dy, w'), w' (C, K, R, S) the
 * flipped transpose of w, padding dilation*(R-1) - pad. Its GEMM has K*R*S as inner dimension
 * instead of K, which OpenBLAS runs much faster when K is small, and it needs no col2im; but it
 * has only C rows, hence the CONV_FLIP_MIN_C bound. */
static conv_geom flipped_geom(const conv_geom *g)
{
	conv_geom t = {.N = g->N, .C = g->K, .H = g->P, .W = g->Q, .K = g->C, .R = g->R, .S = g->S,
		       .P = g->H, .Q = g->W, .stride = 1, .dil = g->dil,
		       .pad_h = g->dil * (g->R - 1) - g->pad_h, .pad_w = g->dil * (g->S - 1) - g->pad_w,
		       .algo = g->algo, .bf16 = g->bf16};
	return t;
}

static int bwd_data_as_forward(const conv_geom *g)
{
	return g->stride == 1 && g->R * g->S > 1 && g->C >= CONV_FLIP_MIN_C;
}

int dnn_conv2d_cpu_winograd_tile(const dnn_conv2d_args *a, int pass)
{
	conv_geom g = conv_geom_of(a);
	if (use_onednn(&g, pass))
		return 0;
	if (pass != 1)
		return pass == 0 ? use_winograd(&g) : use_winograd_filter(&g);
	if (conv_is_pointwise(&g) || !bwd_data_as_forward(&g))
		return 0;
	conv_geom t = flipped_geom(&g);
	return use_winograd(&t);
}

int dnn_conv2d_cpu_uses_onednn(const dnn_conv2d_args *a, int pass)
{
	conv_geom g = conv_geom_of(a);
	return use_onednn(&g, pass);
}

int dnn_conv2d_cpu_uses_winograd(const dnn_conv2d_args *a, int pass)
{
	return dnn_conv2d_cpu_winograd_tile(a, pass) != 0;
}

static void conv_backward_data_flipped(float *dx, const float *dy, const float *w,
				       const conv_geom *g, float beta)
{
	conv_geom t = flipped_geom(g);
	const int RS = g->R * g->S;
	size_t nw = (size_t)g->K * g->C * RS;
	float *wf = dnn_conv_scratch(nw + forward_work(&t)); // (C, K, R, S), then the forward's work
	if (!wf)
		return;
	for (int k = 0; k < g->K; k++)
		for (int c = 0; c < g->C; c++)
			for (int i = 0; i < RS; i++)
				wf[((size_t)c * g->K + k) * RS + (RS - 1 - i)] = w[((size_t)k * g->C + c) * RS + i];
	conv_forward(dx, dy, wf, NULL, &t, beta, wf + nw);
}

void dnn_conv2d_backward_data_cpu(float *dx, const float *dy, const float *w, const dnn_conv2d_args *a)
{
	// dx (N, C, H, W), dy (N, K, P, Q), w (K, CRS)
	conv_geom g = conv_geom_of(a);
	if (use_onednn(&g, 1) && dnn_conv_onednn_backward_data(dx, dy, w, &g, a->accumulate_dx) == 0)
		return;
	if (use_pointwise(&g, 1))
		dnn_conv_pointwise_backward_data(dx, dy, w, &g, a->accumulate_dx);
	else if (use_stride2(&g, 1))
		dnn_conv_stride2_backward_data(dx, dy, w, &g, a->accumulate_dx);
	else if (!conv_is_pointwise(&g) && bwd_data_as_forward(&g))
		conv_backward_data_flipped(dx, dy, w, &g, a->accumulate_dx ? 1.0f : 0.0f);
	else
		dnn_conv_im2col_backward_data(dx, dy, w, &g, a->accumulate_dx);
}

void dnn_conv2d_backward_filter_cpu(float *dw, const float *x, const float *dy, const dnn_conv2d_args *a)
{
	// dw (K, CRS) +=, x (N, C, H, W) (bf16 when a->x_bf16), dy (N, K, P, Q)
	conv_geom g = conv_geom_of(a);
	if (use_onednn(&g, 2) && dnn_conv_onednn_backward_filter(dw, x, dy, &g) == 0) /* reads a bf16 x as it is */
		return;
	const dnn_wino_shape s0 = wino_shape(&g);
	const int wino = use_winograd_filter(&g), im2col = !wino && !use_pointwise(&g, 2) && !use_stride2(&g, 2);
	if (!(x = x_for_path(x, &g, (im2col && !conv_is_pointwise(&g)) || (wino && dnn_wino_reads_bf16(&s0)))))
		return;
	if (use_winograd_filter(&g)) {
		dnn_wino_shape s = wino_shape(&g);
		float *work = dnn_conv_scratch(dnn_wino_filter_work(&s));
		if (work)
			dnn_wino_backward_filter(dw, x, dy, &s, work);
		return;
	}
	if (use_pointwise(&g, 2))
		dnn_conv_pointwise_backward_filter(dw, x, dy, &g);
	else if (use_stride2(&g, 2))
		dnn_conv_stride2_backward_filter(dw, x, dy, &g);
	else
		dnn_conv_im2col_backward_filter(dw, x, dy, &g);
}
