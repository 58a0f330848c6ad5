/* gpu_embed — embed's CUDA kernels against its CPU kernels (codelets/embed.{c,cu}), the same tasks
 * pinned to a CPU and to a CUDA worker on copies of the same data:
 *   - forward y and backward dwte, dwpe (STARPU_RW onto random starting gradients) bit for bit:
 *     both add each row of dwte and dwpe in token order (embed.h), so CUDA gives the CPU's floats;
 *     shapes with every id repeated (V = 3), C above the block's 128 threads, more rows than the
 *     owner's 1024-id tile, and one GPT-2-sized chunk (8 x 1024 tokens, V = 50257, C = 768),
 *     whose backward is timed (the owner scan's cost, printed);
 *   - the backward run twice on CUDA gives the same bits (no atomics, no order from the hardware);
 *   - a bad id on CUDA: NaN in its row only, and the worker error line the CPU gives;
 *   - lm_head's GEMMs (dense without a bias) on CUDA against the CPU (DNN_CUDA_MATH=fp32).
 * 77 without a CUDA worker (gpu_util.h). */
#include <math.h>
#include <starpu.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dense.h"
#include "embed.h"
#include "gpu_util.h"
#include "test_util.h"

static float *copy_f(const float *x, size_t n)
{
	float *c = alloc_f(n);
	memcpy(c, x, n * sizeof(float));
	return c;
}

/* One embed forward and backward on `worker`, on its own copies; y, dwte, dwpe out; seconds of
 * the backward (from submission to its end) in *bwd_s. */
static void embed_on(int worker, const dnn_embed_args *a, const float *ids, const float *wte, const float *wpe,
		     const float *dy, const float *g_te, const float *g_pe, float **y, float **dwte, float **dwpe,
		     double *bwd_s)
{
	const size_t rows = (size_t)a->N * a->T, ny = rows * a->C, nte = (size_t)a->V * a->C, npe = (size_t)a->T * a->C;
	float *i2 = copy_f(ids, rows), *te = copy_f(wte, nte), *pe = copy_f(wpe, npe), *d2 = copy_f(dy, ny);
	*y = alloc_f(ny), *dwte = copy_f(g_te, nte), *dwpe = copy_f(g_pe, npe);
	fill_nan(*y, ny);
	struct starpu_data_descr f[4] = {{reg_f(i2, rows), STARPU_R}, {reg_f(te, nte), STARPU_R},
					 {reg_f(pe, npe), STARPU_R}, {reg_f(*y, ny), STARPU_W}};
	gpu_task(&cl_embed_fwd, worker, a, sizeof(*a), f, 4, "embed_fwd");
	struct starpu_data_descr b[4] = {{f[0].handle, STARPU_R}, {reg_f(d2, ny), STARPU_R},
					 {reg_f(*dwte, nte), STARPU_RW}, {reg_f(*dwpe, npe), STARPU_RW}};
	starpu_task_wait_for_all();
	/* the inputs on the worker's memory first, so the time is the kernels' */
	for (int k = 0; k < 4; k++)
		starpu_data_fetch_on_node(b[k].handle, starpu_worker_get_memory_node(worker), 0);
	starpu_task_wait_for_all();
	const double t0 = starpu_timing_now();
	gpu_task(&cl_embed_bwd, worker, a, sizeof(*a), b, 4, "embed_bwd");
	starpu_task_wait_for_all();
	*bwd_s = (starpu_timing_now() - t0) * 1e-6;
	for (int k = 0; k < 4; k++)
		starpu_data_unregister(f[k].handle);
	for (int k = 1; k < 4; k++)
		starpu_data_unregister(b[k].handle);
	free(i2), free(te), free(pe), free(d2);
}

static void check_embed(int N, int T, int V, int C)
{
	const dnn_embed_args a = {.N = N, .T = T, .V = V, .C = C};
	const size_t rows = (size_t)N * T, ny = rows * C, nte = (size_t)V * C, npe = (size_t)T * C;
	float *ids = alloc_f(rows), *wte = alloc_f(nte), *wpe = alloc_f(npe), *dy = alloc_f(ny), *gte = alloc_f(nte),
	      *gpe = alloc_f(npe);
	for (size_t r = 0; r < rows; r++) /* skewed: half the rows take one of the first 4 ids */
		ids[r] = (float)(r % 2 ? test_rng_int(0, V < 4 ? V - 1 : 3) : test_rng_int(0, V - 1));
	test_fill_uniform(wte, nte, -1, 1), test_fill_uniform(wpe, npe, -1, 1), test_fill_uniform(dy, ny, -1, 1);
	test_fill_uniform(gte, nte, -1, 1), test_fill_uniform(gpe, npe, -1, 1);
	float *y[3], *te[3], *pe[3];
	double s[3];
	embed_on(gpu_cpu_worker, &a, ids, wte, wpe, dy, gte, gpe, &y[0], &te[0], &pe[0], &s[0]);
	embed_on(gpu_cuda_worker, &a, ids, wte, wpe, dy, gte, gpe, &y[1], &te[1], &pe[1], &s[1]);
	embed_on(gpu_cuda_worker, &a, ids, wte, wpe, dy, gte, gpe, &y[2], &te[2], &pe[2], &s[2]);
	char what[160];
	snprintf(what, sizeof(what), "embed N=%d T=%d V=%d C=%d: y (cuda vs cpu, bits)", N, T, V, C);
	test_same_bits(what, y[1], y[0], ny);
	snprintf(what, sizeof(what), "embed N=%d T=%d V=%d C=%d: dwte (cuda vs cpu, bits)", N, T, V, C);
	test_same_bits(what, te[1], te[0], nte);
	snprintf(what, sizeof(what), "embed N=%d T=%d V=%d C=%d: dwpe (cuda vs cpu, bits)", N, T, V, C);
	test_same_bits(what, pe[1], pe[0], npe);
	snprintf(what, sizeof(what), "embed N=%d T=%d V=%d C=%d: dwte (cuda twice, bits)", N, T, V, C);
	test_same_bits(what, te[2], te[1], nte);
	printf("embed N=%d T=%d V=%d C=%d: %zu rows, backward %.3f ms on cuda, %.3f ms on cpu\n", N, T, V, C, rows,
	       s[1] * 1e3, s[0] * 1e3);
	for (int k = 0; k < 3; k++)
		free(y[k]), free(te[k]), free(pe[k]);
	free(ids), free(wte), free(wpe), free(dy), free(gte), free(gpe);
}

