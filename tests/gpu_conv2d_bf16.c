/* gpu_conv2d_bf16 — conv2d's bf16 mode on a CUDA worker (--precision bf16: cuDNN on bf16 copies,
 * CUDNN_DATA_FLOAT compute, the bf16 result widened into fp32; codelets/conv2d.cu) against the
 * CPU worker's fp32 kernel, every phase (forward, backward data = and +=, backward filter +=), on
 * ResNet shapes and odd ones, under a bound derived from bf16's 8-bit significand, with a
 * negative control; then the time per task, bf16 against fp32 on the same GPU. Skipped (77)
 * without a CUDA worker (scripts/gpu-check.sh counts that as a failure on the GPU machine).
 *
 * The bound, per output element c = sum of Kt products (Kt = C R S forward, K R S backward data,
 * N P Q backward filter): each operand rounded to bf16 (relative error <= u = 2^-8), a product of
 * two bf16 values exact in fp32, summed in fp32 by the tensor cores, whose accumulation may
 * truncate instead of rounding (Fasi, Higham, Mikaitis, Pranesh, "Numerical behavior of NVIDIA
 * tensor cores", 2021: unit 2^-23, not 2^-24), and the result rounded to bf16 once more (cuDNN's
 * bf16 configuration writes y in x's type), then widened (exact) and added in fp32 where the
 * phase accumulates (+2 terms: alpha, the add). So the GPU is within
 *     gtc(Kt) S,  gtc(Kt) = (1 + u)^3 (1 + 2^-23)^(Kt+2) - 1,  S = sum |a b| (+ |dx0|, |dw0|),
 * of the exact sum, and the CPU's fp32 kernel within g32(Kt) S, g32(Kt) = (1 + 2^-24)^(Kt+2) - 1:
 * the check is |gpu_bf16 - cpu_fp32| <= (gtc(Kt) + g32(Kt)) S per element, S the CPU's fp32 kernel
 * on |x|, |w|, |dy| (conv is linear in each operand, so that is sum |a b|), plus |dx0| or |dw0|.
 * About 3u = 0.0117 S: a bf16 path that skipped a rounding would still pass, one that lost more
 * (bf16 sums, a bf16 Winograd transform) would not.
 * Negative controls, which show the GPU computed in bf16: (1) the same comparison under the fp32
 * kernel's own tolerance, 2 g32(Kt) S, must fail, where that tolerance is below bf16's: for
 * Kt <= 2^12 (2 g32(4096) = 4.9e-4 < u/8; above, as the weight gradient's N P Q, the a priori
 * fp32 bound K 2^-24 reaches bf16's 2u and separates nothing, so (1) is not asked there); (2)
 * every element of a bf16 pass that does not accumulate (forward, backward data =, backward
 * filter into zeros) is a bf16 value (cuDNN wrote it in bf16), while the CPU's fp32 results of
 * the same passes are not all bf16 values (the check's own negative control).
 * And the same forward twice gives the same bits (cuDNN's deterministic algorithms come first).
 *
 * DNN_GPU_TEST_CPU_AS_CUDA=1 (gpu_util.h; never set by CTest or gpu-check.sh) checks this test's
 * own logic without a GPU: the "CUDA" side is then a host model of conv2d.cu's bf16 path (inputs
 * rounded with dnn_f32_to_bf16, the CPU's fp32 kernel, its result rounded to bf16 and added in
 * fp32 where the pass accumulates), which must pass the bound and fail the negative control. */
#include <math.h>
#include <starpu.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conv2d.h"
#include "gemm_bf16.h"
#include "gpu_util.h"
#include "test_util.h"

static double gtc(double kt) { return pow(1.0 + ldexp(1.0, -8), 3) * pow(1.0 + ldexp(1.0, -23), kt + 2) - 1.0; }
static double g32(double kt) { return pow(1.0 + ldexp(1.0, -24), kt + 2) - 1.0; }

static void check_pair(const char *what, const float *b16, const float *f32, const float *scale, double kt, size_t n)
{
	TEST_CHECK(test_count_outside(what, b16, f32, scale, gtc(kt) + g32(kt), 0.0, n, 1) == 0,
		   "%s: CUDA bf16 against CPU fp32 outside (gtc + g32) S", what);
	if (kt <= 4096)
		TEST_CHECK(test_count_outside(what, b16, f32, scale, 2 * g32(kt), 0.0, n, 0) > 0,
			   "%s: negative control: CUDA bf16 passed the fp32 tolerance, so it did not compute in bf16",
			   what);
}

/* Elements of p (n) that are not bf16 values (dnn_bf16_round changes them). */
static size_t not_bf16(const float *p, size_t n)
{
	size_t c = 0;
	for (size_t i = 0; i < n; i++)
		c += dnn_bf16_round(p[i]) != p[i];
	return c;
}

