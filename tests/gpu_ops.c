/* gpu_ops — every codelet of bias, relu, add, softmax_xent (ties, one class) and sgd runs once on a
 * CPU worker and once on a CUDA worker (STARPU_EXECUTE_ON_WORKER) from the same inputs; the
 * outputs must agree. Then dense bwd_weight tasks spread over both kinds of worker accumulate into
 * one STARPU_REDUX gradient, which must equal the CPU sum. Skips (77) without a CUDA worker.
 * dense and avgpool (and relu, add, softmax_xent through their descriptors) are the op harness's
 * (tests/op_cases.c). */
#include <math.h>
#include <starpu.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "add.h"
#include "avgpool.h"
#include "bias.h"
#include "dense.h"
#include "vec.h"
#include "relu.h"
#include "optim.h"
#include "softmax_xent.h"
#include "test_util.h"

#define TOL 1e-4
#define MAXBUF 4

static int cpu_worker = -1, cuda_worker = -1;

/* One buffer of a task: host data (copied per run), its length, element size and access mode. */
typedef struct {
	void *data;
	size_t n, elemsize;
	enum starpu_data_access_mode mode;
} buf_t;

/* Runs cl once on `worker` over private copies of bufs (same initial content for every run);
 * out[i] receives a malloc'd copy of buffer i afterwards. */
static void run_on(struct starpu_codelet *cl, const void *args, size_t args_size, buf_t *bufs, int nbuf,
		   int worker, void *out[MAXBUF])
{
	struct starpu_data_descr descr[MAXBUF];
	for (int i = 0; i < nbuf; i++) {
		size_t bytes = bufs[i].n * bufs[i].elemsize;
		out[i] = malloc(bytes);
		memcpy(out[i], bufs[i].data, bytes);
		starpu_vector_data_register(&descr[i].handle, STARPU_MAIN_RAM, (uintptr_t)out[i], bufs[i].n,
					    bufs[i].elemsize);
		descr[i].mode = bufs[i].mode;
	}
	if (test_task(cl, worker, args, args_size, descr, nbuf, cl->name) != 0)
		exit(1); /* test_task said why */
	for (int i = 0; i < nbuf; i++)
		starpu_data_unregister(descr[i].handle);
}

/* Runs on the CPU and the CUDA worker and compares the buffers the task writes. */
static void compare_cpu_cuda(const char *what, struct starpu_codelet *cl, const void *args, size_t args_size,
			     buf_t *bufs, int nbuf)
{
	void *cpu[MAXBUF], *gpu[MAXBUF];
	run_on(cl, args, args_size, bufs, nbuf, cpu_worker, cpu);
	run_on(cl, args, args_size, bufs, nbuf, cuda_worker, gpu);
	for (int i = 0; i < nbuf; i++) {
		if (bufs[i].mode != STARPU_R) {
			STARPU_ASSERT(bufs[i].elemsize == sizeof(float));
			char name[96];
			snprintf(name, sizeof(name), "%s buffer %d (cuda vs cpu)", what, i);
			test_close_mixed_f(name, gpu[i], cpu[i], bufs[i].n, TOL);
		}
		free(cpu[i]);
		free(gpu[i]);
	}
}

static float *rand_f(size_t n, float lo, float hi)
{
	float *p = malloc((n ? n : 1) * sizeof(float));
	test_fill_uniform(p, n, lo, hi);
	return p;
}

static buf_t fb(float *p, size_t n, enum starpu_data_access_mode mode)
{
	return (buf_t){p, n, sizeof(float), mode};
}

static void check_nchw(int N, int C, int HW)
{
	size_t n = (size_t)N * C * HW, nc = (size_t)N * C;
	float *x = rand_f(n, -1, 1), *b = rand_f(C, -1, 1), *db = rand_f(C, -1, 1), *y = rand_f(nc, -1, 1);
	char what[64];
	dnn_bias_args ba = {.N = N, .C = C, .HW = HW};
	buf_t bias_fwd[] = {fb(x, n, STARPU_RW), fb(b, C, STARPU_R)};
	buf_t bias_bwd[] = {fb(x, n, STARPU_R), fb(db, C, STARPU_RW)};
	snprintf(what, sizeof(what), "bias_fwd N=%d C=%d HW=%d", N, C, HW);
	compare_cpu_cuda(what, &cl_bias_fwd, &ba, sizeof(ba), bias_fwd, 2);
	snprintf(what, sizeof(what), "bias_bwd N=%d C=%d HW=%d", N, C, HW);
	compare_cpu_cuda(what, &cl_bias_bwd, &ba, sizeof(ba), bias_bwd, 2);
	free(x), free(b), free(db), free(y);
}

