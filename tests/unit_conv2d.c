/* unit_conv2d — conv2d forward through cl_conv2d_fwd tasks against a naive double-precision
 * reference, on fixed corner cases (odd sizes, stride 2, padding, dilation, 1x1, 7x7, batch 1,
 * shapes that hit every blocking path of the CPU kernel) and on random shapes. */
#include <starpu.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conv2d.h"
#include "conv2d_impl.h"
#include "test_util.h"

static void check_shape(dnn_conv2d_args a)
{
	char what[160];
	snprintf(what, sizeof(what), "fwd N%d C%d H%d W%d K%d R%d S%d st%d pad%d dil%d", a.N, a.C, a.H,
		 a.W, a.K, a.R, a.S, a.stride, a.pad, a.dilation);
	if (dnn_conv2d_args_finish(&a) != 0) {
		TEST_CHECK(0, "%s: args rejected", what);
		return;
	}
	size_t nx = (size_t)a.N * a.C * a.H * a.W, nw = (size_t)a.K * a.C * a.R * a.S;
	size_t ny = (size_t)a.N * a.K * a.P * a.Q;
	float *x = malloc(nx * sizeof(float)), *w = malloc(nw * sizeof(float));
	float *y = malloc(ny * sizeof(float));
	double *ref = malloc(ny * sizeof(double));
	test_fill_uniform(x, nx, -1, 1);
	test_fill_uniform(w, nw, -1, 1);
	for (size_t i = 0; i < ny; i++)
		y[i] = 1e30f; /* garbage: the task must overwrite every element */

	starpu_data_handle_t hx, hw, hy;
	starpu_vector_data_register(&hx, STARPU_MAIN_RAM, (uintptr_t)x, nx, sizeof(float));
	starpu_vector_data_register(&hw, STARPU_MAIN_RAM, (uintptr_t)w, nw, sizeof(float));
	starpu_vector_data_register(&hy, STARPU_MAIN_RAM, (uintptr_t)y, ny, sizeof(float));
	dnn_insert_conv2d_fwd(NULL, &a, hx, hw, hy);
	starpu_data_unregister(hx);
	starpu_data_unregister(hw);
	starpu_data_unregister(hy);

	conv2d_forward_ref(ref, x, w, &a);
	test_close_mixed(what, y, ref, ny, 1e-4);
	free(x);
	free(w);
	free(y);
	free(ref);
}

/* The direct path's AVX-512 kernels against its AVX2 ones, bit for bit (each lane sums the same
 * taps in the same order), overwriting and accumulating (beta 1); and each with the fused bias
 * against the conv then + bias. */
