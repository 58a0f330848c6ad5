/* gpu_sgd_grad — the update and gradient-plumbing codelets that gpu_ops.c does not cover, on a
 * CUDA worker against a CPU worker from the same inputs (STARPU_EXECUTE_ON_WORKER):
 *   - optim_update with keep_grad (grad read-only, STARPU_R: two steps on the same worker, so the
 *     second step sees the device's copy of grad: it must be intact) and with write_delta (the
 *     async mode's 4th buffer, delta = -lr * v), alone and together;
 *   - vec_slice_get / vec_slice_put (the ring all-reduce's slices), at aligned and odd offsets;
 *   - vec_add (dst += src, modes RW and RW|COMMUTE) and vec_axpy (dst += alpha * src).
 * Copies and additions must match exactly; the SGD and axpy results within 1e-6 (the CUDA
 * compiler contracts a*b+c into one FMA, the CPU build does not). Skipped (77) only without a
 * CUDA or a CPU worker. */
#include <math.h>
#include <starpu.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vec.h"
#include "gpu_util.h"
#include "optim.h"
#include "test_util.h"

enum { GPU = 0, CPU = 1, NDEV = 2 };
static int workers[NDEV];
static const char *dev_name[NDEV] = {"cuda", "cpu"};

/* ------------------------------------------------------------------ sgd */

static void test_sgd(long n, int keep_grad, int write_delta)
{
	dnn_optim_args a = {.n = n, .lr = 0.05f, .momentum = 0.9f, .weight_decay = 5e-4f, .scale = 1.0f / 64,
			  .keep_grad = keep_grad, .write_delta = write_delta};
	float *w0 = alloc_f(n), *v0 = alloc_f(n), *g0 = alloc_f(n);
	test_fill_uniform(w0, n, -1, 1);
	test_fill_uniform(v0, n, -0.1f, 0.1f);
	test_fill_uniform(g0, n, -30, 30);
	float *w[NDEV], *v[NDEV], *g[NDEV], *dl[NDEV];
	for (int d = 0; d < NDEV; d++) {
		w[d] = gpu_copy_f(w0, n), v[d] = gpu_copy_f(v0, n), g[d] = gpu_copy_f(g0, n), dl[d] = alloc_f(n);
		fill_nan(dl[d], n);
		starpu_data_handle_t hw = reg_f(w[d], n), hv = reg_f(v[d], n), hg = reg_f(g[d], n), hd = reg_f(dl[d], n);
		struct starpu_data_descr desc[] = {{hw, STARPU_RW},
						   {hv, STARPU_RW},
						   {hg, keep_grad ? STARPU_R : STARPU_RW},
						   {hd, STARPU_W}};
		/* two steps on the same worker: the second reads the device's grad after the first */
		for (int step = 0; step < 2; step++)
			gpu_task(&cl_optim_update, workers[d], &a, sizeof a, desc, write_delta ? 4 : 3, "optim_update");
		starpu_data_unregister(hw), starpu_data_unregister(hv), starpu_data_unregister(hg),
			starpu_data_unregister(hd);
	}
	/* Reference: the plain kernel, twice. */
	float *rw = gpu_copy_f(w0, n), *rv = gpu_copy_f(v0, n), *rg = gpu_copy_f(g0, n), *rd = alloc_f(n);
	for (int step = 0; step < 2; step++)
		dnn_optim_update_delta_cpu(rw, rv, rg, write_delta ? rd : NULL, &a);
	char what[128];
	for (int d = 0; d < NDEV; d++) {
#define CMP(name, got, want, tol)                                                                          \
	do {                                                                                               \
		snprintf(what, sizeof what, "sgd n=%ld keep_grad=%d write_delta=%d %s: %s", n, keep_grad, write_delta, \
			 dev_name[d], name);                                                               \
		test_close_mixed_f(what, got, want, n, tol);                                                      \
	} while (0)
		CMP("w", w[d], rw, 1e-6);
		CMP("v", v[d], rv, 1e-6);
		CMP("grad (kept, or zeroed)", g[d], rg, 0);
		if (write_delta)
			CMP("delta", dl[d], rd, 1e-6);
#undef CMP
	}
	if (keep_grad) /* the reference itself: grad kept means both steps used it */
		test_close_mixed_f("sgd keep_grad: grad untouched", rg, g0, n, 0);
	free(w0), free(v0), free(g0), free(rw), free(rv), free(rg), free(rd);
	for (int d = 0; d < NDEV; d++)
		free(w[d]), free(v[d]), free(g[d]), free(dl[d]);
}

/* ------------------------------------------------------------------ slices */

