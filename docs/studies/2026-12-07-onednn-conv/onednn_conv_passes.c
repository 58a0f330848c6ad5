/* onednn_conv_passes.c — docs/studies/2026-12-07-onednn-conv.md: where the time of oneDNN 2.6's bf16 convolution
 * goes in each pass, on ResNet-20's and ResNet-8's shapes, with fp32 NCHW tensors in and out as starpu-anp's are
 * (what codelets/conv2d_onednn.c runs), one thread:
 *   forward          reorder x and w (f32 -> bf16 blocked), conv, reorder y (f32 blocked -> nchw);
 *   backward data    reorder dy and w, conv, reorder dx;
 *   weight gradient  reorder x and dy, conv, reorder dw (with the sum post-op: dw +=).
 * Prints the best of R calls of each part, ms (thread CPU time; the first call warms up). Build and run:
 *   gcc -O2 -o /tmp/onednn_conv_passes docs/studies/2026-12-07-onednn-conv/onednn_conv_passes.c -ldnnl
 *   OMP_NUM_THREADS=1 setsid -w bash scripts/measure_prio.sh /tmp/onednn_conv_passes 64 5
 */
#include <oneapi/dnnl/dnnl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define CK(x)                                                                                          \
	do {                                                                                           \
		dnnl_status_t s_ = (x);                                                                \
		if (s_ != dnnl_success) {                                                              \
			fprintf(stderr, "%s:%d: %s failed (%d)\n", __FILE__, __LINE__, #x, (int)s_); \
			exit(1);                                                                       \
		}                                                                                      \
	} while (0)

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

static dnnl_engine_t eng;
static dnnl_stream_t st;

typedef struct {
	dnnl_primitive_t p;
	dnnl_memory_t a, b;
} reo;

static reo reorder(const dnnl_memory_desc_t *a, const dnnl_memory_desc_t *b, void *pa, void *pb, int sum)
{
	reo r;
	dnnl_primitive_desc_t pd;
	dnnl_primitive_attr_t attr;
	dnnl_post_ops_t po;
	CK(dnnl_primitive_attr_create(&attr));
	CK(dnnl_post_ops_create(&po));
	if (sum) {
		CK(dnnl_post_ops_append_sum(po, 1.0f));
		CK(dnnl_primitive_attr_set_post_ops(attr, po));
	}
	CK(dnnl_reorder_primitive_desc_create(&pd, a, eng, b, eng, attr));
	CK(dnnl_primitive_create(&r.p, pd));
	CK(dnnl_primitive_desc_destroy(pd));
	CK(dnnl_memory_create(&r.a, a, eng, pa ? pa : DNNL_MEMORY_ALLOCATE));
	CK(dnnl_memory_create(&r.b, b, eng, pb ? pb : DNNL_MEMORY_ALLOCATE));
	return r;
}

static double run(dnnl_primitive_t p, int n, const dnnl_exec_arg_t *args)
{
	double t = now();
	CK(dnnl_primitive_execute(p, st, n, args));
	CK(dnnl_stream_wait(st));
	return now() - t;
}

static double run_reo(reo *r)
{
	dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, r->a}, {DNNL_ARG_TO, r->b}};
	return run(r->p, 2, args);
}

static float *buf(size_t n)
{
	float *p = malloc(n * sizeof(float));
	for (size_t i = 0; i < n; i++)
		p[i] = (float)((i * 2654435761u) % 1000) / 500.0f - 1.0f;
	return p;
}

static void desc(dnnl_convolution_desc_t *cd, int pass, const dnnl_memory_desc_t *x, const dnnl_memory_desc_t *w,
		 const dnnl_memory_desc_t *y, int stride, int pad, int padr)
{
	dnnl_dims_t s = {stride, stride}, pl = {pad, pad}, pr = {padr, padr};
	if (pass == 0)
		CK(dnnl_convolution_forward_desc_init(cd, dnnl_forward_training, dnnl_convolution_direct, x, w, NULL, y,
						      s, pl, pr));
	else if (pass == 1)
		CK(dnnl_convolution_backward_data_desc_init(cd, dnnl_convolution_direct, x, w, y, s, pl, pr));
	else
		CK(dnnl_convolution_backward_weights_desc_init(cd, dnnl_convolution_direct, x, w, NULL, y, s, pl, pr));
}