static void check_direct_isas(dnn_conv2d_args a)
{
	if (dnn_conv2d_args_finish(&a) != 0) {
		TEST_CHECK(0, "direct N%d C%d K%d: args rejected", a.N, a.C, a.K);
		return;
	}
	const conv_geom g = conv_geom_of(&a);
	TEST_CHECK(dnn_conv_direct_applies(&g), "direct N%d C%d H%d W%d K%d R%d S%d: not a direct shape", a.N, a.C, a.H,
		   a.W, a.K, a.R, a.S);
	size_t nx = (size_t)a.N * a.C * a.H * a.W, nw = (size_t)a.K * a.C * a.R * a.S;
	size_t ny = (size_t)a.N * a.K * a.P * a.Q;
	float *x = malloc(nx * sizeof(float)), *w = malloc(nw * sizeof(float)), *y0 = malloc(ny * sizeof(float));
	float *y[2][2], *work = malloc(dnn_conv_direct_work(&g) * sizeof(float));
	test_fill_uniform(x, nx, -1, 1);
	test_fill_uniform(w, nw, -1, 1);
	test_fill_uniform(y0, ny, -1, 1);
	int isa[2];
	for (int i = 0; i < 2; i++) {
		isa[i] = dnn_conv_direct_set_avx512(i);
		for (int beta = 0; beta < 2; beta++) {
			y[i][beta] = malloc(ny * sizeof(float));
			memcpy(y[i][beta], y0, ny * sizeof(float));
			dnn_conv_direct_forward(y[i][beta], x, w, NULL, &g, (float)beta, work);
		}
		/* The fused bias (DNN_FUSE=2), added in the store: the conv's floats + bias[k], as the
		 * separate bias pass gives. */
		float *yb = malloc(ny * sizeof(float)), *bias = malloc((size_t)a.K * sizeof(float));
		test_fill_uniform(bias, (size_t)a.K, -1, 1);
		dnn_conv_direct_forward(yb, x, w, bias, &g, 0.0f, work);
		float *want = malloc(ny * sizeof(float));
		for (size_t j = 0; j < ny; j++)
			want[j] = y[i][0][j] + bias[(j / ((size_t)a.P * a.Q)) % (size_t)a.K];
		char what[96];
		snprintf(what, sizeof what, "direct C%d K%d (avx512 %d): conv with its bias vs conv then + bias", a.C, a.K,
			 isa[i]);
		test_same_bits(what, yb, want, ny);
		free(yb), free(bias), free(want);
	}
	dnn_conv_direct_set_avx512(1);
	TEST_CHECK(isa[0] == 0 && isa[1] == 1, "direct: AVX2 and AVX-512 runs not both made (%d %d)", isa[0], isa[1]);
	for (int beta = 0; beta < 2; beta++) {
		char what[96];
		snprintf(what, sizeof what, "direct C%d H%d W%d K%d R%d S%d beta %d: AVX-512 vs AVX2", a.C, a.H, a.W, a.K, a.R,
			 a.S, beta);
		test_same_bits(what, y[1][beta], y[0][beta], ny);
		free(y[0][beta]), free(y[1][beta]);
	}
	free(x), free(w), free(y0), free(work);
}

