/* onednn_conv.c — option (b) of docs/studies/2026-12-07-conv-bf16.md: oneDNN 2.6's own convolution
 * forward on ResNet-20's shapes, fp32 NCHW in and out as starpu-anp's tensors are, one thread:
 *   reorder x (f32 nchw -> the primitive's bf16 layout), reorder w (f32 oihw -> its bf16 layout,
 *   every call: the weights change every step), the conv (bf16 x bf16 -> f32 dst in its layout),
 *   reorder y back (f32 -> nchw);
 * and, for reference, the same primitive in fp32 (f32 src/weights/dst, the same reorders). Prints
 * the best of R calls of each part, ms. Build and run (one core, as dnn_op_bench):
 *   gcc -O2 -o /tmp/onednn_conv docs/studies/2026-12-07-conv-bf16/onednn_conv.c -ldnnl
 *   OMP_NUM_THREADS=1 setsid -w bash scripts/measure_prio.sh /tmp/onednn_conv 64 5
 */
#include <oneapi/dnnl/dnnl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define CK(x)                                                                                      \
	do {                                                                                       \
		dnnl_status_t s_ = (x);                                                            \
		if (s_ != dnnl_success) {                                                          \
			fprintf(stderr, "%s:%d: %s failed (%d)\n", __FILE__, __LINE__, #x, (int)s_); \
			exit(1);                                                                   \
		}                                                                                  \
	} while (0)

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

static dnnl_engine_t eng;
static dnnl_stream_t st;

/* A reorder from md a to md b, its memories over pa (a) and a fresh buffer (b). */
typedef struct {
	dnnl_primitive_t p;
	dnnl_memory_t a, b;
} reo;

static reo reorder(const dnnl_memory_desc_t *a, const dnnl_memory_desc_t *b, void *pa)
{
	reo r;
	dnnl_primitive_desc_t pd;
	CK(dnnl_reorder_primitive_desc_create(&pd, a, eng, b, eng, NULL));
	CK(dnnl_primitive_create(&r.p, pd));
	CK(dnnl_primitive_desc_destroy(pd));
	CK(dnnl_memory_create(&r.a, a, eng, pa));
	CK(dnnl_memory_create(&r.b, b, eng, DNNL_MEMORY_ALLOCATE));
	return r;
}

static double run_reo(reo *r)
{
	dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, r->a}, {DNNL_ARG_TO, r->b}};
	double t = now();
	CK(dnnl_primitive_execute(r->p, st, 2, args));
	CK(dnnl_stream_wait(st));
	return now() - t;
}

static float *buf(size_t n)
{
	float *p = malloc(n * sizeof(float));
	for (size_t i = 0; i < n; i++)
		p[i] = (float)((i * 2654435761u) % 1000) / 500.0f - 1.0f;
	return p;
}

