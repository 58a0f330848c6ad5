/* unit_embed — the kernels under embed and lm_head (codelets/embed.h, dense.h without a bias),
 * run as StarPU tasks on registered vector handles, against naive double-precision references:
 *   - embed forward y = wte[id] + wpe[t], backward dwte/dwpe += onto random starting values,
 *     on shapes with many repeated ids (V small against N*T), T = 1, N = 1, V = 1;
 *   - the backward's fixed order: its floats equal a plain float loop in token order, bit for
 *     bit, whichever STARPU_REDUX or STARPU_RW access the gradients come with;
 *   - bad ids (-1, V, 2.5, NaN, inf): the kernel names the first bad row and writes NaN in it
 *     (other rows exact), the backward skips them, and the codelet records one worker error
 *     "embed: token id ... is not an integer in [0, V)" (the run's error line), no crash;
 *   - dense without a bias (lm_head: logits = x wte^T, dx = dlogits wte, dwte += dlogits^T x). */
#include <math.h>
#include <starpu.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dense.h"
#include "embed.h"
#include "test_util.h"
#include "vec.h"

static float *copy_f(const float *x, size_t n)
{
	float *c = alloc_f(n);
	memcpy(c, x, n * sizeof(float));
	return c;
}

static float *random_ids(size_t n, int V)
{
	float *ids = alloc_f(n);
	for (size_t i = 0; i < n; i++)
		ids[i] = (float)test_rng_int(0, V - 1);
	return ids;
}

static void check_embed(int N, int T, int V, int C, int mode)
{
	const dnn_embed_args a = {.N = N, .T = T, .V = V, .C = C};
	const size_t rows = (size_t)N * T, ny = rows * C, nte = (size_t)V * C, npe = (size_t)T * C;
	float *ids = random_ids(rows, V), *wte = alloc_f(nte), *wpe = alloc_f(npe), *y = alloc_f(ny), *dy = alloc_f(ny);
	float *dwte = alloc_f(nte), *dwpe = alloc_f(npe);
	test_fill_uniform(wte, nte, -1, 1), test_fill_uniform(wpe, npe, -1, 1), test_fill_uniform(dy, ny, -1, 1);
	test_fill_uniform(dwte, nte, -1, 1), test_fill_uniform(dwpe, npe, -1, 1);
	fill_nan(y, ny);
	double *ry = alloc_d(ny), *rte = to_double(dwte, nte), *rpe = to_double(dwpe, npe);
	/* In float, token order: onto the gradient (RW), or onto StarPU's zeroed per-worker copy that
	 * its reduction then adds to the gradient (REDUX, one task: one copy). */
	float *fte = alloc_f(nte), *fpe = alloc_f(npe);
	for (size_t i = 0; i < nte; i++)
		fte[i] = mode == STARPU_RW ? dwte[i] : 0.0f;
	for (size_t i = 0; i < npe; i++)
		fpe[i] = mode == STARPU_RW ? dwpe[i] : 0.0f;
	for (size_t r = 0; r < rows; r++) {
		const size_t id = (size_t)ids[r], t = r % T;
		for (int c = 0; c < C; c++) {
			ry[r * C + c] = (double)wte[id * C + c] + wpe[t * C + c];
			rte[id * C + c] += dy[r * C + c], rpe[t * C + c] += dy[r * C + c];
			fte[id * C + c] += dy[r * C + c], fpe[t * C + c] += dy[r * C + c];
		}
	}
	for (size_t i = 0; mode != STARPU_RW && i < nte; i++)
		fte[i] = dwte[i] + fte[i];
	for (size_t i = 0; mode != STARPU_RW && i < npe; i++)
		fpe[i] = dwpe[i] + fpe[i];
	starpu_data_handle_t hi = reg_f(ids, rows), hte = reg_f(wte, nte), hpe = reg_f(wpe, npe), hy = reg_f(y, ny),
			     hdy = reg_f(dy, ny), hdte = reg_f(dwte, nte), hdpe = reg_f(dwpe, npe);
	dnn_vec_set_sum_redux(hdte), dnn_vec_set_sum_redux(hdpe);
	TEST_CHECK(dnn_insert_embed_fwd(NULL, &a, hi, hte, hpe, hy) == 0, "embed_fwd insert");
	TEST_CHECK(dnn_insert_embed_bwd(NULL, &a, hi, hdy, hdte, hdpe, mode) == 0, "embed_bwd insert");
	starpu_data_handle_t hs[] = {hi, hte, hpe, hy, hdy, hdte, hdpe};
	for (size_t k = 0; k < sizeof(hs) / sizeof(hs[0]); k++)
		starpu_data_unregister(hs[k]);
	char what[128];
	snprintf(what, sizeof(what), "embed N=%d T=%d V=%d C=%d: y", N, T, V, C);
	test_close_mixed(what, y, ry, ny, 1e-6);
	snprintf(what, sizeof(what), "embed N=%d T=%d V=%d C=%d %s: dwte", N, T, V, C, mode == STARPU_RW ? "RW" : "REDUX");
	test_close_mixed(what, dwte, rte, nte, 1e-5);
	snprintf(what, sizeof(what), "embed N=%d T=%d V=%d C=%d %s: dwte in token order (bits)", N, T, V, C,
		 mode == STARPU_RW ? "RW" : "REDUX");
	test_same_bits(what, dwte, fte, nte);
	snprintf(what, sizeof(what), "embed N=%d T=%d V=%d C=%d: dwpe", N, T, V, C);
	test_close_mixed(what, dwpe, rpe, npe, 1e-5);
	snprintf(what, sizeof(what), "embed N=%d T=%d V=%d C=%d %s: dwpe in token order (bits)", N, T, V, C,
		 mode == STARPU_RW ? "RW" : "REDUX");
	test_same_bits(what, dwpe, fpe, npe);
	free(ids), free(wte), free(wpe), free(y), free(dy), free(dwte), free(dwpe), free(ry), free(rte), free(rpe);
	free(fte), free(fpe);
}