static void shape(int N, int C, int H, int K, int R, int stride, int pad, int reps, int pass)
{
	const int P = (H + 2 * pad - R) / stride + 1, padr = (P - 1) * stride + R - H - pad;
	dnnl_dims_t xd = {N, C, H, H}, wd = {K, C, R, R}, yd = {N, K, P, P};
	dnnl_memory_desc_t ux, uw, uy, ax, aw, ay, fx, fw, fy;
	CK(dnnl_memory_desc_init_by_tag(&ux, 4, xd, dnnl_f32, dnnl_nchw));
	CK(dnnl_memory_desc_init_by_tag(&uw, 4, wd, dnnl_f32, dnnl_oihw));
	CK(dnnl_memory_desc_init_by_tag(&uy, 4, yd, dnnl_f32, dnnl_nchw));
	CK(dnnl_memory_desc_init_by_tag(&ax, 4, xd, pass == 1 ? dnnl_f32 : dnnl_bf16, dnnl_format_tag_any));
	CK(dnnl_memory_desc_init_by_tag(&aw, 4, wd, pass == 2 ? dnnl_f32 : dnnl_bf16, dnnl_format_tag_any));
	CK(dnnl_memory_desc_init_by_tag(&ay, 4, yd, pass == 0 ? dnnl_f32 : dnnl_bf16, dnnl_format_tag_any));
	CK(dnnl_memory_desc_init_by_tag(&fx, 4, xd, dnnl_bf16, dnnl_format_tag_any));
	CK(dnnl_memory_desc_init_by_tag(&fw, 4, wd, dnnl_bf16, dnnl_format_tag_any));
	CK(dnnl_memory_desc_init_by_tag(&fy, 4, yd, dnnl_f32, dnnl_format_tag_any));
	dnnl_convolution_desc_t cd, fd;
	dnnl_primitive_desc_t hint = NULL, pd;
	desc(&cd, pass, &ax, &aw, &ay, stride, pad, padr);
	if (pass) {
		desc(&fd, 0, &fx, &fw, &fy, stride, pad, padr);
		CK(dnnl_primitive_desc_create(&hint, &fd, NULL, eng, NULL));
	}
	CK(dnnl_primitive_desc_create(&pd, &cd, NULL, eng, hint));
	const char *impl = NULL;
	CK(dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl));
	const dnnl_query_t q0 = pass == 1 ? dnnl_query_diff_dst_md : dnnl_query_src_md;
	const dnnl_query_t q1 = pass == 2 ? dnnl_query_diff_dst_md : dnnl_query_weights_md;
	const dnnl_query_t qo = pass == 0 ? dnnl_query_dst_md : pass == 1 ? dnnl_query_diff_src_md
									   : dnnl_query_diff_weights_md;
	const dnnl_memory_desc_t *p0 = dnnl_primitive_desc_query_md(pd, q0, 0);
	const dnnl_memory_desc_t *p1 = dnnl_primitive_desc_query_md(pd, q1, 0);
	const dnnl_memory_desc_t *po = dnnl_primitive_desc_query_md(pd, qo, 0);
	const dnnl_memory_desc_t *m0 = pass == 1 ? &uy : &ux, *m1 = pass == 2 ? &uy : &uw;
	const dnnl_memory_desc_t *mo = pass == 0 ? &uy : pass == 1 ? &ux : &uw;
	dnnl_primitive_t conv;
	CK(dnnl_primitive_create(&conv, pd));
	size_t n0 = dnnl_memory_desc_get_size(m0) / 4, n1 = dnnl_memory_desc_get_size(m1) / 4;
	size_t no = dnnl_memory_desc_get_size(mo) / 4;
	float *i0 = buf(n0), *i1 = buf(n1), *o = buf(no);
	reo r0 = reorder(m0, p0, i0, NULL, 0), r1 = reorder(m1, p1, i1, NULL, 0);
	reo ro = reorder(po, mo, NULL, o, pass == 2);
	const int k0 = pass == 1 ? DNNL_ARG_DIFF_DST : DNNL_ARG_SRC, k1 = pass == 2 ? DNNL_ARG_DIFF_DST : DNNL_ARG_WEIGHTS;
	const int ko = pass == 0 ? DNNL_ARG_DST : pass == 1 ? DNNL_ARG_DIFF_SRC : DNNL_ARG_DIFF_WEIGHTS;
	dnnl_exec_arg_t args[3] = {{k0, r0.b}, {k1, r1.b}, {ko, ro.a}};
	double b0 = 1e9, b1 = 1e9, bc = 1e9, bo = 1e9;
	for (int r = 0; r <= reps; r++) {
		double t0 = run_reo(&r0), t1 = run_reo(&r1), tc = run(conv, 3, args), to = run_reo(&ro);
		if (r > 0)
			b0 = t0 < b0 ? t0 : b0, b1 = t1 < b1 ? t1 : b1, bc = tc < bc ? tc : bc, bo = to < bo ? to : bo;
	}
	static const char *const names[3] = {"fwd", "bwd_data", "bwd_filter"};
	printf("| N%d %dx%dx%d -> %d, %dx%d s%d | %s | %.3f | %.3f | %.3f | %.3f | %.3f | %s |\n", N, C, H, H, K, R, R,
	       stride, names[pass], b0 * 1e3, b1 * 1e3, bc * 1e3, bo * 1e3, (b0 + b1 + bc + bo) * 1e3, impl);
	free(i0), free(i1), free(o);
}

int main(int argc, char **argv)
{
	const int N = argc > 1 ? atoi(argv[1]) : 64, reps = argc > 2 ? atoi(argv[2]) : 5;
	CK(dnnl_engine_create(&eng, dnnl_cpu, 0));
	CK(dnnl_stream_create(&st, eng, dnnl_stream_default_flags));
	static const int L[][6] = {{3, 32, 16, 3, 1, 1},  {16, 32, 16, 3, 1, 1}, {16, 32, 32, 3, 2, 1},
				   {16, 32, 32, 1, 2, 0}, {32, 16, 32, 3, 1, 1}, {32, 16, 64, 3, 2, 1},
				   {32, 16, 64, 1, 2, 0}, {64, 8, 64, 3, 1, 1},  {16, 28, 16, 3, 1, 1},
				   {32, 14, 32, 3, 1, 1}, {64, 7, 64, 3, 1, 1},  {16, 28, 32, 3, 2, 1},
				   {32, 14, 64, 3, 2, 1}};
	printf("oneDNN %d.%d.%d bf16, one thread, best of %d, ms (thread CPU time); in0, in1: fwd x, w; bwd_data dy, w; "
	       "bwd_filter x, dy\n\n",
	       dnnl_version()->major, dnnl_version()->minor, dnnl_version()->patch, reps);
	printf("| shape | pass | reorder in0 | reorder in1 | conv | reorder out | total | kernel |\n"
	       "|---|---|---|---|---|---|---|---|\n");
	for (size_t i = 0; i < sizeof L / sizeof L[0]; i++)
		for (int pass = 0; pass < 3; pass++)
			shape(N, L[i][0], L[i][1], L[i][2], L[i][3], L[i][4], L[i][5], reps, pass);
	return 0;
}