static void check_eltwise(long n)
{
	float *x = rand_f(n, -1, 1), *x1 = rand_f(n, -1, 1), *y = rand_f(n, -1, 1), *dx = rand_f(n, -1, 1);
	for (long i = 0; i < n; i += 5)
		x[i] = 0.0f;
	char what[64];
	for (int acc = 0; acc < 2; acc++) {
		dnn_relu_args ra = {.n = n, .accumulate_dx = acc};
		dnn_add_args aa = {.n = n, .accumulate_dx = acc};
		buf_t relu_fwd[] = {fb(x, n, STARPU_R), fb(y, n, STARPU_W)};
		buf_t relu_bwd[] = {fb(x, n, STARPU_R), fb(x1, n, STARPU_R), fb(dx, n, acc ? STARPU_RW : STARPU_W)};
		buf_t add_fwd[] = {fb(x, n, STARPU_R), fb(x1, n, STARPU_R), fb(y, n, STARPU_W)};
		buf_t add_bwd[] = {fb(x1, n, STARPU_R), fb(dx, n, acc ? STARPU_RW : STARPU_W)};
		snprintf(what, sizeof(what), "relu n=%ld acc=%d", n, acc);
		compare_cpu_cuda(what, &cl_relu_fwd, &ra, sizeof(ra), relu_fwd, 2);
		compare_cpu_cuda(what, &cl_relu_bwd, &ra, sizeof(ra), relu_bwd, 3);
		snprintf(what, sizeof(what), "add n=%ld acc=%d", n, acc);
		compare_cpu_cuda(what, &cl_add_fwd, &aa, sizeof(aa), add_fwd, 3);
		compare_cpu_cuda(what, &cl_add_bwd, &aa, sizeof(aa), add_bwd, 2);
	}

	dnn_optim_args sa = {.n = n, .lr = 0.05f, .momentum = 0.9f, .weight_decay = 1e-3f, .scale = 0.25f};
	buf_t sgd[] = {fb(x, n, STARPU_RW), fb(x1, n, STARPU_RW), fb(dx, n, STARPU_RW)};
	snprintf(what, sizeof(what), "sgd n=%ld", n);
	compare_cpu_cuda(what, &cl_optim_update, &sa, sizeof(sa), sgd, 3);
	float alpha = -1.5f;
	buf_t axpy[] = {fb(x, n, STARPU_RW), fb(x1, n, STARPU_R)};
	snprintf(what, sizeof(what), "vec_axpy n=%ld", n);
	compare_cpu_cuda(what, &cl_vec_axpy, &alpha, sizeof(alpha), axpy, 2);
	free(x), free(x1), free(y), free(dx);
}

static void check_softmax_xent(int N, int CLS, float offset)
{
	size_t n = (size_t)N * CLS;
	float *logits = rand_f(n, -4, 4), *dl = rand_f(n, -1, 1), stats[2] = {NAN, NAN};
	for (size_t i = 0; i < n; i++)
		logits[i] += offset;
	if (CLS > 2) /* a tie in the first row */
		logits[1] = logits[2] = 10 + offset;
	int32_t *labels = malloc(N * sizeof(int32_t));
	for (int i = 0; i < N; i++)
		labels[i] = test_rng_int(0, CLS - 1);
	if (CLS > 2)
		labels[0] = 1;
	dnn_softmax_xent_args a = {.N = N, .CLS = CLS, .T = 1};
	buf_t bufs[] = {fb(logits, n, STARPU_R), {labels, N, sizeof(int32_t), STARPU_R}, fb(dl, n, STARPU_W),
			fb(stats, 2, STARPU_W)};
	char what[64];
	snprintf(what, sizeof(what), "softmax_xent N=%d CLS=%d offset=%g", N, CLS, (double)offset);
	compare_cpu_cuda(what, &cl_softmax_xent, &a, sizeof(a), bufs, 4);
	free(logits), free(dl), free(labels);
}

