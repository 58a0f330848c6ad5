/* unit_preflight_scratch — the GPU memory preflight's count of conv2d.cu's bf16 scratch
 * (runtime/preflight.c dnn_preflight_gpu_memory, --precision bf16): the bytes of each pass's bf16
 * copies (codelets/conv2d.h dnn_conv2d_bf16_scratch_bytes, the layout conv2d.cu allocates) and the
 * plan's per-worker block (graph/model.h dnn_plan_cuda_scratch_bytes: the largest node's request as
 * dnn_cuda_scratch grows to it), against figures worked out by hand below; fp32 asks for none. Runs
 * without a GPU: the estimate is host arithmetic (the preflight itself returns early here).
 *
 * The net: c1 3x12x10 -> 5x12x10 (k=3 pad=1), c2 5x12x10 -> 7x6x5 (k=3 stride=2 pad=1). Per pass,
 * bytes = align256(2 in0) + align256(2 in1) + 2 out (elements: x = N C H W, w = K C R S, y = N K P Q):
 *   c1, N=4: x 1440 (2880 B -> 3072), w 135 (270 B -> 512), y 2400 (4800 B -> 4864)
 *     forward x, w -> y: 3072 + 512 + 4800 = 8384; backward data dy, w -> dx: 4864 + 512 + 2880 = 8256;
 *     backward filter x, dy -> dw: 3072 + 4864 + 270 = 8206
 *   N=1024: c1 x 368640 (737280 B), y 614400 (1228800 B): forward 737280 + 512 + 1228800 = 1966592
 *     (backward data the same; c2's passes are smaller: x 1228800 B, w 768, y 215040 el = 430080 B);
 *     the block: 1966592 + 1966592 / 8 = 2212416 = 0x21c240, to whole MiB above: 0x300000 = 3 MiB.
 *   N=4: the largest request, 8384, gives the block's minimum, 1 MiB. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conv2d.h"
#include "knobs.h"
#include "model.h"
#include "test_util.h"

static const char *NET = "input x 3 12 10\n"
			 "conv c1 x out=5 k=3 pad=1 bias=1\n"
			 "conv c2 c1 out=7 k=3 stride=2 pad=1\n"
			 "dense f c2 out=10\n"
			 "softmax_xent loss f\n";

static void check_passes(void)
{
	dnn_conv2d_args a = {.N = 4, .C = 3, .H = 12, .W = 10, .K = 5, .R = 3, .S = 3, .stride = 1, .pad = 1,
			     .dilation = 1, .bf16 = 1};
	TEST_CHECK(dnn_conv2d_args_finish(&a) == 0 && a.P == 12 && a.Q == 10, "c1's args");
	const size_t want[3] = {8384, 8256, 8206};
	for (int ph = 0; ph < 3; ph++) {
		const size_t got = dnn_conv2d_bf16_scratch_bytes(&a, ph);
		TEST_CHECK(got == want[ph], "c1 N=4 pass %d: %zu bytes of bf16 copies, want %zu", ph, got, want[ph]);
	}
	a.bf16 = 0;
	for (int ph = 0; ph < 3; ph++)
		TEST_CHECK(dnn_conv2d_bf16_scratch_bytes(&a, ph) == 0, "fp32 pass %d asks for scratch", ph);
}

static void check_plan(int bf16)
{
	char err[512];
	dnn_graph g;
	dnn_model m;
	dnn_plan p;
	if (dnn_graph_parse(&g, NET, "unit_preflight_scratch", err, sizeof(err)) != 0 ||
	    dnn_model_create(&m, &g, 123, err, sizeof(err)) != 0) {
		fprintf(stderr, "FAIL: net: %s\n", err);
		exit(1);
	}
	dnn_exec_config cfg = *dnn_knobs_get();
	cfg.bf16 = bf16;
	if (dnn_plan_create(&p, &m, 8, 2, 1, 1, &cfg, err, sizeof(err)) != 0) {
		fprintf(stderr, "FAIL: plan: %s\n", err);
		exit(1);
	}
	const double small = dnn_plan_cuda_scratch_bytes(&p, 4), big = dnn_plan_cuda_scratch_bytes(&p, 1024);
	printf("  %s: scratch per CUDA worker %.0f bytes at 4 samples a chunk, %.0f at 1024\n", bf16 ? "bf16" : "fp32",
	       small, big);
	if (bf16) {
		TEST_CHECK(small == 1048576.0, "bf16, N=4: the block is %.0f bytes, want 1 MiB", small);
		TEST_CHECK(big == 3145728.0, "bf16, N=1024: the block is %.0f bytes, want 3 MiB", big);
	} else
		TEST_CHECK(small == 0 && big == 0, "fp32: %.0f and %.0f bytes of bf16 scratch counted, want none", small,
			   big);
	dnn_plan_destroy(&p);
	dnn_model_destroy(&m);
	dnn_graph_free(&g);
}

int main(int argc, char **argv)
{
	test_starpu_init(&argc, &argv);
	check_passes();
	check_plan(1);
	check_plan(0);
	test_starpu_shutdown();
	return test_report("unit_preflight_scratch");
}
