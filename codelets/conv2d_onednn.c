/* conv2d_onednn.c — oneDNN's bf16 convolution primitives (forward, backward data, weight gradient) as a CPU conv
 * path of --precision bf16 (conv2d_impl.h; which passes take it: conv2d_algo.c's ONEDNN_CONV_RULE).
 *
 * The tensors stay what every other path reads and writes: fp32 NCHW x, dy, y, dx and fp32 (K, C, R, S) w, dw, in
 * the task's buffers (x in bf16 where the plan stores it so: conv_geom.x_bf16). Per call: the two inputs are reordered (rounded to bf16, round to nearest even) into the
 * blocked layouts the primitive chose (the weights every call: they change every step), the primitive runs (bf16
 * products, fp32 sums, fp32 output in its blocked layout), and one more reorder writes the output back to NCHW,
 * adding it (a sum post-op: out = out + result) where the pass accumulates (dx +=, dw +=; y += for beta 1).
 * A forward whose y is stored in bf16 (conv_geom.y_bf16) has a bf16 destination instead: the primitive rounds its
 * fp32 sums, plus the conv's bias (the primitive's own bias argument), as it stores them, and a bf16 reorder (only
 * where its layout is not NCHW) moves them: no fp32 output written and read back.
 *
 * Per thread (one StarPU CPU worker): an engine, a stream, one OpenMP thread (oneDNN then runs on the worker
 * alone: its sums have a fixed order for a given shape, so the same inputs give the same bits on every run,
 * whatever the scheduler and the number of workers), and a small cache of primitives keyed by the pass and the
 * conv's shape (creating them costs milliseconds). The blocked copies live in the worker's conv scratch.
 */
#include <stdio.h>
#include <string.h>

#include "conv2d_impl.h"
#include "dnn_codelet.h"
#include "gemm_bf16.h"

#ifdef DNN_HAVE_DNNL
#include "onednn_thread.h"

/* One pass of one shape: in0, in1 -> blocked bf16 (reorders r0, r1), the primitive, its output (blocked f32, or the
 * caller's buffer itself when the layouts agree and nothing is added) -> NCHW by ro (with the sum post-op when
 * acc). */
typedef struct {
	int pass, acc, bias;                  // bias: a bf16-y forward's bias (g.ybias was not NULL), in the primitive
	conv_geom g;
	dnnl_primitive_t conv, r0, r1, ro;
	dnnl_memory_t u0, u1, b0, b1, bo, uo; // user (plain f32) and blocked memories, handles set per call
	dnnl_memory_t ub;                     // the bias (K, f32) where bias, handle set per call
	size_t s0, s1, so;                    // bytes of b0, b1, bo (so = 0: the primitive writes uo directly)
} cv_entry;

#define CV_CACHE 32 /* ResNet-20: 8 distinct shapes x 3 passes; ResNet-8 6 x 3 */
static __thread cv_entry cv_cache[CV_CACHE];
static __thread int cv_n, cv_next;
static __thread dnn_onednn_thread cv_t; /* this thread's engine and stream */

static void cv_free(cv_entry *e)
{
	dnnl_primitive_destroy(e->conv), dnnl_primitive_destroy(e->r0), dnnl_primitive_destroy(e->r1);
	dnnl_primitive_destroy(e->ro);
	dnnl_memory_destroy(e->u0), dnnl_memory_destroy(e->u1), dnnl_memory_destroy(e->b0);
	dnnl_memory_destroy(e->b1), dnnl_memory_destroy(e->bo), dnnl_memory_destroy(e->uo);
	dnnl_memory_destroy(e->ub);
	memset(e, 0, sizeof(*e));
}

static int same_geom(const conv_geom *a, const conv_geom *b)
{
	return a->N == b->N && a->C == b->C && a->H == b->H && a->W == b->W && a->K == b->K && a->R == b->R &&
	       a->S == b->S && a->P == b->P && a->Q == b->Q && a->stride == b->stride && a->dil == b->dil &&
	       a->pad_h == b->pad_h && a->pad_w == b->pad_w && a->x_bf16 == b->x_bf16 && a->y_bf16 == b->y_bf16;
}

