/* gpu_chain — a forward whose outputs feed the backward, all on one CUDA worker, with no host
 * round trip in between:
 *
 *   conv+bias fwd (x, w, b -> y)  ->  batch-norm+ReLU fwd train (y -> z, saved)
 *   -> batch-norm+ReLU bwd (dz masked by z; -> dy, dgamma, dbeta)
 *   -> conv+bias bwd filter (x, dy -> dw, db)  and  conv bwd data (dy, w -> dx)
 *
 * The intermediates (y, z, saved, dy, dx) are registered with no home node (home -1,
 * starpu_vector_data_register(..., -1, 0, ...)): StarPU allocates them where the tasks run and
 * has nowhere in main RAM to keep them. Two checks make "no transfer happened" checkable:
 *   1. StarPU's bus counters (starpu_bus_get_profiling_info over every bus; StarPU counts every
 *      copy its data driver makes, whether or not profiling is on; reading a counter resets it):
 *      read (reset) just before the chain, read again after starpu_task_wait_for_all and before
 *      anything is acquired: no transfer towards main RAM, and exactly one host-to-device copy per
 *      input handle (x, w, b, gamma, beta, dz, dgamma, dbeta, dw, db), byte for byte.
 *   2. starpu_data_query_status on each intermediate: valid on the CUDA worker's memory node,
 *      neither allocated nor valid in main RAM.
 * STARPU_MINIMUM/TARGET_CLEAN_BUFFERS are set to 0 (unless set) so StarPU's memory tidying never
 * writes dirty GPU data back on its own. Then the results are acquired (those transfers happen
 * after the count) and checked against the CPU kernels called directly. Only a CUDA worker is
 * needed (the chain runs there; the references are plain function calls). Skipped (77) only
 * without a CUDA worker. */
#include <math.h>
#include <starpu.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batchnorm.h"
#include "conv2d.h"
#include "gpu_util.h"
#include "test_util.h"

typedef struct {
	int to_host_count, from_host_count, other_count;
	long long to_host_bytes, from_host_bytes, other_bytes;
} bus_totals;

/* Reads (and resets) every bus counter. */
static bus_totals bus_read(void)
{
	bus_totals t = {0};
	for (int b = 0; b < starpu_bus_get_count(); b++) {
		struct starpu_profiling_bus_info info;
		if (starpu_bus_get_profiling_info(b, &info) != 0)
			continue;
		int src = starpu_bus_get_src(b), dst = starpu_bus_get_dst(b);
		if (dst == STARPU_MAIN_RAM && src != STARPU_MAIN_RAM) {
			t.to_host_count += info.transfer_count;
			t.to_host_bytes += info.transferred_bytes;
		} else if (src == STARPU_MAIN_RAM && dst != STARPU_MAIN_RAM) {
			t.from_host_count += info.transfer_count;
			t.from_host_bytes += info.transferred_bytes;
		} else {
			t.other_count += info.transfer_count;
			t.other_bytes += info.transferred_bytes;
		}
	}
	return t;
}

static starpu_data_handle_t reg_nohome(size_t n)
{
	starpu_data_handle_t h;
	starpu_vector_data_register(&h, -1, 0, n ? n : 1, sizeof(float));
	return h;
}

/* A malloc'd host copy of an intermediate (acquiring it transfers it to main RAM). */
static float *fetch(starpu_data_handle_t h, size_t n)
{
	float *p = alloc_f(n);
	starpu_data_acquire(h, STARPU_R);
	memcpy(p, (const float *)starpu_data_get_local_ptr(h), n * sizeof(float));
	starpu_data_release(h);
	return p;
}