/* (2): the bf16 pass's result all bf16 values, the fp32 one's not. */
static void check_bf16_values(const char *what, const float *b16, const float *f32, size_t n)
{
	const size_t b = not_bf16(b16, n), f = not_bf16(f32, n);
	printf("  %s: %zu of %zu not bf16 values (the fp32 kernel's: %zu)\n", what, b, n, f);
	TEST_CHECK(b == 0, "%s: the bf16 pass wrote %zu values that bf16 cannot hold", what, b);
	TEST_CHECK(f > 0, "%s: negative control: the fp32 kernel's results are all bf16 values, so (2) tests nothing", what);
}

/* One task of cl on worker: (R b0, R b1, mode2 b2). */
static void run(struct starpu_codelet *cl, const dnn_conv2d_args *a, starpu_data_handle_t b0, starpu_data_handle_t b1,
		int mode2, starpu_data_handle_t b2, int worker)
{
	struct starpu_data_descr d[] = {{b0, STARPU_R}, {b1, STARPU_R}, {b2, (enum starpu_data_access_mode)mode2}};
	gpu_task(cl, worker, a, sizeof(*a), d, 3, cl->name);
}

static void fabs_copy(float *d, const float *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		d[i] = fabsf(s[i]);
}

/* The stand-in's model of conv2d.cu's bf16 path: d (n) = bf16(s), or d = base + bf16(d). */
static void round_copy(float *d, const float *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		d[i] = dnn_bf16_round(s[i]);
}
static void add_rounded(float *d, const float *base, size_t n)
{
	for (size_t i = 0; i < n; i++)
		d[i] = (base ? base[i] : 0.0f) + dnn_bf16_round(d[i]);
}

/* Mean ms per task of reps tasks on the CUDA worker after one warm-up. */
static double time_ms(struct starpu_codelet *cl, const dnn_conv2d_args *a, starpu_data_handle_t b0,
		      starpu_data_handle_t b1, int mode2, starpu_data_handle_t b2, int reps)
{
	run(cl, a, b0, b1, mode2, b2, gpu_cuda_worker);
	starpu_task_wait_for_all();
	double t0 = starpu_timing_now();
	for (int i = 0; i < reps; i++)
		run(cl, a, b0, b1, mode2, b2, gpu_cuda_worker);
	starpu_task_wait_for_all();
	return (starpu_timing_now() - t0) / reps / 1000.0;
}