/* A reorder from a to b, with out = out + in where sum; NULL on failure. */
static dnnl_primitive_t reorder(const dnnl_memory_desc_t *a, const dnnl_memory_desc_t *b, int sum)
{
	dnnl_primitive_attr_t attr = NULL;
	dnnl_post_ops_t po = NULL;
	dnnl_primitive_desc_t pd = NULL;
	dnnl_primitive_t p = NULL;
	int ok = dnnl_primitive_attr_create(&attr) == dnnl_success;
	if (ok && sum)
		ok = dnnl_post_ops_create(&po) == dnnl_success && dnnl_post_ops_append_sum(po, 1.0f) == dnnl_success &&
		     dnnl_primitive_attr_set_post_ops(attr, po) == dnnl_success;
	if (ok && dnnl_reorder_primitive_desc_create(&pd, a, cv_t.eng, b, cv_t.eng, attr) == dnnl_success &&
	    dnnl_primitive_create(&p, pd) != dnnl_success)
		p = NULL;
	if (pd)
		dnnl_primitive_desc_destroy(pd);
	if (po)
		dnnl_post_ops_destroy(po);
	if (attr)
		dnnl_primitive_attr_destroy(attr);
	return p;
}

/* The conv's operator descriptor of this pass, over src (N, C, H, W), weights (K, C, R, S), dst (N, K, P, Q); bias
 * (K) or NULL (forward only). */
static int conv_desc(dnnl_convolution_desc_t *cd, int pass, const conv_geom *g, const dnnl_memory_desc_t *src,
		     const dnnl_memory_desc_t *wei, const dnnl_memory_desc_t *bia, const dnnl_memory_desc_t *dst)
{
	/* oneDNN's right padding: what makes the output P x Q (0 or less where the last rows are not read) */
	const int pr_h = (g->P - 1) * g->stride + g->dil * (g->R - 1) + 1 - g->H - g->pad_h;
	const int pr_w = (g->Q - 1) * g->stride + g->dil * (g->S - 1) + 1 - g->W - g->pad_w;
	dnnl_dims_t st = {g->stride, g->stride}, dl = {g->dil - 1, g->dil - 1}, pl = {g->pad_h, g->pad_w},
		    pr = {pr_h, pr_w};
	dnnl_status_t s;
	if (pass == 0)
		s = dnnl_dilated_convolution_forward_desc_init(cd, dnnl_forward_training, dnnl_convolution_direct, src,
							       wei, bia, dst, st, dl, pl, pr);
	else if (pass == 1)
		s = dnnl_dilated_convolution_backward_data_desc_init(cd, dnnl_convolution_direct, src, wei, dst, st, dl,
								     pl, pr);
	else
		s = dnnl_dilated_convolution_backward_weights_desc_init(cd, dnnl_convolution_direct, src, wei, NULL, dst,
									st, dl, pl, pr);
	return s == dnnl_success;
}