/* Bad ids straight through the kernels: the first bad row, NaN rows, the rest exact. */
static void check_bad_ids_kernel(void)
{
	const int N = 2, T = 3, V = 4, C = 2;
	const dnn_embed_args a = {.N = N, .T = T, .V = V, .C = C};
	const float bads[] = {-1.0f, (float)V, 2.5f, NAN, INFINITY, -0.5f, 1e30f};
	float wte[8], wpe[6], y[12], dy[12], dwte[8] = {0}, dwpe[6] = {0};
	test_fill_uniform(wte, 8, -1, 1), test_fill_uniform(wpe, 6, -1, 1), test_fill_uniform(dy, 12, -1, 1);
	for (size_t b = 0; b < sizeof(bads) / sizeof(bads[0]); b++) {
		float ids[6] = {0, 1, 2, 3, 1, 0};
		ids[4] = bads[b];
		long bad = dnn_embed_forward_cpu(y, ids, wte, wpe, &a);
		TEST_CHECK(bad == 4, "bad id %g: the kernel names row %ld, want 4", (double)bads[b], bad);
		for (int r = 0; r < N * T; r++)
			for (int c = 0; c < C; c++) {
				const float want = r == 4 ? NAN : wte[(int)ids[r] * C + c] + wpe[(r % T) * C + c];
				TEST_CHECK(r == 4 ? isnan(y[r * C + c]) : y[r * C + c] == want, "bad id %g: y[%d][%d] = %g, want %g",
					   (double)bads[b], r, c, (double)y[r * C + c], (double)want);
			}
		memset(dwte, 0, sizeof(dwte)), memset(dwpe, 0, sizeof(dwpe));
		dnn_embed_backward_cpu(dwte, dwpe, ids, dy, &a);
		for (int v = 0; v < V; v++)
			for (int c = 0; c < C; c++) {
				float want = 0.0f;
				for (int r = 0; r < N * T; r++)
					if (r != 4 && (int)ids[r] == v)
						want += dy[r * C + c];
				TEST_CHECK(dwte[v * C + c] == want, "bad id %g: dwte[%d][%d] = %g, want %g (the bad row skipped)",
					   (double)bads[b], v, c, (double)dwte[v * C + c], (double)want);
			}
		TEST_CHECK(dwpe[1 * C] == dy[1 * C] + dy[4 * C], "bad id %g: dwpe still takes the bad row's dy",
			   (double)bads[b]);
	}
	float ok[6] = {0, 1, 2, 3, 3, 0};
	TEST_CHECK(dnn_embed_forward_cpu(y, ok, wte, wpe, &a) == -1, "good ids reported bad");
}

/* The codelet turns a bad id into the one worker error; the process goes on. */
static void check_bad_ids_task(void)
{
	const dnn_embed_args a = {.N = 1, .T = 4, .V = 5, .C = 3};
	float ids[4] = {1, 4, 7, 0}, wte[15], wpe[12], y[12];
	test_fill_uniform(wte, 15, -1, 1), test_fill_uniform(wpe, 12, -1, 1);
	starpu_data_handle_t hi = reg_f(ids, 4), hte = reg_f(wte, 15), hpe = reg_f(wpe, 12), hy = reg_f(y, 12);
	TEST_CHECK(dnn_insert_embed_fwd(NULL, &a, hi, hte, hpe, hy) == 0, "embed_fwd insert");
	starpu_data_unregister(hi), starpu_data_unregister(hte), starpu_data_unregister(hpe), starpu_data_unregister(hy);
	char msg[512] = "";
	TEST_CHECK(dnn_worker_error_get(msg, sizeof(msg)), "a bad token id recorded no worker error");
	TEST_CHECK(strcmp(msg, "embed: token id 7 of row 2 (sample 0, token 2) is not an integer in [0, 5)") == 0,
		   "worker error '%s'", msg);
	TEST_CHECK(isnan(y[6]) && !isnan(y[3]) && !isnan(y[9]), "the bad row is not NaN, or another row is");
}