/* A bad id on CUDA: its row NaN, the others the CPU's, and the CPU's error line. */
static void check_bad_id(void)
{
	const dnn_embed_args a = {.N = 2, .T = 3, .V = 5, .C = 4};
	float ids[6] = {0, 1, 2, 3, 4, 0}, wte[20], wpe[12], y[24];
	ids[4] = 5.0f;
	test_fill_uniform(wte, 20, -1, 1), test_fill_uniform(wpe, 12, -1, 1);
	fill_nan(y, 24);
	struct starpu_data_descr f[4] = {{reg_f(ids, 6), STARPU_R}, {reg_f(wte, 20), STARPU_R}, {reg_f(wpe, 12), STARPU_R},
					 {reg_f(y, 24), STARPU_W}};
	gpu_task(&cl_embed_fwd, gpu_cuda_worker, &a, sizeof(a), f, 4, "embed_fwd");
	for (int k = 0; k < 4; k++)
		starpu_data_unregister(f[k].handle);
	char msg[512] = "";
	TEST_CHECK(dnn_worker_error_get(msg, sizeof(msg)), "a bad token id on CUDA recorded no worker error");
	TEST_CHECK(strcmp(msg, "embed: token id 5 of row 4 (sample 1, token 1) is not an integer in [0, 5)") == 0,
		   "CUDA worker error '%s'", msg);
	for (int r = 0; r < 6; r++)
		for (int c = 0; c < 4; c++) {
			const float v = y[r * 4 + c];
			TEST_CHECK(r == 4 ? isnan(v) : v == wte[(int)ids[r] * 4 + c] + wpe[(r % 3) * 4 + c],
				   "bad id on CUDA: y[%d][%d] = %g", r, c, (double)v);
		}
}

/* logits = x w^T, dx = dy w, dw += dy^T x on both workers. */
static void check_dense_nobias(int N, int IN, int OUT)
{
	const dnn_dense_args a = {.N = N, .IN = IN, .OUT = OUT};
	const size_t nx = (size_t)N * IN, ny = (size_t)N * OUT, nw = (size_t)OUT * IN;
	float *x = alloc_f(nx), *w = alloc_f(nw), *dy = alloc_f(ny), *dw0 = alloc_f(nw);
	test_fill_uniform(x, nx, -1, 1), test_fill_uniform(w, nw, -1, 1), test_fill_uniform(dy, ny, -1, 1);
	test_fill_uniform(dw0, nw, -1, 1);
	float *y[2], *dw[2];
	const int workers[2] = {gpu_cpu_worker, gpu_cuda_worker};
	for (int k = 0; k < 2; k++) {
		y[k] = alloc_f(ny), dw[k] = copy_f(dw0, nw);
		fill_nan(y[k], ny);
		struct starpu_data_descr f[3] = {{reg_f(x, nx), STARPU_R}, {reg_f(w, nw), STARPU_R}, {reg_f(y[k], ny), STARPU_W}};
		gpu_task(&cl_dense_fwd_nobias, workers[k], &a, sizeof(a), f, 3, "dense_fwd");
		struct starpu_data_descr b[3] = {{f[0].handle, STARPU_R}, {reg_f(dy, ny), STARPU_R}, {reg_f(dw[k], nw), STARPU_RW}};
		gpu_task(&cl_dense_bwd_weight_nobias, workers[k], &a, sizeof(a), b, 3, "dense_bwd_weight");
		for (int j = 0; j < 3; j++)
			starpu_data_unregister(f[j].handle);
		starpu_data_unregister(b[1].handle), starpu_data_unregister(b[2].handle);
	}
	char what[128];
	snprintf(what, sizeof(what), "dense no bias N=%d IN=%d OUT=%d: y (cuda vs cpu)", N, IN, OUT);
	test_close_mixed_f(what, y[1], y[0], ny, 1e-5);
	snprintf(what, sizeof(what), "dense no bias N=%d IN=%d OUT=%d: dw += (cuda vs cpu)", N, IN, OUT);
	test_close_mixed_f(what, dw[1], dw[0], nw, 1e-4);
	for (int k = 0; k < 2; k++)
		free(y[k]), free(dw[k]);
	free(x), free(w), free(dy), free(dw0);
}

int main(int argc, char **argv)
{
	int rc = gpu_setup(&argc, &argv, "gpu_embed", 1);
	if (rc != 0)
		return rc;
	test_rng_seed(4343);
	check_embed(1, 1, 1, 1);
	check_embed(3, 7, 3, 5);
	check_embed(4, 16, 11, 200);
	check_embed(16, 128, 97, 64);  /* 2048 rows: two tiles of the owner's walk */
	check_embed(8, 1024, 50257, 768); /* GPT-2 small, one chunk of 8 samples */
	check_bad_id();
	check_dense_nobias(1, 1, 1);
	check_dense_nobias(37, 64, 301);
	check_dense_nobias(256, 128, 1000);
	test_starpu_shutdown();
	return test_report("gpu_embed");
}