/* Creates the entry's primitives; 0 on failure (e freed). */
static int cv_create(cv_entry *e)
{
	const conv_geom *g = &e->g;
	dnnl_dims_t xd = {g->N, g->C, g->H, g->W}, wd = {g->K, g->C, g->R, g->S}, yd = {g->N, g->K, g->P, g->Q};
	dnnl_dims_t bd = {g->K};
	dnnl_memory_desc_t ux, uw, uy, ax, aw, ay, mb; // user f32 plain; the primitive's (any layout); the bias
	const int pass = e->pass;
	/* A bf16 y (forward, g->y_bf16: a bf16 activation): a bf16 destination, the primitive's fp32 sums plus the
	 * bias (e->bias) rounded to bf16 as it stores them, then (other layout) a bf16 reorder that only moves them:
	 * no fp32 y written and read back. Measured against the two alternatives (docs/studies/
	 * 2026-12-07-convout-bf16.md): a bf16 destination forced to NCHW (no reorder) took 2.2-2.6x this one's time
	 * (oneDNN then takes another kernel), an fp32 destination with a converting reorder 3-8% more. */
	const int ybf = pass == 0 && g->y_bf16;
	/* bf16 inputs, fp32 output: forward x, w -> y; backward data dy, w -> dx; weight gradient x, dy -> dw. x stored
	 * in bf16 (g->x_bf16, a bf16 activation rounded as the reorder rounds): its reorder only moves it to the
	 * blocked layout, the same bf16 values as rounding the fp32 tensor it came from */
	int ok = dnnl_memory_desc_init_by_tag(&ux, 4, xd, g->x_bf16 ? dnnl_bf16 : dnnl_f32, dnnl_nchw) == dnnl_success &&
		 dnnl_memory_desc_init_by_tag(&uw, 4, wd, dnnl_f32, dnnl_oihw) == dnnl_success &&
		 dnnl_memory_desc_init_by_tag(&uy, 4, yd, ybf ? dnnl_bf16 : dnnl_f32, dnnl_nchw) == dnnl_success &&
		 dnnl_memory_desc_init_by_tag(&mb, 1, bd, dnnl_f32, dnnl_a) == dnnl_success &&
		 dnnl_memory_desc_init_by_tag(&ax, 4, xd, pass == 1 ? dnnl_f32 : dnnl_bf16, dnnl_format_tag_any) ==
			 dnnl_success &&
		 dnnl_memory_desc_init_by_tag(&aw, 4, wd, pass == 2 ? dnnl_f32 : dnnl_bf16, dnnl_format_tag_any) ==
			 dnnl_success &&
		 dnnl_memory_desc_init_by_tag(&ay, 4, yd, pass == 0 && !ybf ? dnnl_f32 : dnnl_bf16, dnnl_format_tag_any) ==
			 dnnl_success;
	dnnl_convolution_desc_t cd, fd;
	dnnl_primitive_desc_t hint = NULL, pd = NULL;
	ok = ok && conv_desc(&cd, pass, g, &ax, &aw, e->bias ? &mb : NULL, &ay);
	if (ok && pass != 0) { /* the backward primitives take the forward's as a hint */
		dnnl_memory_desc_t fx, fw, fy;
		ok = dnnl_memory_desc_init_by_tag(&fx, 4, xd, dnnl_bf16, dnnl_format_tag_any) == dnnl_success &&
		     dnnl_memory_desc_init_by_tag(&fw, 4, wd, dnnl_bf16, dnnl_format_tag_any) == dnnl_success &&
		     dnnl_memory_desc_init_by_tag(&fy, 4, yd, dnnl_f32, dnnl_format_tag_any) == dnnl_success &&
		     conv_desc(&fd, 0, g, &fx, &fw, NULL, &fy) &&
		     dnnl_primitive_desc_create(&hint, &fd, NULL, cv_t.eng, NULL) == dnnl_success;
	}
	ok = ok && dnnl_primitive_desc_create(&pd, &cd, NULL, cv_t.eng, hint) == dnnl_success &&
	     dnnl_primitive_create(&e->conv, pd) == dnnl_success;
	if (ok) {
		/* in0, in1, out: the user's and the primitive's descriptors of this pass */
		const dnnl_query_t q0 = pass == 1 ? dnnl_query_diff_dst_md : dnnl_query_src_md;
		const dnnl_query_t q1 = pass == 2 ? dnnl_query_diff_dst_md : dnnl_query_weights_md;
		const dnnl_query_t qo = pass == 0 ? dnnl_query_dst_md : pass == 1 ? dnnl_query_diff_src_md
										   : dnnl_query_diff_weights_md;
		const dnnl_memory_desc_t *p0 = dnnl_primitive_desc_query_md(pd, q0, 0);
		const dnnl_memory_desc_t *p1 = dnnl_primitive_desc_query_md(pd, q1, 0);
		const dnnl_memory_desc_t *po = dnnl_primitive_desc_query_md(pd, qo, 0);
		const dnnl_memory_desc_t *m0 = pass == 1 ? &uy : &ux, *m1 = pass == 2 ? &uy : &uw;
		const dnnl_memory_desc_t *mo = pass == 0 ? &uy : pass == 1 ? &ux : &uw;
		e->s0 = dnnl_memory_desc_get_size(p0), e->s1 = dnnl_memory_desc_get_size(p1);
		e->so = e->acc || !dnnl_memory_desc_equal(po, mo) ? dnnl_memory_desc_get_size(po) : 0;
		ok = (e->r0 = reorder(m0, p0, 0)) && (e->r1 = reorder(m1, p1, 0)) &&
		     dnnl_memory_create(&e->u0, m0, cv_t.eng, DNNL_MEMORY_NONE) == dnnl_success &&
		     dnnl_memory_create(&e->u1, m1, cv_t.eng, DNNL_MEMORY_NONE) == dnnl_success &&
		     dnnl_memory_create(&e->b0, p0, cv_t.eng, DNNL_MEMORY_NONE) == dnnl_success &&
		     dnnl_memory_create(&e->b1, p1, cv_t.eng, DNNL_MEMORY_NONE) == dnnl_success &&
		     dnnl_memory_create(&e->bo, po, cv_t.eng, DNNL_MEMORY_NONE) == dnnl_success &&
		     dnnl_memory_create(&e->uo, mo, cv_t.eng, DNNL_MEMORY_NONE) == dnnl_success &&
		     (!e->so || (e->ro = reorder(po, mo, e->acc))) &&
		     (!e->bias || dnnl_memory_create(&e->ub, &mb, cv_t.eng, DNNL_MEMORY_NONE) == dnnl_success);
	}
	if (pd)
		dnnl_primitive_desc_destroy(pd);
	if (hint)
		dnnl_primitive_desc_destroy(hint);
	if (!ok)
		cv_free(e);
	return ok;
}