/* Forward, backward data (= and +=), backward filter (+=): CUDA bf16 against CPU fp32. */
static void check_shape(dnn_conv2d_args a)
{
	char name[160], what[220];
	snprintf(name, sizeof(name), "N%d C%d %dx%d K%d %dx%d st%d pad%d dil%d", a.N, a.C, a.H, a.W, a.K, a.R, a.S,
		 a.stride, a.pad, a.dilation);
	if (dnn_conv2d_args_finish(&a) != 0) {
		TEST_CHECK(0, "%s: args rejected", name);
		return;
	}
	const size_t nx = (size_t)a.N * a.C * a.H * a.W, nw = (size_t)a.K * a.C * a.R * a.S;
	const size_t ny = (size_t)a.N * a.K * a.P * a.Q;
	/* inputs and their absolute values; per output: bf16 (CUDA), fp32 (CPU), S (CPU on |.|) */
	float *x = alloc_f(nx), *w = alloc_f(nw), *dy = alloc_f(ny), *dx0 = alloc_f(nx), *dw0 = alloc_f(nw);
	float *ax = alloc_f(nx), *aw = alloc_f(nw), *ady = alloc_f(ny);
	float *y[3], *dx[3], *dxa[3], *dw[3], *y2 = alloc_f(ny), *dwz[2] = {alloc_f(nw), alloc_f(nw)};
	memset(dwz[0], 0, nw * sizeof(float)), memset(dwz[1], 0, nw * sizeof(float)); /* dw into zeros: (2) */
	for (int i = 0; i < 3; i++)
		y[i] = alloc_f(ny), dx[i] = alloc_f(nx), dxa[i] = alloc_f(nx), dw[i] = alloc_f(nw);
	test_fill_uniform(x, nx, -1, 1);
	test_fill_uniform(w, nw, -1, 1);
	test_fill_uniform(dy, ny, -1, 1);
	test_fill_uniform(dx0, nx, -1, 1);
	test_fill_uniform(dw0, nw, -1, 1);
	fabs_copy(ax, x, nx), fabs_copy(aw, w, nw), fabs_copy(ady, dy, ny);
	/* stand-in only: the model's rounded inputs, and its accumulating passes start from 0 */
	float *rx = gpu_fake ? alloc_f(nx) : NULL, *rw = gpu_fake ? alloc_f(nw) : NULL, *rdy = gpu_fake ? alloc_f(ny) : NULL;
	if (gpu_fake)
		round_copy(rx, x, nx), round_copy(rw, w, nw), round_copy(rdy, dy, ny);
	for (int i = 0; i < 3; i++) {
		memcpy(dxa[i], dx0, nx * sizeof(float));
		memcpy(dw[i], dw0, nw * sizeof(float));
	}
	fabs_copy(dxa[2], dx0, nx), fabs_copy(dw[2], dw0, nw);
	if (gpu_fake)
		memset(dxa[0], 0, nx * sizeof(float)), memset(dw[0], 0, nw * sizeof(float));

	dnn_conv2d_args a32 = a, a16 = a, acc32, acc16;
	a32.bf16 = 0, a16.bf16 = 1;
	acc32 = a32, acc16 = a16;
	acc32.accumulate_dx = acc16.accumulate_dx = 1;
	starpu_data_handle_t hx = reg_f(x, nx), hw = reg_f(w, nw), hdy = reg_f(dy, ny), hax = reg_f(ax, nx),
			     haw = reg_f(aw, nw), hady = reg_f(ady, ny), hy2 = reg_f(y2, ny), hdwz0 = reg_f(dwz[0], nw),
			     hdwz1 = reg_f(dwz[1], nw);
	starpu_data_handle_t hrx = gpu_fake ? reg_f(rx, nx) : hx, hrw = gpu_fake ? reg_f(rw, nw) : hw,
			     hrdy = gpu_fake ? reg_f(rdy, ny) : hdy;
	starpu_data_handle_t hy[3], hdx[3], hdxa[3], hdw[3];
	for (int i = 0; i < 3; i++)
		hy[i] = reg_f(y[i], ny), hdx[i] = reg_f(dx[i], nx), hdxa[i] = reg_f(dxa[i], nx), hdw[i] = reg_f(dw[i], nw);
	/* [0]: CUDA bf16 (the stand-in: fp32 on the rounded inputs), [1]: CPU fp32, [2]: CPU fp32 on |x|,
	 * |w|, |dy| (the scale S) */
	const dnn_conv2d_args *args[3] = {gpu_fake ? &a32 : &a16, &a32, &a32};
	const dnn_conv2d_args *accs[3] = {gpu_fake ? &acc32 : &acc16, &acc32, &acc32};
	const int workers[3] = {gpu_cuda_worker, gpu_cpu_worker, gpu_cpu_worker};
	for (int i = 0; i < 3; i++) {
		starpu_data_handle_t ix = i == 2 ? hax : i == 0 ? hrx : hx, iw = i == 2 ? haw : i == 0 ? hrw : hw,
				     idy = i == 2 ? hady : i == 0 ? hrdy : hdy;
		run(&cl_conv2d_fwd, args[i], ix, iw, STARPU_W, hy[i], workers[i]);
		run(&cl_conv2d_bwd_data, args[i], idy, iw, STARPU_W, hdx[i], workers[i]);
		run(&cl_conv2d_bwd_data, accs[i], idy, iw, STARPU_RW, hdxa[i], workers[i]);
		run(&cl_conv2d_bwd_filter, args[i], ix, idy, STARPU_RW, hdw[i], workers[i]);
	}
	run(&cl_conv2d_fwd, args[0], hrx, hrw, STARPU_W, hy2, gpu_cuda_worker);
	run(&cl_conv2d_bwd_filter, args[0], hrx, hrdy, STARPU_RW, hdwz0, gpu_cuda_worker);
	run(&cl_conv2d_bwd_filter, &a32, hx, hdy, STARPU_RW, hdwz1, gpu_cpu_worker);
	starpu_task_wait_for_all();
	starpu_data_handle_t all[] = {hy[0], hy[1], hy[2], hdx[0], hdx[1], hdx[2], hdxa[0], hdxa[1], hdxa[2],
				      hdw[0], hdw[1], hdw[2], hy2, hdwz0, hdwz1};
	for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
		TEST_CHECK(starpu_data_acquire(all[i], STARPU_RW) == 0, "%s: starpu_data_acquire", name);
	if (gpu_fake) { /* the model's output rounding, and its fp32 accumulation */
		round_copy(y[0], y[0], ny), round_copy(y2, y2, ny), round_copy(dx[0], dx[0], nx);
		round_copy(dwz[0], dwz[0], nw);
		add_rounded(dxa[0], dx0, nx), add_rounded(dw[0], dw0, nw);
	}
	snprintf(what, sizeof(what), "%s fwd", name);
	check_pair(what, y[0], y[1], y[2], (double)a.C * a.R * a.S, ny);
	snprintf(what, sizeof(what), "%s bwd_data", name);
	check_pair(what, dx[0], dx[1], dx[2], (double)a.K * a.R * a.S, nx);
	snprintf(what, sizeof(what), "%s bwd_data +=", name);
	check_pair(what, dxa[0], dxa[1], dxa[2], (double)a.K * a.R * a.S, nx);
	snprintf(what, sizeof(what), "%s bwd_filter +=", name);
	check_pair(what, dw[0], dw[1], dw[2], (double)a.N * a.P * a.Q, nw);
	snprintf(what, sizeof(what), "%s fwd rerun", name);
	TEST_CHECK(test_same_bits(what, y2, y[0], ny), "%s: a second bf16 forward gave other bits", name);
	snprintf(what, sizeof(what), "%s fwd", name);
	check_bf16_values(what, y[0], y[1], ny);
	snprintf(what, sizeof(what), "%s bwd_data", name);
	check_bf16_values(what, dx[0], dx[1], nx);
	snprintf(what, sizeof(what), "%s bwd_filter into zeros", name);
	check_bf16_values(what, dwz[0], dwz[1], nw);
	for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
		starpu_data_release(all[i]);

	/* Time per task on the GPU, bf16 against fp32 (DNN_CUDA_MATH as gpu_setup left it); not for the
	 * stand-in, whose "bf16" is the CPU's fp32 kernel */
	double gflop = dnn_conv2d_flops_fwd(&a) * 1e-9;
	const char *phase[3] = {"fwd", "bwd_data", "bwd_filter"};
	double t[3][2];
	for (int p = 0; p < 2 && !gpu_fake; p++) {
		const dnn_conv2d_args *ap = p ? &a16 : &a32;
		t[0][p] = time_ms(&cl_conv2d_fwd, ap, hx, hw, STARPU_W, hy[0], 20);
		t[1][p] = time_ms(&cl_conv2d_bwd_data, ap, hdy, hw, STARPU_W, hdx[0], 20);
		t[2][p] = time_ms(&cl_conv2d_bwd_filter, ap, hx, hdy, STARPU_RW, hdw[0], 20);
	}
	for (int p = 0; p < 3 && !gpu_fake; p++)
		printf("%-44s %-10s cuda fp32 %8.3f ms (%7.1f GFLOP/s)   bf16 %8.3f ms (%7.1f GFLOP/s)  %.2fx\n", name,
		       phase[p], t[p][0], gflop / (t[p][0] * 1e-3), t[p][1], gflop / (t[p][1] * 1e-3), t[p][0] / t[p][1]);

	starpu_data_handle_t in[] = {hx, hw, hdy, hax, haw, hady};
	for (size_t i = 0; i < sizeof in / sizeof in[0]; i++)
		starpu_data_unregister(in[i]);
	if (gpu_fake) {
		starpu_data_unregister(hrx), starpu_data_unregister(hrw), starpu_data_unregister(hrdy);
		free(rx), free(rw), free(rdy);
	}
	for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
		starpu_data_unregister(all[i]);
	for (int i = 0; i < 3; i++)
		free(y[i]), free(dx[i]), free(dxa[i]), free(dw[i]);
	free(x), free(w), free(dy), free(dx0), free(dw0), free(ax), free(aw), free(ady), free(y2), free(dwz[0]), free(dwz[1]);
}

