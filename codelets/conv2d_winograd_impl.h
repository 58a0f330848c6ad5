/* conv2d_winograd_impl.h — what the Winograd kernels share (private to codelets/conv2d_winograd*.c):
 * the chunk plan, the scratch layout of the forward pass, the 16 or 36 forward GEMMs of a chunk and
 * the row helpers. conv2d_winograd.c implements them; conv2d_winograd_f2.c holds F(2x2, 3x3)
 * (forward and weight gradient), conv2d_winograd_f4.c F(4x4, 3x3) (forward, one function per
 * layout: tile rows, row groups, strips). */
#ifndef DNN_CONV2D_WINOGRAD_IMPL_H
#define DNN_CONV2D_WINOGRAD_IMPL_H
#include <stddef.h>
#include <stdint.h>

#include "conv2d_winograd.h"
#include "short_copy.h"

/* Floats of V + M per chunk of tiles. */
#define WINO_BUDGET (64 * 1024)
/* The same for F(4x4, 3x3), 4x larger (1 MiB, half this Xeon's L2): its chunks hold 2.25x
 * fewer tiles for the same floats, and on the ResNet shapes (16 images, dnn_op_bench, fwd ms
 * at 64K / 128K / 256K / 512K floats) 16x32x32: 0.45 / 0.41 / 0.44 / 0.53, 32x16x16: 0.68 /
 * 0.47 / 0.39 / 0.39, 64x8x8: 0.54 / 0.52 / 0.41 / 0.42 (loaded machine, +-10%; before the
 * row groups, with 32x16x16 as strips and 64x8x8 one tile row at a time). With the row groups,
 * at 128K / 256K / 512K, twice: 16x32x32 0.42 / 0.43-0.47 / 0.56, 32x16x16 0.28-0.29 / 0.30 /
 * 0.33, 64x8x8 0.35-0.36 / 0.30 / 0.29-0.32; ResNet-20's 21 convs 6.9 / 6.8-7.1 / 7.7-8.0. */
#define WINO4_BUDGET (256 * 1024)
/* Floats of V + D per chunk in the weight gradient: its GEMMs reduce over the tiles, and each
 * register block ends with horizontal sums, so longer chunks pay (they stream from L2/L3). */
#define WINO_FILTER_BUDGET (256 * 1024)
/* A chunk has at least this many tiles (one 24-tile register block). */
#define WINO_MIN_TILES 24

typedef struct {
	int m, nxi;   // output tile m x m (2 or 4), transformed tile (m + 2)^2 positions
	int th, tw;   // tiles per image: ceil(P/m) x ceil(Q/m)
	int hp, l;    // rows of the padded image (m th + 2), entries per phase row (tw + 1)
	size_t eo;    // floats of one image split into its m column phases: m C hp l
	int group;    // images per chunk (> 1 only when an image has fewer tiles than a chunk)
	int rows;     // tile rows per chunk (th when group > 1)
	size_t cap;   // tiles of the largest chunk + 7, rounded up to 8: row stride of V and M
	int twv;      // tw rounded up to 8
	int groups;   // F(4x4) on 4, 8 or 16 columns: vectors of 8 / tw tile rows (row groups)
	size_t eoall; // floats of the split images (groups: of the chunk's) or of the strips
	int strips;   // F(4x4) on other narrow images: the tile rows of a chunk side by side
	int slot;     // tiles per tile row in V: tw, or tw + 1 in strips (one unused slot)
	size_t sl;    // in strips: entries per phase row of the chunk's strips
	int bf16;     // the shape's bf16: the GEMMs' operands rounded to bf16 values (transforms stay fp32)
} wino_plan;

static inline int imin(int a, int b) { return a < b ? a : b; }

/* The chunks of a conv on m x m output tiles (m = 2 or 4) whose V + M (or V + D) stay within
 * `budget` floats, and the layout F(4x4) takes (groups, strips, else tile rows). */
wino_plan dnn_wino_plan_make(const dnn_wino_shape *s, size_t budget, int m);

/* The forward pass's scratch (dnn_wino_work, dnn_wino4_work), cut as plan pl lays it out:
 * U (nxi, K, C), the split image(s) or the strips, V (nxi, C, cap), M (nxi, K, cap), m output rows
 * of outs floats (strips: 4 rows of 4 cap), and in row groups three size_t per tile row of a chunk
 * (segoff, yoff, yrows). vs, ms: floats per xi of V and M; phs: floats per column phase (of the
 * split image, or of the strips). */
typedef struct {
	float *u, *eo, *v, *mm, *outb;
	size_t vs, ms, phs, outs;
	size_t *segoff, *yoff, *yrows;
	uint32_t *ub; // bf16 (s->bf16): U's bf16 values in channel pairs (nxi, K, ceil(C / 2)) (dnn_wino_pack_u)
	float *ystage; // bf16 y (s->y_bf16): a chunk's fp32 outputs (group, K, P, Q), laid out as y from its first image
} wino_bufs;
wino_bufs dnn_wino_bufs(const dnn_wino_shape *s, const wino_plan *pl, float *work);

/* Zero p[a..b): the padding columns of an E or O row (0 to pad + 1 floats), or a whole padding
 * row. Plain stores (short_copy.h), not a masked vector store: AVX2's vmaskmovps to memory is
 * microcoded on AMD Zen (perf on Zen 4 put ~40% of split_image's time on the instructions after
 * those stores; cheap on Intel); not a memset call per span either (as costly as the row copy). */
static inline void zero_span(float *p, int a, int b) { dnn_zero_floats(p + a, b - a); }

/* A bf16 y (s->y_bf16): output rows [r0, r1) of images n0 .. n0 + ng - 1, every channel, from the chunk's fp32
 * outputs in b->ystage (image n0 + g at g K P Q), plus the bias, rounded as dnn_bf16_convert: right after the
 * chunk's output transforms, while they are in cache (not a pass over the whole y). */
void dnn_wino_round_chunk(uint16_t *y, const float *stage, const dnn_wino_shape *s, int n0, int ng, int r0, int r1);

/* Rows rows[0..nrows) (Q floats each) into y0's rows (stride Q): copied, or added (beta != 0). */
void dnn_wino_put_rows(float *y0, size_t Q, float *const *rows, int nrows, float beta);

/* A chunk's GEMMs, M[xi] (K, ntp) = U[xi] (K, C) @ V[xi] (C, ntp) for xi in 0..nxi, after zeroing
 * V's tiles [nt, ntp) (ntp: nt rounded up to 8); AVX-512 GEMMs when avx512 (dnn_wino_avx512); with
 * pl->bf16, U and V rounded to bf16 values first (in place). */
void dnn_wino_gemms(const wino_plan *pl, const wino_bufs *b, int K, int C, int nt, int avx512);
/* dnn_wino_gemms on a V that the input transform wrote as bf16 channel pairs (pl->bf16, vdpbf16ps: V's row j, as
 * uint32 lanes, holds channels 2j and 2j + 1 of each tile, the layout dnn_wino_gemms packs fp32 V into): zeroes the
 * pairs of tiles [nt, ntp), then the same GEMMs, so the same bits as packing the same values. */
void dnn_wino_gemms_vpairs(const wino_plan *pl, const wino_bufs *b, int K, int C, int nt);
/* bf16 (pl->bf16): U's bf16 values packed in channel pairs into b->ub, once per conv after the
 * filter transform, for dnn_wino_gemms' vdpbf16ps kernel. */
void dnn_wino_pack_u(const wino_plan *pl, const wino_bufs *b, int K, int C);
#endif