/* The entry of this pass and shape, created on a miss (round-robin eviction); NULL when oneDNN cannot run it. */
static cv_entry *cv_get(int pass, int acc, const conv_geom *g)
{
	const int bias = pass == 0 && g->y_bf16 && g->ybias;
	for (int i = 0; i < cv_n; i++) {
		cv_entry *e = &cv_cache[i];
		if (e->pass == pass && e->acc == acc && e->bias == bias && same_geom(&e->g, g))
			return e;
	}
	if (!dnn_onednn_thread_open(&cv_t))
		return NULL;
	cv_entry n = {.pass = pass, .acc = acc, .bias = bias, .g = *g};
	n.g.ybias = NULL; /* the call's pointer, not part of the key */
	if (!cv_create(&n))
		return NULL;
	int evict;
	cv_entry *e = &cv_cache[dnn_onednn_cache_slot(&cv_n, &cv_next, CV_CACHE, &evict)];
	if (evict)
		cv_free(e);
	*e = n;
	return e;
}

static int exec(dnnl_primitive_t p, int n, const dnnl_exec_arg_t *args)
{
	return dnnl_primitive_execute(p, cv_t.stream, n, args) == dnnl_success;
}

/* out (=|+=) the pass of the conv on in0, in1 (see the header). 0: done, or an error recorded; 1: oneDNN does not
 * run it (nothing written). */