/* bwd_weight tasks alternating between the CPU and the CUDA worker, into one REDUX dw/db. */
static void check_mixed_redux(int K, int N, int IN, int OUT)
{
	size_t nx = (size_t)N * IN, nw = (size_t)OUT * IN, ny = (size_t)N * OUT;
	float *x = rand_f(K * nx, -1, 1), *dy = rand_f(K * ny, -1, 1), *dw = rand_f(nw, -1, 1),
	      *db = rand_f(OUT, -1, 1);
	float *ref_w = malloc(nw * sizeof(float)), *ref_b = malloc(OUT * sizeof(float));
	memcpy(ref_w, dw, nw * sizeof(float));
	memcpy(ref_b, db, OUT * sizeof(float));
	dnn_dense_args a = {.N = N, .IN = IN, .OUT = OUT, .accumulate_dx = 0};
	for (int k = 0; k < K; k++)
		dnn_dense_backward_weight_cpu(ref_w, ref_b, x + k * nx, dy + k * ny, &a);

	starpu_data_handle_t hdw, hdb, *hx = malloc(K * sizeof(*hx)), *hdy = malloc(K * sizeof(*hdy));
	starpu_vector_data_register(&hdw, STARPU_MAIN_RAM, (uintptr_t)dw, nw, sizeof(float));
	starpu_vector_data_register(&hdb, STARPU_MAIN_RAM, (uintptr_t)db, OUT, sizeof(float));
	dnn_vec_set_sum_redux(hdw);
	dnn_vec_set_sum_redux(hdb);
	for (int k = 0; k < K; k++) {
		starpu_vector_data_register(&hx[k], STARPU_MAIN_RAM, (uintptr_t)(x + k * nx), nx, sizeof(float));
		starpu_vector_data_register(&hdy[k], STARPU_MAIN_RAM, (uintptr_t)(dy + k * ny), ny, sizeof(float));
		dnn_dense_args *arg = malloc(sizeof(*arg));
		*arg = a;
		int rc = starpu_task_insert(&cl_dense_bwd_weight, STARPU_R, hx[k], STARPU_R, hdy[k], STARPU_REDUX, hdw,
					    STARPU_REDUX, hdb, STARPU_CL_ARGS, arg, sizeof(*arg),
					    STARPU_EXECUTE_ON_WORKER, k % 2 ? cuda_worker : cpu_worker,
					    STARPU_NAME, "dense_bwd_weight", 0);
		if (rc != 0) {
			fprintf(stderr, "starpu_task_insert failed: %d\n", rc);
			exit(1);
		}
	}
	for (int k = 0; k < K; k++) {
		starpu_data_unregister(hx[k]);
		starpu_data_unregister(hdy[k]);
	}
	starpu_data_unregister(hdw);
	starpu_data_unregister(hdb);
	test_close_mixed_f("mixed cpu/cuda redux dw", dw, ref_w, nw, TOL);
	test_close_mixed_f("mixed cpu/cuda redux db", db, ref_b, OUT, TOL);
	free(x), free(dy), free(dw), free(db), free(ref_w), free(ref_b), free(hx), free(hdy);
}

int main(int argc, char **argv)
{
	test_starpu_init(&argc, &argv);
#ifndef DNN_HAVE_CUDA
	printf("SKIP: built without CUDA\n");
	test_starpu_shutdown();
	return TEST_SKIP;
#endif
	if (starpu_cuda_worker_get_count() == 0 || starpu_cpu_worker_get_count() == 0) {
		printf("SKIP: gpu_ops needs a CUDA worker and a CPU worker (cuda %u, cpu %u)\n",
		       starpu_cuda_worker_get_count(), starpu_cpu_worker_get_count());
		test_starpu_shutdown();
		return TEST_SKIP;
	}
	unsigned ncpu = starpu_worker_get_ids_by_type(STARPU_CPU_WORKER, &cpu_worker, 1);
	unsigned ncuda = starpu_worker_get_ids_by_type(STARPU_CUDA_WORKER, &cuda_worker, 1);
	if (ncpu != 1 || ncuda != 1) {
		fprintf(stderr, "gpu_ops: could not find the worker ids\n");
		return 1;
	}
	printf("gpu_ops: cpu worker %d, cuda worker %d\n", cpu_worker, cuda_worker);
	test_rng_seed(777);

	const int nchw_shapes[][3] = {{1, 1, 1}, {1, 3, 5}, {3, 7, 9}, {8, 64, 49}, {4, 300, 1}, {2, 3, 1000}};
	for (size_t i = 0; i < sizeof(nchw_shapes) / sizeof(nchw_shapes[0]); i++)
		check_nchw(nchw_shapes[i][0], nchw_shapes[i][1], nchw_shapes[i][2]);

	const long lens[] = {1, 7, 1001, 100003};
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++)
		check_eltwise(lens[i]);

	check_softmax_xent(1, 1, 0);
	check_softmax_xent(1, 10, 0);
	check_softmax_xent(7, 3, 0);
	check_softmax_xent(33, 1000, 0);
	check_softmax_xent(64, 10, 1000);

	check_mixed_redux(16, 8, 33, 10);

	test_starpu_shutdown();
	return test_report("gpu_ops");
}
