/* unit_attention_onnx — the attention op's ONNX export (graph/ops/attention.c) against its CPU
 * kernel: a net `dense qkv / attention / dense / softmax_xent` over a float sequence is exported
 * (dnn_onnx_export, fresh weights), checked with onnx.checker, and run by onnxruntime on random
 * sequences; its per-token probabilities must match those computed here from the model's weights
 * with the CPU kernels (dense, attention, softmax) within 1e-5. The nodes must include the Split,
 * MatMul, Mul, Add (causal mask), Softmax and Transpose/Reshape of the export. The sequence data
 * path of `starpu_anp predict` does not exist yet, so onnx_ops.sh's pipeline cannot run it.
 * Needs DNN_TEST_PYTHON (numpy, onnx, onnxruntime): without it the test FAILS, as onnx_ops.sh. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attention.h"
#include "dense.h"
#include "graph.h"
#include "model.h"
#include "onnx_export.h"
#include "op.h"
#include "test_util.h"

static const char *py =
	"import sys, numpy as np, onnx, onnxruntime as ort\n"
	"path, xin, yin, N, T, C0, V = sys.argv[1], sys.argv[2], sys.argv[3], *map(int, sys.argv[4:8])\n"
	"m = onnx.load(path)\n"
	"onnx.checker.check_model(m)\n"
	"ops = {n.op_type for n in m.graph.node if n.name.startswith('att')}\n"
	"need = {'Split', 'Reshape', 'Transpose', 'MatMul', 'Mul', 'Add', 'Softmax'}\n"
	"assert need <= ops, (sorted(need - ops), sorted(ops))\n"
	"x = np.fromfile(xin, dtype=np.float32).reshape(N, T, C0)\n"
	"want = np.fromfile(yin, dtype=np.float32).reshape(N, T, V)\n"
	"s = ort.InferenceSession(path, providers=['CPUExecutionProvider'])\n"
	"got = s.run(None, {s.get_inputs()[0].name: x})[0]\n"
	"assert got.shape == want.shape, (got.shape, want.shape)\n"
	"err = float(np.abs(got - want).max())\n"
	"print('onnxruntime vs the CPU kernels: max |diff| %.3g over %d probabilities' % (err, got.size))\n"
	"assert err < 1e-5, err\n";

static int write_file(const char *path, const void *p, size_t bytes)
{
	FILE *f = fopen(path, "wb");
	int ok = f && fwrite(p, 1, bytes, f) == bytes;
	if (f && fclose(f) != 0)
		ok = 0;
	return ok;
}

/* One net: N sequences of T tokens of C0 features, attention of C channels in H heads, V classes. */
static void check_net(const char *dir, const char *python, int N, int T, int C0, int C, int H, int V)
{
	char net[512], err[512], path[1024], xin[1024], yin[1024], pyfile[1024], cmd[8192];
	snprintf(net, sizeof(net),
		 "input x seq %d %d\ndense qkv x out=%d\nattention att qkv heads=%d\ndense o att out=%d\nsoftmax_xent loss o\n",
		 T, C0, 3 * C, H, V);
	dnn_graph g;
	dnn_model m;
	if (dnn_graph_parse(&g, net, "attention_onnx.net", err, sizeof(err)) != 0) {
		TEST_CHECK(0, "parse: %s", err);
		return;
	}
	if (dnn_model_create(&m, &g, 99, err, sizeof(err)) != 0) {
		TEST_CHECK(0, "model: %s", err);
		dnn_graph_free(&g);
		return;
	}
	snprintf(path, sizeof(path), "%s/att_T%d_H%d.onnx", dir, T, H);
	snprintf(xin, sizeof(xin), "%s/x_T%d_H%d.bin", dir, T, H);
	snprintf(yin, sizeof(yin), "%s/y_T%d_H%d.bin", dir, T, H);
	TEST_CHECK(dnn_onnx_export(&m, path, NULL, err, sizeof(err), NULL) == 0, "export: %s", err);
	/* the forward with the kernels, from the model's weights */
	const size_t rows = (size_t)N * T;
	float *x = alloc_f(rows * C0), *qkv = alloc_f(rows * 3 * C), *att = alloc_f(rows * C), *y = alloc_f(rows * V);
	test_fill_uniform(x, rows * C0, -4.0f, 4.0f); /* scores of a few units with the init's weights */
	const dnn_param *w1 = dnn_op_param(&m, 1, DNN_SLOT_WEIGHT), *b1 = dnn_op_param(&m, 1, DNN_SLOT_BIAS);
	const dnn_param *w2 = dnn_op_param(&m, 3, DNN_SLOT_WEIGHT), *b2 = dnn_op_param(&m, 3, DNN_SLOT_BIAS);
	const dnn_dense_args d1 = {.N = (int)rows, .IN = C0, .OUT = 3 * C}, d2 = {.N = (int)rows, .IN = C, .OUT = V};
	dnn_dense_forward_cpu(qkv, x, w1->w, b1->w, &d1);
	const dnn_attention_args a = {.N = N, .T = T, .C = C, .H = H};
	float *scratch = alloc_f(dnn_attention_scratch_floats(T, C / H));
	dnn_attention_forward_cpu(att, NULL, qkv, &a, scratch);
	dnn_dense_forward_cpu(y, att, w2->w, b2->w, &d2);
	for (size_t r = 0; r < rows; r++) {
		float *l = y + r * V, mx = l[0], s = 0;
		for (int j = 1; j < V; j++)
			mx = l[j] > mx ? l[j] : mx;
		for (int j = 0; j < V; j++)
			s += (l[j] = expf(l[j] - mx));
		for (int j = 0; j < V; j++)
			l[j] /= s;
	}
	TEST_CHECK(write_file(xin, x, rows * C0 * sizeof(float)) && write_file(yin, y, rows * V * sizeof(float)),
		   "writing %s, %s", xin, yin);
	snprintf(pyfile, sizeof(pyfile), "%s/check.py", dir);
	TEST_CHECK(write_file(pyfile, py, strlen(py)), "writing %s", pyfile);
	snprintf(cmd, sizeof(cmd), "'%s' '%s' '%s' '%s' '%s' %d %d %d %d", python, pyfile, path, xin, yin, N, T, C0, V);
	const int rc = system(cmd);
	TEST_CHECK(rc == 0, "N=%d T=%d C=%d heads=%d: onnxruntime check failed (%d): %s", N, T, C, H, rc, cmd);
	free(x), free(qkv), free(att), free(y), free(scratch);
	dnn_model_destroy(&m);
	dnn_graph_free(&g);
}

int main(int argc, char **argv)
{
	const char *python = getenv("DNN_TEST_PYTHON");
	if (!python || !*python || access(python, X_OK) != 0) {
		fprintf(stderr, "FAIL: no Python at DNN_TEST_PYTHON='%s': run scripts/bootstrap.sh, which makes it\n",
			python ? python : "");
		return 1;
	}
	test_starpu_init(&argc, &argv);
	test_rng_seed(77);
	char dir[] = "/tmp/dnn_att_onnx_XXXXXX";
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	check_net(dir, python, 3, 9, 12, 16, 2, 11);
	check_net(dir, python, 2, 70, 8, 32, 4, 5);
	check_net(dir, python, 2, 1, 6, 8, 1, 3);
	test_rmtree(dir);
	test_starpu_shutdown();
	return test_report("unit_attention_onnx");
}
