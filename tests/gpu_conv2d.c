/* gpu_conv2d — conv2d on a CUDA worker (cuDNN) against a CPU worker (im2col + OpenBLAS), for each
 * phase and several shapes, and the time per task on each. Skipped (77) without a CUDA worker.
 *
 * cuDNN may use TF32 tensor cores (CUDNN_DEFAULT_MATH), so results are compared with a mixed
 * tolerance, relative to the largest CPU value where it is above 1 and absolute below:
 * max|gpu - cpu| / max(1, max|cpu|). */
#include <math.h>
#include <starpu.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conv2d.h"
#include "gpu_util.h"
#include "test_util.h"

#define TOL 5e-3

static int cuda_worker = -1, cpu_worker = -1;

/* One task of `cl` on `worker` with buffers (R b0, R b1, mode2 b2). */
static void submit(struct starpu_codelet *cl, const dnn_conv2d_args *a, starpu_data_handle_t b0,
		   starpu_data_handle_t b1, int mode2, starpu_data_handle_t b2, int worker)
{
	struct starpu_data_descr d[] = {{b0, STARPU_R}, {b1, STARPU_R}, {b2, (enum starpu_data_access_mode)mode2}};
	if (test_task(cl, worker, a, sizeof(*a), d, 3, cl->name) != 0)
		exit(1); /* test_task said why */
}

static void compare(const char *what, starpu_data_handle_t hg, starpu_data_handle_t hc, size_t n)
{
	int rg = starpu_data_acquire(hg, STARPU_R), rc = starpu_data_acquire(hc, STARPU_R);
	TEST_CHECK(rg == 0 && rc == 0, "%s: starpu_data_acquire: %d, %d", what, rg, rc);
	if (rg == 0 && rc == 0)
		gpu_close_scaled(what, (const float *)starpu_data_get_local_ptr(hg),
				 (const float *)starpu_data_get_local_ptr(hc), n, TOL);
	if (rg == 0)
		starpu_data_release(hg);
	if (rc == 0)
		starpu_data_release(hc);
}

/* Mean time per task (ms) of `reps` tasks on `worker`, after one warm-up task. */
static double time_phase(struct starpu_codelet *cl, const dnn_conv2d_args *a, starpu_data_handle_t b0,
			 starpu_data_handle_t b1, int mode2, starpu_data_handle_t b2, int worker,
			 int reps)
{
	submit(cl, a, b0, b1, mode2, b2, worker);
	starpu_task_wait_for_all();
	double t0 = starpu_timing_now();
	for (int i = 0; i < reps; i++)
		submit(cl, a, b0, b1, mode2, b2, worker);
	starpu_task_wait_for_all();
	return (starpu_timing_now() - t0) / reps / 1000.0;
}