static void shape(int N, int C, int H, int K, int R, int stride, int pad, int reps, dnnl_data_type_t dt)
{
	const int P = (H + 2 * pad - R) / stride + 1;
	dnnl_dims_t xd = {N, C, H, H}, wd = {K, C, R, R}, yd = {N, K, P, P};
	dnnl_dims_t strides = {stride, stride}, padl = {pad, pad};
	dnnl_memory_desc_t ux, uw, uy, cx, cw, cy;
	CK(dnnl_memory_desc_init_by_tag(&ux, 4, xd, dnnl_f32, dnnl_nchw));
	CK(dnnl_memory_desc_init_by_tag(&uw, 4, wd, dnnl_f32, dnnl_oihw));
	CK(dnnl_memory_desc_init_by_tag(&uy, 4, yd, dnnl_f32, dnnl_nchw));
	CK(dnnl_memory_desc_init_by_tag(&cx, 4, xd, dt, dnnl_format_tag_any));
	CK(dnnl_memory_desc_init_by_tag(&cw, 4, wd, dt, dnnl_format_tag_any));
	CK(dnnl_memory_desc_init_by_tag(&cy, 4, yd, dnnl_f32, dnnl_format_tag_any));
	dnnl_convolution_desc_t cd;
	CK(dnnl_convolution_forward_desc_init(&cd, dnnl_forward_training, dnnl_convolution_direct, &cx, &cw, NULL, &cy,
					      strides, padl, padl));
	dnnl_primitive_desc_t pd;
	CK(dnnl_primitive_desc_create(&pd, &cd, NULL, eng, NULL));
	const char *impl = NULL;
	CK(dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl));
	const dnnl_memory_desc_t *px = dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
	const dnnl_memory_desc_t *pw = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
	const dnnl_memory_desc_t *py = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
	dnnl_primitive_t conv;
	CK(dnnl_primitive_create(&conv, pd));
	float *x = buf((size_t)N * C * H * H), *w = buf((size_t)K * C * R * R), *y = buf((size_t)N * K * P * P);
	reo rx = reorder(&ux, px, x), rw = reorder(&uw, pw, w);
	dnnl_memory_t my;
	CK(dnnl_memory_create(&my, py, eng, DNNL_MEMORY_ALLOCATE));
	void *myp;
	CK(dnnl_memory_get_data_handle(my, &myp));
	reo ry = reorder(py, &uy, myp);
	dnnl_memory_t uyy;
	CK(dnnl_memory_create(&uyy, &uy, eng, y));
	dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, rx.b}, {DNNL_ARG_WEIGHTS, rw.b}, {DNNL_ARG_DST, my}};
	double bx = 1e9, bw = 1e9, bc = 1e9, by = 1e9;
	for (int r = 0; r <= reps; r++) {
		double tx = run_reo(&rx), tw = run_reo(&rw), t = now();
		CK(dnnl_primitive_execute(conv, st, 3, args));
		CK(dnnl_stream_wait(st));
		double tc = now() - t, ty = run_reo(&ry);
		if (r > 0) { /* the first call warms up */
			bx = tx < bx ? tx : bx, bw = tw < bw ? tw : bw, bc = tc < bc ? tc : bc, by = ty < by ? ty : by;
		}
	}
	printf("| N%d %dx%dx%d -> %d, %dx%d s%d | %s | %.3f | %.3f | %.3f | %.3f | %.3f | %s |\n", N, C, H, H, K, R, R,
	       stride, dt == dnnl_bf16 ? "bf16" : "f32", bx * 1e3, bw * 1e3, bc * 1e3, by * 1e3,
	       (bx + bw + bc + by) * 1e3, impl);
	free(x), free(w), free(y);
}

int main(int argc, char **argv)
{
	const int N = argc > 1 ? atoi(argv[1]) : 64, reps = argc > 2 ? atoi(argv[2]) : 5;
	CK(dnnl_engine_create(&eng, dnnl_cpu, 0));
	CK(dnnl_stream_create(&st, eng, dnnl_stream_default_flags));
	static const int L[][6] = {{3, 32, 16, 3, 1, 1},  {16, 32, 16, 3, 1, 1}, {16, 32, 32, 3, 2, 1},
				   {16, 32, 32, 1, 2, 0}, {32, 16, 32, 3, 1, 1}, {32, 16, 64, 3, 2, 1},
				   {32, 16, 64, 1, 2, 0}, {64, 8, 64, 3, 1, 1}};
	printf("oneDNN %d.%d.%d, forward, one thread, best of %d, ms (thread CPU time)\n\n", dnnl_version()->major,
	       dnnl_version()->minor, dnnl_version()->patch, reps);
	printf("| shape | type | reorder x | reorder w | conv | reorder y | total | kernel |\n|---|---|---|---|---|---|---|---|\n");
	for (size_t i = 0; i < sizeof L / sizeof L[0]; i++) {
		shape(N, L[i][0], L[i][1], L[i][2], L[i][3], L[i][4], L[i][5], reps, dnnl_f32);
		shape(N, L[i][0], L[i][1], L[i][2], L[i][3], L[i][4], L[i][5], reps, dnnl_bf16);
	}
	return 0;
}