static void chain(int N, int C, int HW, int K)
{
	dnn_conv2d_args ca = conv_shape(N, C, HW, HW, K, 3, 3, 1, 1, 1);
	ca.bias = 1;
	if (dnn_conv2d_args_finish(&ca) != 0) {
		TEST_CHECK(0, "conv shape rejected");
		return;
	}
	size_t PQ = (size_t)ca.P * ca.Q;
	dnn_batchnorm_args ba = {.N = N, .C = K, .HW = (int)PQ, .eps = 1e-5f, .momentum = 0.1f, .relu = 1};
	size_t nx = (size_t)N * C * HW * HW, nw = (size_t)K * C * 9, ny = (size_t)N * K * PQ;
	float *x = alloc_f(nx), *w = alloc_f(nw), *b = alloc_f(K), *gamma = alloc_f(K), *beta = alloc_f(K);
	float *dz = alloc_f(ny), *dz0 = alloc_f(ny), *dg = alloc_f(K), *dbt = alloc_f(K), *dw = alloc_f(nw),
	      *db = alloc_f(K);
	test_fill_uniform(x, nx, -1, 1);
	test_fill_uniform(w, nw, -0.3f, 0.3f);
	test_fill_uniform(b, K, -0.5f, 0.5f);
	test_fill_uniform(gamma, K, 0.5f, 1.5f);
	test_fill_uniform(beta, K, -0.3f, 0.3f);
	test_fill_uniform(dz, ny, -1, 1);
	memcpy(dz0, dz, ny * sizeof(float));
	memset(dg, 0, K * sizeof(float)), memset(dbt, 0, K * sizeof(float));
	memset(dw, 0, nw * sizeof(float)), memset(db, 0, K * sizeof(float));

	starpu_data_handle_t hx = reg_f(x, nx), hw = reg_f(w, nw), hb = reg_f(b, K), hgm = reg_f(gamma, K),
			     hbt = reg_f(beta, K), hdz = reg_f(dz, ny), hdg = reg_f(dg, K), hdbt = reg_f(dbt, K),
			     hdw = reg_f(dw, nw), hdb = reg_f(db, K);
	starpu_data_handle_t hy = reg_nohome(ny), hz = reg_nohome(ny), hs = reg_nohome(3 * (size_t)K),
			     hdy = reg_nohome(ny), hdx = reg_nohome(nx);
	long long in_bytes = (long long)sizeof(float) * (long long)(nx + 2 * nw + 6 * (size_t)K + ny);
	const int in_count = 10;
	const int wk = gpu_cuda_worker;
	const unsigned node = starpu_worker_get_memory_node(wk);

	starpu_task_wait_for_all();
	(void)bus_read(); /* reset every counter */
	struct starpu_data_descr f1[] = {{hx, STARPU_R}, {hw, STARPU_R}, {hy, STARPU_W}, {hb, STARPU_R}};
	gpu_task(&cl_conv2d_fwd, wk, &ca, sizeof ca, f1, 4, "chain_conv_bias_fwd");
	struct starpu_data_descr f2[] = {{hy, STARPU_R}, {hgm, STARPU_R}, {hbt, STARPU_R}, {hz, STARPU_W}, {hs, STARPU_W}};
	gpu_task(&cl_batchnorm_fwd_train, wk, &ba, sizeof ba, f2, 5, "chain_bn_relu_fwd");
	struct starpu_data_descr b1[] = {{hy, STARPU_R},   {hgm, STARPU_R}, {hs, STARPU_R},   {hdz, STARPU_RW},
					 {hdy, STARPU_W},  {hdg, STARPU_RW}, {hdbt, STARPU_RW}, {hz, STARPU_R}};
	gpu_task(&cl_batchnorm_bwd, wk, &ba, sizeof ba, b1, 8, "chain_bn_relu_bwd");
	struct starpu_data_descr b2[] = {{hx, STARPU_R}, {hdy, STARPU_R}, {hdw, STARPU_RW}, {hdb, STARPU_RW}};
	gpu_task(&cl_conv2d_bwd_filter, wk, &ca, sizeof ca, b2, 4, "chain_conv_bias_bwd_filter");
	struct starpu_data_descr b3[] = {{hdy, STARPU_R}, {hw, STARPU_R}, {hdx, STARPU_W}};
	gpu_task(&cl_conv2d_bwd_data, wk, &ca, sizeof ca, b3, 3, "chain_conv_bwd_data");
	starpu_task_wait_for_all();
	bus_totals t = bus_read();

	printf("chain N%d C%d %dx%d K%d: to host %d copies (%lld B), from host %d copies (%lld B; inputs %d, %lld B), "
	       "other %d (%lld B)\n",
	       N, C, HW, HW, K, t.to_host_count, t.to_host_bytes, t.from_host_count, t.from_host_bytes, in_count,
	       in_bytes, t.other_count, t.other_bytes);
	if (!gpu_fake) {
		TEST_CHECK(t.to_host_count == 0 && t.to_host_bytes == 0,
			   "chain: %d device-to-host copies (%lld B) happened inside the chain", t.to_host_count,
			   t.to_host_bytes);
		TEST_CHECK(t.from_host_count == in_count && t.from_host_bytes == in_bytes,
			   "chain: %d host-to-device copies (%lld B), want one per input: %d (%lld B)",
			   t.from_host_count, t.from_host_bytes, in_count, in_bytes);
		TEST_CHECK(t.other_count == 0, "chain: %d copies between other nodes", t.other_count);
		starpu_data_handle_t mid[] = {hy, hz, hs, hdy, hdx};
		const char *mid_name[] = {"y", "z", "saved", "dy", "dx"};
		for (int i = 0; i < 5; i++) {
			int alloc = -1, valid = -1, req = -1;
			starpu_data_query_status(mid[i], STARPU_MAIN_RAM, &alloc, &valid, &req);
			TEST_CHECK(!alloc && !valid, "chain: intermediate %s has a main-RAM copy (allocated %d, valid %d)",
				   mid_name[i], alloc, valid);
			starpu_data_query_status(mid[i], (int)node, &alloc, &valid, &req);
			TEST_CHECK(valid, "chain: intermediate %s is not valid on the CUDA node %u", mid_name[i], node);
		}
	}

	/* The values: fetch the intermediates (transfers now, after the count), then references. */
	float *y = fetch(hy, ny), *z = fetch(hz, ny), *s = fetch(hs, 3 * (size_t)K), *dy = fetch(hdy, ny),
	      *dx = fetch(hdx, nx);
	starpu_data_handle_t all[] = {hx, hw, hb, hgm, hbt, hdz, hdg, hdbt, hdw, hdb, hy, hz, hs, hdy, hdx};
	for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
		starpu_data_unregister(all[i]);

	float *ry = alloc_f(ny), *rz = alloc_f(ny), *rs = alloc_f(3 * (size_t)K), *rdy = alloc_f(ny),
	      *rdx = alloc_f(nx), *rdw = alloc_f(nw), *rdb = alloc_f(K), *rdg = alloc_f(K), *rdbt = alloc_f(K);
	dnn_conv2d_forward_cpu(ry, x, w, &ca);
	for (int n = 0; n < N; n++)
		for (int k = 0; k < K; k++)
			for (size_t i = 0; i < PQ; i++)
				ry[((size_t)n * K + k) * PQ + i] += b[k];
	dnn_batchnorm_forward_train_cpu(rz, rs, ry, gamma, beta, &ba);
	memset(rdg, 0, K * sizeof(float)), memset(rdbt, 0, K * sizeof(float));
	dnn_batchnorm_relu_backward_cpu(rdy, rdg, rdbt, ry, gamma, rs, dz0, rz, &ba);
	memset(rdw, 0, nw * sizeof(float));
	dnn_conv2d_backward_filter_cpu(rdw, x, rdy, &ca);
	for (int k = 0; k < K; k++) {
		double acc = 0;
		for (int n = 0; n < N; n++)
			for (size_t i = 0; i < PQ; i++)
				acc += rdy[((size_t)n * K + k) * PQ + i];
		rdb[k] = (float)acc;
	}
	dnn_conv2d_args cd = ca;
	cd.bias = 0;
	cd.accumulate_dx = 0;
	dnn_conv2d_backward_data_cpu(rdx, rdy, w, &cd);

	const char *math = getenv("DNN_CUDA_MATH");
	double tol = math && strcmp(math, "fp32") != 0 ? 5e-3 : 2e-4;
	gpu_close_scaled("chain conv+bias fwd y", y, ry, ny, tol);
	gpu_close_scaled("chain bn+relu z", z, rz, ny, 2 * tol);
	gpu_close_scaled("chain bn saved", s, rs, 3 * (size_t)K, 2 * tol);
	gpu_close_scaled("chain bn+relu bwd dy", dy, rdy, ny, 5 * tol);
	gpu_close_scaled("chain bn dgamma", dg, rdg, K, 5 * tol);
	gpu_close_scaled("chain bn dbeta", dbt, rdbt, K, 5 * tol);
	gpu_close_scaled("chain conv dw", dw, rdw, nw, 10 * tol);
	gpu_close_scaled("chain conv db", db, rdb, K, 5 * tol);
	gpu_close_scaled("chain conv dx", dx, rdx, nx, 10 * tol);
	free(x), free(w), free(b), free(gamma), free(beta), free(dz), free(dz0), free(dg), free(dbt), free(dw),
		free(db);
	free(y), free(z), free(s), free(dy), free(dx);
	free(ry), free(rz), free(rs), free(rdy), free(rdx), free(rdw), free(rdb), free(rdg), free(rdbt);
}

int main(int argc, char **argv)
{
	setenv("STARPU_MINIMUM_CLEAN_BUFFERS", "0", 0);
	setenv("STARPU_TARGET_CLEAN_BUFFERS", "0", 0);
	int rc = gpu_setup(&argc, &argv, "gpu_chain", 0);
	if (rc != 0)
		return rc;
	test_rng_seed(7);
	chain(4, 3, 12, 8);
	chain(16, 16, 16, 32);
	chain(32, 64, 14, 64);
	test_starpu_shutdown();
	return test_report("gpu_chain");
}