static void check_shape(dnn_conv2d_args a)
{
	char name[160], what[220];
	snprintf(name, sizeof(name), "N%d C%d %dx%d K%d %dx%d st%d pad%d dil%d", a.N, a.C, a.H, a.W,
		 a.K, a.R, a.S, a.stride, a.pad, a.dilation);
	if (dnn_conv2d_args_finish(&a) != 0) {
		TEST_CHECK(0, "%s: args rejected", name);
		return;
	}
	size_t nx = (size_t)a.N * a.C * a.H * a.W, nw = (size_t)a.K * a.C * a.R * a.S;
	size_t ny = (size_t)a.N * a.K * a.P * a.Q;
	float *x = malloc(nx * sizeof(float)), *w = malloc(nw * sizeof(float));
	float *dy = malloc(ny * sizeof(float));
	float *y[2], *dx[2], *dxa[2], *dw[2];
	for (int i = 0; i < 2; i++) {
		y[i] = malloc(ny * sizeof(float));
		dx[i] = malloc(nx * sizeof(float));
		dxa[i] = malloc(nx * sizeof(float));
		dw[i] = malloc(nw * sizeof(float));
	}
	test_fill_uniform(x, nx, -1, 1);
	test_fill_uniform(w, nw, -1, 1);
	test_fill_uniform(dy, ny, -1, 1);
	test_fill_uniform(dxa[0], nx, -1, 1);
	test_fill_uniform(dw[0], nw, -1, 1);
	memcpy(dxa[1], dxa[0], nx * sizeof(float));
	memcpy(dw[1], dw[0], nw * sizeof(float));

	starpu_data_handle_t hx = reg_f(x, nx), hw = reg_f(w, nw), hdy = reg_f(dy, ny);
	starpu_data_handle_t hy[2], hdx[2], hdxa[2], hdw[2];
	for (int i = 0; i < 2; i++) {
		hy[i] = reg_f(y[i], ny);
		hdx[i] = reg_f(dx[i], nx);
		hdxa[i] = reg_f(dxa[i], nx);
		hdw[i] = reg_f(dw[i], nw);
	}
	dnn_conv2d_args acc = a;
	acc.accumulate_dx = 1;
	int workers[2] = {cuda_worker, cpu_worker};
	for (int i = 0; i < 2; i++) {
		submit(&cl_conv2d_fwd, &a, hx, hw, STARPU_W, hy[i], workers[i]);
		submit(&cl_conv2d_bwd_data, &a, hdy, hw, STARPU_W, hdx[i], workers[i]);
		submit(&cl_conv2d_bwd_data, &acc, hdy, hw, STARPU_RW, hdxa[i], workers[i]);
		submit(&cl_conv2d_bwd_filter, &a, hx, hdy, STARPU_RW, hdw[i], workers[i]);
	}
	snprintf(what, sizeof(what), "%s fwd", name);
	compare(what, hy[0], hy[1], ny);
	snprintf(what, sizeof(what), "%s bwd_data", name);
	compare(what, hdx[0], hdx[1], nx);
	snprintf(what, sizeof(what), "%s bwd_data accumulate", name);
	compare(what, hdxa[0], hdxa[1], nx);
	snprintf(what, sizeof(what), "%s bwd_filter", name);
	compare(what, hdw[0], hdw[1], nw);

	double gflop = dnn_conv2d_flops_fwd(&a) * 1e-9;
	double t[3][2];
	for (int i = 0; i < 2; i++) {
		int reps = i == 0 ? 20 : 2;
		t[0][i] = time_phase(&cl_conv2d_fwd, &a, hx, hw, STARPU_W, hy[i], workers[i], reps);
		t[1][i] = time_phase(&cl_conv2d_bwd_data, &a, hdy, hw, STARPU_W, hdx[i], workers[i], reps);
		t[2][i] = time_phase(&cl_conv2d_bwd_filter, &a, hx, hdy, STARPU_RW, hdw[i], workers[i], reps);
	}
	const char *phase[3] = {"fwd", "bwd_data", "bwd_filter"};
	for (int p = 0; p < 3; p++)
		printf("%-44s %-10s cuda %8.3f ms (%7.1f GFLOP/s)   cpu %8.2f ms (%5.1f GFLOP/s)\n", name,
		       phase[p], t[p][0], gflop / (t[p][0] * 1e-3), t[p][1], gflop / (t[p][1] * 1e-3));

	starpu_data_unregister(hx);
	starpu_data_unregister(hw);
	starpu_data_unregister(hdy);
	for (int i = 0; i < 2; i++) {
		starpu_data_unregister(hy[i]);
		starpu_data_unregister(hdx[i]);
		starpu_data_unregister(hdxa[i]);
		starpu_data_unregister(hdw[i]);
		free(y[i]);
		free(dx[i]);
		free(dxa[i]);
		free(dw[i]);
	}
	free(x);
	free(w);
	free(dy);
}

int main(int argc, char **argv)
{
	test_starpu_init(&argc, &argv);
	if (starpu_cuda_worker_get_count() == 0) {
		printf("SKIP: no CUDA worker\n");
		test_starpu_shutdown();
		return TEST_SKIP;
	}
	if (starpu_cpu_worker_get_count() == 0) {
		printf("SKIP: no CPU worker to compare with\n");
		test_starpu_shutdown();
		return TEST_SKIP;
	}
	starpu_worker_get_ids_by_type(STARPU_CUDA_WORKER, &cuda_worker, 1);
	starpu_worker_get_ids_by_type(STARPU_CPU_WORKER, &cpu_worker, 1);
	test_rng_seed(99);

	/* ResNet-20 CIFAR shapes, then odd ones. */
	check_shape(conv_shape(64, 3, 32, 32, 16, 3, 3, 1, 1, 1));
	check_shape(conv_shape(64, 16, 32, 32, 16, 3, 3, 1, 1, 1));
	check_shape(conv_shape(32, 16, 32, 32, 32, 3, 3, 2, 1, 1));
	check_shape(conv_shape(32, 16, 32, 32, 32, 1, 1, 2, 0, 1));
	check_shape(conv_shape(32, 32, 16, 16, 32, 3, 3, 1, 1, 1));
	check_shape(conv_shape(16, 64, 8, 8, 64, 3, 3, 1, 1, 1));
	check_shape(conv_shape(3, 5, 37, 29, 7, 7, 7, 2, 3, 1));
	check_shape(conv_shape(2, 6, 17, 19, 5, 3, 3, 1, 2, 2));
	check_shape(conv_shape(5, 12, 13, 11, 9, 1, 1, 1, 0, 1));
	check_shape(conv_shape(1, 3, 9, 10, 4, 2, 3, 3, 2, 1));

	test_starpu_shutdown();
	return test_report("gpu_conv2d");
}