static void test_slices(size_t n, size_t len, const size_t *offs, int noff)
{
	float *full = alloc_f(n), *dst0 = alloc_f(n);
	test_fill_uniform(full, n, -1, 1);
	test_fill_uniform(dst0, n, -1, 1);
	float *chunk[NDEV][8], *dst[NDEV];
	STARPU_ASSERT(noff <= 8);
	for (int d = 0; d < NDEV; d++) {
		dst[d] = gpu_copy_f(dst0, n);
		starpu_data_handle_t hf = reg_f(full, n), hdst = reg_f(dst[d], n), hc[8];
		for (int k = 0; k < noff; k++) {
			chunk[d][k] = alloc_f(len);
			fill_nan(chunk[d][k], len);
			hc[k] = reg_f(chunk[d][k], len);
			struct starpu_data_descr get[] = {{hc[k], STARPU_W}, {hf, STARPU_R}};
			gpu_task(&cl_vec_slice_get, workers[d], &offs[k], sizeof offs[k], get, 2, "vec_slice_get");
		}
		for (int k = noff - 1; k >= 0; k--) { /* put them back, into another vector, last first */
			struct starpu_data_descr put[] = {{hdst, STARPU_RW | STARPU_COMMUTE}, {hc[k], STARPU_R}}; /* disjoint: commute (codelets/vec.c) */
			gpu_task(&cl_vec_slice_put, workers[d], &offs[k], sizeof offs[k], put, 2, "vec_slice_put");
		}
		starpu_data_unregister(hf), starpu_data_unregister(hdst);
		for (int k = 0; k < noff; k++)
			starpu_data_unregister(hc[k]);
	}
	float *ref = gpu_copy_f(dst0, n);
	for (int k = noff - 1; k >= 0; k--)
		memcpy(ref + offs[k], full + offs[k], len * sizeof(float));
	char what[128];
	for (int d = 0; d < NDEV; d++) {
		for (int k = 0; k < noff; k++) {
			snprintf(what, sizeof what, "vec_slice_get n=%zu len=%zu off=%zu %s", n, len, offs[k], dev_name[d]);
			test_close_mixed_f(what, chunk[d][k], full + offs[k], len, 0);
			free(chunk[d][k]);
		}
		snprintf(what, sizeof what, "vec_slice_put n=%zu len=%zu %s", n, len, dev_name[d]);
		test_close_mixed_f(what, dst[d], ref, n, 0);
		free(dst[d]);
	}
	free(full), free(dst0), free(ref);
}

/* ------------------------------------------------------------------ vec_add, vec_axpy */

static void test_add_axpy(long n)
{
	float *d0 = alloc_f(n), *s1 = alloc_f(n), *s2 = alloc_f(n);
	test_fill_uniform(d0, n, -1, 1);
	test_fill_uniform(s1, n, -1, 1);
	test_fill_uniform(s2, n, -100, 100);
	const float alpha1 = -1.5f, alpha2 = 0.3f;
	float *add[NDEV], *ax[NDEV];
	for (int d = 0; d < NDEV; d++) {
		add[d] = gpu_copy_f(d0, n), ax[d] = gpu_copy_f(d0, n);
		starpu_data_handle_t ha = reg_f(add[d], n), hx = reg_f(ax[d], n), h1 = reg_f(s1, n), h2 = reg_f(s2, n);
		struct starpu_data_descr a1[] = {{ha, STARPU_RW}, {h1, STARPU_R}};
		struct starpu_data_descr a2[] = {{ha, STARPU_RW | STARPU_COMMUTE}, {h2, STARPU_R}};
		gpu_task(&cl_vec_add, workers[d], NULL, 0, a1, 2, "vec_add");
		gpu_task(&cl_vec_add, workers[d], NULL, 0, a2, 2, "vec_add");
		struct starpu_data_descr x1[] = {{hx, STARPU_RW}, {h1, STARPU_R}};
		struct starpu_data_descr x2[] = {{hx, STARPU_RW}, {h2, STARPU_R}};
		gpu_task(&cl_vec_axpy, workers[d], &alpha1, sizeof alpha1, x1, 2, "vec_axpy");
		gpu_task(&cl_vec_axpy, workers[d], &alpha2, sizeof alpha2, x2, 2, "vec_axpy");
		starpu_data_unregister(ha), starpu_data_unregister(hx), starpu_data_unregister(h1),
			starpu_data_unregister(h2);
	}
	float *ra = gpu_copy_f(d0, n), *rx = gpu_copy_f(d0, n);
	dnn_vec_add_cpu(ra, s1, n);
	dnn_vec_add_cpu(ra, s2, n);
	dnn_vec_axpy_cpu(rx, alpha1, s1, n);
	dnn_vec_axpy_cpu(rx, alpha2, s2, n);
	char what[96];
	for (int d = 0; d < NDEV; d++) {
		snprintf(what, sizeof what, "vec_add n=%ld %s", n, dev_name[d]);
		test_close_mixed_f(what, add[d], ra, n, 0);
		snprintf(what, sizeof what, "vec_axpy n=%ld %s", n, dev_name[d]);
		test_close_mixed_f(what, ax[d], rx, n, 1e-6);
		free(add[d]), free(ax[d]);
	}
	free(d0), free(s1), free(s2), free(ra), free(rx);
}

int main(int argc, char **argv)
{
	int rc = gpu_setup(&argc, &argv, "gpu_sgd_grad", 1);
	if (rc != 0)
		return rc;
	workers[GPU] = gpu_cuda_worker;
	workers[CPU] = gpu_cpu_worker;
	test_rng_seed(99);

	const long lens[] = {1, 7, 1000, 100003, 1 << 20};
	for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++)
		for (int kg = 0; kg < 2; kg++)
			for (int wd = 0; wd < 2; wd++)
				test_sgd(lens[i], kg, wd);

	const size_t even[] = {0, 256, 512, 768};
	test_slices(1024, 256, even, 4);
	const size_t odd[] = {3, 10, 17, 1000};
	test_slices(1007, 7, odd, 4);
	const size_t big[] = {0, 333334, 666668};
	test_slices(1000002, 333334, big, 3);
	const size_t one[] = {0, 1};
	test_slices(2, 1, one, 2);

	for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++)
		test_add_axpy(lens[i]);

	test_starpu_shutdown();
	return test_report("gpu_sgd_grad");
}