/* lm_head's products through dense without a bias: y (n,V) = x (n,C) w^T, dx = dy w, dw += dy^T x. */
static void check_dense_nobias(int N, int IN, int OUT)
{
	const dnn_dense_args a = {.N = N, .IN = IN, .OUT = OUT};
	const size_t nx = (size_t)N * IN, ny = (size_t)N * OUT, nw = (size_t)OUT * IN;
	float *x = alloc_f(nx), *w = alloc_f(nw), *y = alloc_f(ny), *dy = alloc_f(ny), *dx = alloc_f(nx), *dw = alloc_f(nw);
	test_fill_uniform(x, nx, -1, 1), test_fill_uniform(w, nw, -1, 1), test_fill_uniform(dy, ny, -1, 1);
	test_fill_uniform(dw, nw, -1, 1), fill_nan(y, ny), fill_nan(dx, nx);
	double *ry = alloc_d(ny), *rdx = alloc_d(nx), *rdw = to_double(dw, nw);
	for (int n = 0; n < N; n++)
		for (int o = 0; o < OUT; o++)
			for (int i = 0; i < IN; i++) {
				ry[(size_t)n * OUT + o] += (double)x[(size_t)n * IN + i] * w[(size_t)o * IN + i];
				rdx[(size_t)n * IN + i] += (double)dy[(size_t)n * OUT + o] * w[(size_t)o * IN + i];
				rdw[(size_t)o * IN + i] += (double)dy[(size_t)n * OUT + o] * x[(size_t)n * IN + i];
			}
	starpu_data_handle_t hx = reg_f(x, nx), hw = reg_f(w, nw), hy = reg_f(y, ny), hdy = reg_f(dy, ny),
			     hdx = reg_f(dx, nx), hdw = reg_f(dw, nw);
	dnn_vec_set_sum_redux(hdw);
	TEST_CHECK(dnn_insert_dense_fwd(NULL, &a, hx, hw, NULL, hy) == 0, "dense_fwd (no bias) insert");
	TEST_CHECK(dnn_insert_dense_bwd_data(NULL, &a, hdy, hw, hdx) == 0, "dense_bwd_data insert");
	TEST_CHECK(dnn_insert_dense_bwd_weight(NULL, &a, hx, hdy, hdw, NULL, STARPU_REDUX) == 0,
		   "dense_bwd_weight (no bias) insert");
	starpu_data_handle_t hs[] = {hx, hw, hy, hdy, hdx, hdw};
	for (size_t k = 0; k < sizeof(hs) / sizeof(hs[0]); k++)
		starpu_data_unregister(hs[k]);
	char what[128];
	snprintf(what, sizeof(what), "dense no bias N=%d IN=%d OUT=%d: y", N, IN, OUT);
	test_close_mixed(what, y, ry, ny, 1e-5);
	snprintf(what, sizeof(what), "dense no bias N=%d IN=%d OUT=%d: dx", N, IN, OUT);
	test_close_mixed(what, dx, rdx, nx, 1e-5);
	snprintf(what, sizeof(what), "dense no bias N=%d IN=%d OUT=%d: dw +=", N, IN, OUT);
	test_close_mixed(what, dw, rdw, nw, 1e-5);
	free(x), free(w), free(y), free(dy), free(dx), free(dw), free(ry), free(rdx), free(rdw);
}

int main(int argc, char **argv)
{
	test_starpu_init(&argc, &argv);
	test_rng_seed(43);
	static const int shapes[][4] = {{1, 1, 1, 1}, {1, 5, 3, 4}, {3, 7, 2, 5}, {4, 16, 11, 33}, {2, 1, 50, 8},
					{5, 9, 1, 3}, {8, 32, 97, 64}};
	for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++)
		for (int m = 0; m < 2; m++)
			check_embed(shapes[s][0], shapes[s][1], shapes[s][2], shapes[s][3], m ? STARPU_RW : STARPU_REDUX);
	check_bad_ids_kernel();
	check_bad_ids_task();
	static const int dshapes[][3] = {{1, 1, 1}, {6, 8, 13}, {35, 16, 50}, {64, 33, 7}};
	for (size_t s = 0; s < sizeof(dshapes) / sizeof(dshapes[0]); s++)
		check_dense_nobias(dshapes[s][0], dshapes[s][1], dshapes[s][2]);
	test_starpu_shutdown();
	return test_report("unit_embed");
}