static int run(int pass, int acc, float *out, const float *in0, const float *in1, const conv_geom *g)
{
	if (!dnn_conv_onednn_applies(g))
		return 1;
	cv_entry *e = cv_get(pass, acc, g);
	if (!e)
		return 1;
	const size_t a0 = (e->s0 + 63) & ~(size_t)63, a1 = (e->s1 + 63) & ~(size_t)63;
	char *buf = (char *)dnn_conv_scratch((a0 + a1 + e->so + 3) / 4);
	if (!buf)
		return 0; /* the error is recorded */
	char *b0 = buf, *b1 = buf + a0, *bo = e->so ? buf + a0 + a1 : (char *)out;
	static const char *const names[3] = {"forward", "backward data", "weight gradient"};
	int ok = dnnl_memory_set_data_handle(e->u0, (void *)in0) == dnnl_success &&
		 dnnl_memory_set_data_handle(e->u1, (void *)in1) == dnnl_success &&
		 dnnl_memory_set_data_handle(e->b0, b0) == dnnl_success &&
		 dnnl_memory_set_data_handle(e->b1, b1) == dnnl_success &&
		 dnnl_memory_set_data_handle(e->bo, bo) == dnnl_success &&
		 dnnl_memory_set_data_handle(e->uo, out) == dnnl_success &&
		 (!e->bias || dnnl_memory_set_data_handle(e->ub, (void *)g->ybias) == dnnl_success);
	const dnnl_exec_arg_t a_r0[2] = {{DNNL_ARG_FROM, e->u0}, {DNNL_ARG_TO, e->b0}};
	const dnnl_exec_arg_t a_r1[2] = {{DNNL_ARG_FROM, e->u1}, {DNNL_ARG_TO, e->b1}};
	const dnnl_exec_arg_t a_ro[2] = {{DNNL_ARG_FROM, e->bo}, {DNNL_ARG_TO, e->uo}};
	/* the primitive's arguments: forward (SRC, WEIGHTS) -> DST; backward data (DIFF_DST, WEIGHTS) -> DIFF_SRC;
	 * weight gradient (SRC, DIFF_DST) -> DIFF_WEIGHTS */
	const int k0 = pass == 1 ? DNNL_ARG_DIFF_DST : DNNL_ARG_SRC, k1 = pass == 2 ? DNNL_ARG_DIFF_DST : DNNL_ARG_WEIGHTS;
	const int ko = pass == 0 ? DNNL_ARG_DST : pass == 1 ? DNNL_ARG_DIFF_SRC : DNNL_ARG_DIFF_WEIGHTS;
	const dnnl_exec_arg_t a_c[4] = {{k0, e->b0}, {k1, e->b1}, {ko, e->bo}, {DNNL_ARG_BIAS, e->ub}};
	ok = ok && exec(e->r0, 2, a_r0) && exec(e->r1, 2, a_r1) && exec(e->conv, e->bias ? 4 : 3, a_c) &&
	     (!e->so || exec(e->ro, 2, a_ro)) && dnnl_stream_wait(cv_t.stream) == dnnl_success;
	if (!ok)
		dnn_worker_error("conv2d: oneDNN's bf16 %s (N%d C%d %dx%d K%d %dx%d s%d) failed", names[pass], g->N, g->C,
				 g->H, g->W, g->K, g->R, g->S, g->stride);
	return 0;
}

int dnn_conv_onednn_applies(const conv_geom *g)
{
	/* bf16 only, oneDNN on (dnn_gemm_bf16_set_simd) on a CPU that runs bf16; padding a crop (negative) is not
	 * oneDNN's */
	return g->bf16 && dnn_gemm_bf16_simd() && dnn_cpu_has_bf16() && g->pad_h >= 0 && g->pad_w >= 0 &&
	       g->pad_h < g->dil * (g->R - 1) + 1 && g->pad_w < g->dil * (g->S - 1) + 1;
}

int dnn_conv_onednn_forward(float *y, const float *x, const float *w, const conv_geom *g, float beta)
{
	return run(0, beta != 0.0f, y, x, w, g);
}

int dnn_conv_onednn_backward_data(float *dx, const float *dy, const float *w, const conv_geom *g, int accumulate_dx)
{
	return run(1, accumulate_dx != 0, dx, dy, w, g);
}

int dnn_conv_onednn_backward_filter(float *dw, const float *x, const float *dy, const conv_geom *g)
{
	return run(2, 1, dw, x, dy, g);
}

void dnn_conv2d_onednn_release(void)
{
	for (int i = 0; i < cv_n; i++)
		cv_free(&cv_cache[i]);
	cv_n = cv_next = 0;
	dnn_onednn_thread_close(&cv_t);
}
#else
int dnn_conv_onednn_applies(const conv_geom *g)
{
	(void)g;
	return 0;
}

int dnn_conv_onednn_forward(float *y, const float *x, const float *w, const conv_geom *g, float beta)
{
	(void)y, (void)x, (void)w, (void)g, (void)beta;
	return 1;
}

int dnn_conv_onednn_backward_data(float *dx, const float *dy, const float *w, const conv_geom *g, int accumulate_dx)
{
	(void)dx, (void)dy, (void)w, (void)g, (void)accumulate_dx;
	return 1;
}

int dnn_conv_onednn_backward_filter(float *dw, const float *x, const float *dy, const conv_geom *g)
{
	(void)dw, (void)x, (void)dy, (void)g;
	return 1;
}

void dnn_conv2d_onednn_release(void) {}
#endif