int main(int argc, char **argv)
{
	int rc = gpu_setup(&argc, &argv, "gpu_conv2d_bf16", 1);
	if (rc)
		return rc;
	test_rng_seed(2718);
	/* ResNet-20 CIFAR shapes (stem, 3x3, stride-2 3x3 and 1x1 shortcut, deeper stages), then odd
	 * ones: 7x7 stride 2, dilation, 1x1, a kernel that is not square, odd channel counts. */
	check_shape(conv_shape(64, 3, 32, 32, 16, 3, 3, 1, 1, 1));
	check_shape(conv_shape(64, 16, 32, 32, 16, 3, 3, 1, 1, 1));
	check_shape(conv_shape(32, 16, 32, 32, 32, 3, 3, 2, 1, 1));
	check_shape(conv_shape(32, 16, 32, 32, 32, 1, 1, 2, 0, 1));
	check_shape(conv_shape(16, 64, 8, 8, 64, 3, 3, 1, 1, 1));
	check_shape(conv_shape(3, 5, 37, 29, 7, 7, 7, 2, 3, 1));
	check_shape(conv_shape(2, 6, 17, 19, 5, 3, 3, 1, 2, 2));
	check_shape(conv_shape(5, 12, 13, 11, 9, 1, 1, 1, 0, 1));
	check_shape(conv_shape(1, 3, 9, 10, 4, 2, 3, 3, 2, 1));
	test_starpu_shutdown();
	return test_report("gpu_conv2d_bf16");
}