int main(int argc, char **argv)
{
	test_starpu_init(&argc, &argv);
	test_rng_seed(1234);

	/* Shape arithmetic. */
	dnn_conv2d_args a = conv_shape(2, 3, 32, 32, 16, 3, 3, 1, 1, 1);
	TEST_CHECK(dnn_conv2d_args_finish(&a) == 0 && a.P == 32 && a.Q == 32, "3x3 pad 1: P=%d Q=%d", a.P, a.Q);
	a = conv_shape(2, 3, 32, 31, 16, 3, 3, 2, 1, 1);
	TEST_CHECK(dnn_conv2d_args_finish(&a) == 0 && a.P == 16 && a.Q == 16, "stride 2: P=%d Q=%d", a.P, a.Q);
	a = conv_shape(1, 1, 7, 7, 1, 3, 3, 1, 0, 3);
	TEST_CHECK(dnn_conv2d_args_finish(&a) == 0 && a.P == 1 && a.Q == 1, "dilation 3: P=%d Q=%d", a.P, a.Q);
	a = conv_shape(1, 1, 4, 4, 1, 5, 5, 1, 0, 1);
	TEST_CHECK(dnn_conv2d_args_finish(&a) == -1, "kernel larger than the input must be rejected");
	a = conv_shape(1, 1, 4, 4, 1, 3, 3, 0, 0, 1);
	TEST_CHECK(dnn_conv2d_args_finish(&a) == -1, "stride 0 must be rejected");
	a = conv_shape(1, 1, 4, 4, 1, 3, 3, 1, 0, 1);
	TEST_CHECK(dnn_conv2d_args_finish(&a) == 0 && dnn_conv2d_flops_fwd(&a) == 2.0 * 4 * 9,
		   "flops = %g", dnn_conv2d_flops_fwd(&a));

	/* Corner cases. */
	check_shape(conv_shape(1, 1, 1, 1, 1, 1, 1, 1, 0, 1));     /* smallest */
	check_shape(conv_shape(1, 3, 32, 32, 16, 3, 3, 1, 1, 1));  /* CIFAR stem, batch 1 */
	check_shape(conv_shape(3, 16, 32, 32, 16, 3, 3, 1, 1, 1)); /* ResNet-20 stage 1: row tiles */
	check_shape(conv_shape(5, 16, 32, 32, 32, 3, 3, 2, 1, 1)); /* stride 2 */
	check_shape(conv_shape(9, 64, 8, 8, 64, 3, 3, 1, 1, 1));   /* small images: grouped, last group partial */
	check_shape(conv_shape(4, 32, 16, 16, 64, 1, 1, 2, 0, 1)); /* 1x1 stride 2 shortcut */
	check_shape(conv_shape(3, 8, 13, 11, 5, 1, 1, 1, 0, 1));   /* 1x1 stride 1: no im2col */
	check_shape(conv_shape(2, 5, 10, 11, 4, 1, 1, 3, 0, 1));   /* 1x1 stride 3: subsampled */
	check_shape(conv_shape(2, 4, 9, 10, 3, 1, 1, 1, 1, 1));    /* 1x1 with padding */
	check_shape(conv_shape(2, 3, 37, 29, 8, 7, 7, 2, 3, 1));   /* 7x7 stem, odd sizes */
	check_shape(conv_shape(2, 5, 17, 19, 6, 3, 3, 1, 2, 2));   /* dilation 2 */
	check_shape(conv_shape(3, 2, 11, 7, 3, 3, 2, 3, 4, 1));    /* pad bigger than the kernel, stride 3 */
	check_shape(conv_shape(2, 7, 15, 9, 4, 5, 3, 2, 0, 2));    /* non-square kernel, dilation, no pad */
	check_shape(conv_shape(1, 2, 300, 5, 3, 3, 3, 1, 1, 1));   /* tall image: many row tiles */
	check_shape(conv_shape(2, 1, 3, 700, 2, 3, 3, 1, 1, 1));   /* a single row wider than a block */
	check_shape(conv_shape(3, 1, 28, 28, 6, 5, 5, 1, 2, 1));   /* LeNet-5 c1: direct path, 4 vectors/row */
	check_shape(conv_shape(3, 6, 14, 14, 16, 5, 5, 1, 0, 1));  /* LeNet-5 c2: direct path, 2 vectors/row */
	check_shape(conv_shape(2, 3, 32, 32, 7, 3, 3, 1, 1, 1));   /* direct, K = 7: channel blocks + remainder */
	check_shape(conv_shape(2, 2, 9, 20, 5, 2, 4, 1, 1, 1));    /* direct, R != S, 3 vectors/row */
	check_shape(conv_shape(2, 3, 16, 16, 9, 3, 3, 1, 1, 1));   /* direct, Q = 16: one full AVX-512 vector */
	check_shape(conv_shape(2, 2, 7, 5, 3, 3, 3, 1, 0, 1));     /* direct, Q = 3 */
	if (dnn_conv_direct_set_avx512(1)) {
		check_direct_isas(conv_shape(3, 1, 28, 28, 6, 5, 5, 1, 2, 1));  /* LeNet-5 c1: Q = 28 */
		check_direct_isas(conv_shape(3, 6, 14, 14, 16, 5, 5, 1, 0, 1)); /* LeNet-5 c2: Q = 10 */
		check_direct_isas(conv_shape(2, 3, 32, 32, 7, 3, 3, 1, 1, 1));  /* Q = 32, K = 7: blocks + one */
		check_direct_isas(conv_shape(2, 2, 9, 20, 5, 2, 4, 1, 1, 1));   /* Q = 19 */
		check_direct_isas(conv_shape(2, 3, 16, 16, 9, 3, 3, 1, 1, 1));  /* Q = 16, K = 9 */
		check_direct_isas(conv_shape(2, 2, 7, 5, 3, 3, 3, 1, 0, 1));    /* Q = 3 */
	} else {
		printf("unit_conv2d: no AVX-512, the direct path's two ISAs are not compared here\n");
	}

	/* Random shapes. */
	for (int t = 0; t < 40; t++) {
		dnn_conv2d_args r;
		do {
			r = conv_shape(test_rng_int(1, 4), test_rng_int(1, 9), test_rng_int(1, 20),
				       test_rng_int(1, 20), test_rng_int(1, 9), test_rng_int(1, 5),
				       test_rng_int(1, 5), test_rng_int(1, 3), test_rng_int(0, 3),
				       test_rng_int(1, 2));
		} while (dnn_conv2d_args_finish(&r) != 0);
		check_shape(r);
	}

	test_starpu_shutdown();
	return test_report("unit_conv2d");
}
