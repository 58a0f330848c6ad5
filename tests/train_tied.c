/* train_tied — embed and lm_head in real training steps (the training loop of graph/model.c on a
 * token data source of this file: a synthetic corpus with a learnable next-token rule), the net
 *     input idx tokens T / embed tok idx / dense h tok / leaky_relu a h / add r tok,a /
 *     lm_head head r,tok / softmax_xent loss head
 * whose table tok.wte is used twice (input embedding and output layer: weight tying):
 *  - the tied gradient is the sum of its two parts: the same net with the output layer's table a
 *    second embed (tok2, holding the same values, its output read by nothing else, so its own
 *    scatter adds nothing) gives the embedding's part in tok.wte and the output layer's in
 *    tok2.wte; their sum is the tied net's gradient within float rounding (5e-7 of the largest),
 *    every other gradient is the same bits (within 5e-7 under REDUX with 3 chunks: StarPU adds the
 *    chunks in the order the workers finish), and tok2.wpe's is exactly zero; with 1 and 3 chunks,
 *    under --deterministic on (per-chunk partials, fixed-order sums) and off (STARPU_REDUX);
 *    gradients are read as the momentum after one step at lr 0 (v = g / B, B a power of two);
 *  - chunk invariance: 40 steps in 1 and in 4 chunks give the same losses and parameters within
 *    float tolerance (2e-5 relative; 1e-5 of the largest |w|);
 *  - determinism: two runs of 4 chunks give the same bits (losses and parameters), as does a
 *    third with the chunks pinned round-robin to the workers;
 *  - it learns: the loss falls from about log(V);
 *  - the table is one tensor: --summary's count (lm_head's 0) is the model's 4 tensors' floats;
 *  - checkpoints hold the tied table once, as any parameter: saved after training and loaded
 *    into a model of another seed, the same parameters bit for bit and the same eval loss;
 *  - the ONNX export (Cast + Gather + Add for the embed, MatMul with the transposed table for
 *    lm_head, the table one initializer): onnx.checker passes and onnxruntime's probabilities on
 *    16 samples match a double-precision forward of the trained net within 2e-6. */
#include <math.h>
#include <starpu.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chunksum.h"
#include "dnn_rng.h"
#include "graph.h"
#include "model.h"
#include "model_ckpt.h"
#include "onnx_export.h"
#include "test_util.h"

#define T 8
#define V 23
#define C 16
#define BATCH 16 /* a power of two: the momentum v = g / B holds g exactly */
#define STEPS 40
#define CORPUS 4096

static float corpus[CORPUS + T + 1];

/* Token t+1 follows from token t by a fixed rule, one time in four replaced by a random id. */
static void make_corpus(void)
{
	uint64_t s = 4343;
	int tok = 0;
	for (int j = 0; j < CORPUS + T + 1; j++) {
		corpus[j] = (float)tok;
		tok = dnn_splitmix64(&s) % 4 == 0 ? (int)(dnn_splitmix64(&s) % V) : (5 * tok + 3) % V;
	}
}

/* ---------------------------------------------------------------- the token data source */

typedef struct {
	int n;
	int idx[BATCH];
} load_args;

/* x (n, T) ids, labels (n, T) the next tokens: sample i reads the corpus at 7 * i. */
static void load_cpu(void *buffers[], void *cl_arg)
{
	const load_args *a = cl_arg;
	float *x = (float *)STARPU_VECTOR_GET_PTR(buffers[0]);
	int32_t *labels = (int32_t *)STARPU_VECTOR_GET_PTR(buffers[1]);
	for (int i = 0; i < a->n; i++) {
		const float *s = corpus + (size_t)(7 * a->idx[i]) % CORPUS;
		for (int t = 0; t < T; t++)
			x[i * T + t] = s[t], labels[i * T + t] = (int32_t)s[t + 1];
	}
}

static struct starpu_codelet cl_load = {
	.cpu_funcs = {load_cpu}, .nbuffers = 2, .modes = {STARPU_W, STARPU_W}, .name = "load_tokens"};

static int insert_load(const dnn_data_source *src, const dnn_task_opts *o, const int *idx, int n, int train, long step,
		       const float *mean, const float *std, starpu_data_handle_t x, starpu_data_handle_t labels)
{
	(void)src, (void)o, (void)train, (void)step, (void)mean, (void)std;
	load_args *a = calloc(1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	a->n = n;
	memcpy(a->idx, idx, sizeof(int) * (size_t)n);
	return starpu_task_insert(&cl_load, STARPU_W, x, STARPU_W, labels, STARPU_CL_ARGS, a, sizeof(*a), 0);
}

static const dnn_data_source tokens = {.insert_load = insert_load};

/* ---------------------------------------------------------------- runs */

static const char *tied_net = "input idx tokens 8\n"
			      "embed tok idx vocab=23 dim=16\n"
			      "dense h tok out=16\n"
			      "leaky_relu a h alpha=0.1\n"
			      "add r tok,a\n"
			      "lm_head head r,tok\n"
			      "softmax_xent loss head\n";
/* The same, the output layer's table a second embed's: its gradient is the output layer's part. */
static const char *split_net = "input idx tokens 8\n"
			       "embed tok idx vocab=23 dim=16\n"
			       "embed tok2 idx vocab=23 dim=16\n"
			       "dense h tok out=16\n"
			       "leaky_relu a h alpha=0.1\n"
			       "add r tok,a\n"
			       "lm_head head r,tok2\n"
			       "softmax_xent loss head\n";

typedef struct {
	dnn_graph g;
	dnn_model m;
	dnn_plan p;
} run_t;

static void die(const char *what, const char *err)
{
	fprintf(stderr, "FAIL: %s: %s\n", what, err);
	exit(1);
}

static void run_open(run_t *r, const char *text, int chunks, int redux)
{
	char err[512];
	if (dnn_graph_parse(&r->g, text, "train_tied.net", err, sizeof(err)) != 0 ||
	    dnn_model_create(&r->m, &r->g, 123, err, sizeof(err)) != 0 ||
	    dnn_plan_create(&r->p, &r->m, BATCH, chunks, 1, 1, NULL, err, sizeof(err)) != 0 ||
	    dnn_plan_set_sum_redux(&r->p, redux, err, sizeof(err)) != 0)
		die("net", err);
}

static void run_close(run_t *r)
{
	starpu_task_wait_for_all();
	dnn_plan_destroy(&r->p);
	dnn_model_destroy(&r->m);
	dnn_graph_free(&r->g);
}

static dnn_param *param(run_t *r, const char *name)
{
	for (int i = 0; i < r->m.nparams; i++)
		if (!strcmp(r->m.params[i].name, name))
			return &r->m.params[i];
	fprintf(stderr, "FAIL: no parameter %s\n", name);
	exit(1);
}

/* Set parameter `name` of r to `from`'s values (before any task reads it). */
static void copy_param(run_t *r, const char *name, const dnn_param *from)
{
	dnn_param *p = param(r, name);
	if (p->n != from->n || starpu_data_acquire(p->hw, STARPU_W) != 0)
		die(name, "cannot set it");
	memcpy(p->w, from->w, sizeof(float) * (size_t)p->n);
	starpu_data_release(p->hw);
}

/* `steps` steps of batch BATCH (sample i of step s: (s * BATCH + i) * 31 mod 512); the mean loss per
 * token of each step into losses (may be NULL). */
static void train(run_t *r, int steps, const dnn_optim_config *optim, double *losses)
{
	char err[512];
	int idx[BATCH];
	for (int s = 0; s < steps; s++) {
		for (int i = 0; i < BATCH; i++)
			idx[i] = ((s * BATCH + i) * 31) % 512;
		double l, c;
		if (dnn_submit_step(&r->p, 0, &tokens, idx, s, optim, err, sizeof(err)) != 0 ||
		    dnn_wait_step(&r->p, 0, &l, &c, err, sizeof(err)) != 0)
			die("step", err);
		if (losses)
			losses[s] = l / BATCH;
	}
	starpu_task_wait_for_all();
	if (dnn_model_sync_to_host(&r->m, err, sizeof(err)) != 0)
		die("sync", err);
}

/* ---------------------------------------------------------------- checks */

static void check_tied_sum(int chunks, int redux)
{
	const dnn_optim_config grad_only = {.lr = 0, .momentum = 0, .weight_decay = 0}; /* v = g / B */
	run_t a, b;
	run_open(&a, tied_net, chunks, redux);
	run_open(&b, split_net, chunks, redux);
	for (int i = 0; i < b.m.nparams; i++) { /* the same values: tok2's table is tok's */
		const char *n = b.m.params[i].name;
		copy_param(&b, n, param(&a, !strcmp(n, "tok2.wte") ? "tok.wte" : !strcmp(n, "tok2.wpe") ? "tok.wpe" : n));
	}
	train(&a, 1, &grad_only, NULL);
	train(&b, 1, &grad_only, NULL);
	const char *mode = redux ? "REDUX" : "fixed order";
	for (int i = 0; i < a.m.nparams; i++) {
		const dnn_param *pa = &a.m.params[i], *pb = param(&b, pa->name);
		if (strcmp(pa->name, "tok.wte") != 0) { /* REDUX adds the chunks in the order workers finish */
			double d = 0, sc = 0;
			for (long j = 0; j < pa->n; j++)
				d = fmax(d, fabs(pa->v[j] - pb->v[j])), sc = fmax(sc, fabs(pb->v[j]));
			TEST_CHECK(redux && chunks > 1 ? d <= 5e-7 * sc : d == 0,
				   "K=%d %s: %s's gradient differs between the tied and the split net by %.3g (max %.3g)", chunks,
				   mode, pa->name, d, sc);
			continue;
		}
		const dnn_param *p2 = param(&b, "tok2.wte");
		double worst = 0, scale = 0, emb = 0, head = 0;
		for (long j = 0; j < pa->n; j++) {
			const double want = (double)pb->v[j] + p2->v[j];
			worst = fmax(worst, fabs(pa->v[j] - want)), scale = fmax(scale, fabs(want));
			emb = fmax(emb, fabs(pb->v[j])), head = fmax(head, fabs(p2->v[j]));
		}
		printf("K=%d %s: tied tok.wte gradient vs embedding part + output part: max difference %.3g of max %.3g "
		       "(parts up to %.3g and %.3g)\n",
		       chunks, mode, worst * BATCH, scale * BATCH, emb * BATCH, head * BATCH);
		TEST_CHECK(worst <= 5e-7 * scale, "K=%d %s: the tied gradient is not the sum of its parts (%.3g of %.3g)", chunks,
			   mode, worst, scale);
		TEST_CHECK(emb > 0.05 * scale && head > 0.05 * scale, "K=%d %s: a part of the tied gradient is missing", chunks,
			   mode);
	}
	const dnn_param *w2 = param(&b, "tok2.wpe");
	for (long j = 0; j < w2->n; j++)
		TEST_CHECK(w2->v[j] == 0.0f, "K=%d %s: tok2.wpe (output read by nothing) has gradient %g at %ld", chunks, mode,
			   (double)w2->v[j], j);
	run_close(&a);
	run_close(&b);
}

/* The tied net trained STEPS steps in `chunks` chunks (pinned round-robin when pin): the losses,
 * and the parameters (malloc'd, *n floats). */
static float *trained(int chunks, int pin, double *losses, long *n)
{
	const dnn_optim_config sgd = {.lr = 0.5f, .momentum = 0.9f, .weight_decay = 1e-4f};
	run_t r;
	run_open(&r, tied_net, chunks, 0);
	char err[512];
	if (pin && dnn_plan_pin_chunks(&r.p, err, sizeof(err)) != 0)
		die("pin", err);
	train(&r, STEPS, &sgd, losses);
	float *w = test_model_params(&r.m, n);
	run_close(&r);
	return w;
}

/* ---------------------------------------------------------------- checkpoint and ONNX */

static const float *pw(run_t *r, const char *name) { return param(r, name)->w; }

/* The tied net's eval forward in double: probabilities (n, T, V) of samples ids (n, T). */
static void forward_ref(run_t *r, const float *ids, int n, double *prob)
{
	const float *wte = pw(r, "tok.wte"), *wpe = pw(r, "tok.wpe"), *W = pw(r, "h.weight"), *b = pw(r, "h.bias");
	for (int q = 0; q < n * T; q++) {
		double e[C], x[C], l[V], mx = -INFINITY, sum = 0;
		for (int c = 0; c < C; c++)
			e[c] = (double)wte[(int)ids[q] * C + c] + wpe[(q % T) * C + c];
		for (int o = 0; o < C; o++) {
			double h = b[o];
			for (int c = 0; c < C; c++)
				h += (double)W[o * C + c] * e[c];
			x[o] = e[o] + (h > 0 ? h : 0.1 * h);
		}
		for (int v = 0; v < V; v++) {
			l[v] = 0;
			for (int c = 0; c < C; c++)
				l[v] += x[c] * wte[v * C + c];
			mx = fmax(mx, l[v]);
		}
		for (int v = 0; v < V; v++)
			sum += exp(l[v] - mx);
		for (int v = 0; v < V; v++)
			prob[(size_t)q * V + v] = exp(l[v] - mx) / sum;
	}
}

static double eval_loss(run_t *r)
{
	char err[512];
	dnn_plan p;
	int idx[BATCH];
	double l, c;
	for (int i = 0; i < BATCH; i++)
		idx[i] = i * 13;
	const dnn_optim_config none = {0};
	if (dnn_plan_create(&p, &r->m, BATCH, 2, 1, 0, NULL, err, sizeof(err)) != 0 ||
	    dnn_submit_step(&p, 0, &tokens, idx, 0, &none, err, sizeof(err)) != 0 ||
	    dnn_wait_step(&p, 0, &l, &c, err, sizeof(err)) != 0)
		die("eval", err);
	starpu_task_wait_for_all();
	dnn_plan_destroy(&p);
	return l / BATCH;
}

static void write_file(const char *path, const void *data, size_t bytes)
{
	FILE *f = fopen(path, "wb");
	if (!f || fwrite(data, 1, bytes, f) != bytes || fclose(f) != 0)
		die(path, "cannot write");
}

static const char *onnx_check_py =
	"import sys, numpy as np, onnx, onnxruntime as ort\n"
	"d = sys.argv[1]\n"
	"m = onnx.load(d + '/tied.onnx')\n"
	"onnx.checker.check_model(m)\n"
	"ops = [n.op_type for n in m.graph.node]\n"
	"for o in ('Cast', 'Gather', 'Transpose', 'MatMul', 'Softmax'):\n"
	"    assert o in ops, (o, ops)\n"
	"inits = [i.name for i in m.graph.initializer]\n"
	"assert inits.count('tok.wte') == 1 and not any('head' in i for i in inits), inits\n"
	"ids = np.fromfile(d + '/ids.bin', dtype=np.float32).reshape(16, 8)\n"
	"want = np.fromfile(d + '/want.bin', dtype=np.float64).reshape(16, 8, 23)\n"
	"s = ort.InferenceSession(d + '/tied.onnx', providers=['CPUExecutionProvider'])\n"
	"got = s.run(None, {s.get_inputs()[0].name: ids})[0]\n"
	"err = float(np.abs(got - want).max())\n"
	"print('onnxruntime vs the double forward: max |diff| %.3g over %d probabilities' % (err, got.size))\n"
	"assert got.shape == want.shape and err < 2e-6, err\n";

static void check_ckpt_onnx(void)
{
	const dnn_optim_config sgd = {.lr = 0.5f, .momentum = 0.9f, .weight_decay = 1e-4f};
	char dir[] = "/tmp/train_tied_XXXXXX", path[256], err[512];
	if (!mkdtemp(dir))
		die("mkdtemp", "failed");
	run_t a, b;
	run_open(&a, tied_net, 2, 0);
	train(&a, 5, &sgd, NULL);
	snprintf(path, sizeof(path), "%s/tied.ckpt", dir);
	if (dnn_model_save(&a.m, path, 5, 0, 123, err, sizeof(err)) != 0)
		die("save", err);
	char err2[512];
	if (dnn_graph_parse(&b.g, tied_net, "train_tied.net", err, sizeof(err)) != 0 ||
	    dnn_model_create(&b.m, &b.g, 999, err, sizeof(err)) != 0 || dnn_model_load(&b.m, path, NULL, NULL, NULL, err2, sizeof(err2)) != 0)
		die("load", err2);
	TEST_CHECK(a.m.nparams == 4 && b.m.nparams == 4, "the tied net has %d and %d tensors, want 4 (wte once)", a.m.nparams,
		   b.m.nparams);
	long long held = 0; /* --summary's count (the nodes' params) is what the model holds: wte once */
	for (int i = 0; i < a.m.nparams; i++)
		held += a.m.params[i].n;
	TEST_CHECK(dnn_graph_params(&a.g) == held && held == (long long)V * C + T * C + C * C + C &&
			   a.g.nodes[a.g.nnodes - 2].params == 0,
		   "--summary counts %lld parameters (lm_head %lld), the model holds %lld", dnn_graph_params(&a.g),
		   a.g.nodes[a.g.nnodes - 2].params, held);
	for (int i = 0; i < a.m.nparams && i < b.m.nparams; i++) {
		const dnn_param *pa = &a.m.params[i], *pb = &b.m.params[i];
		if (starpu_data_acquire(pb->hw, STARPU_R) != 0)
			die("acquire", pb->name);
		TEST_CHECK(!strcmp(pa->name, pb->name) && pa->n == pb->n && !memcmp(pa->w, pb->w, sizeof(float) * (size_t)pa->n),
			   "checkpoint: %s not restored bit for bit", pa->name);
		starpu_data_release(pb->hw);
	}
	const double la = eval_loss(&a), lb = eval_loss(&b);
	printf("checkpoint: %d tensors restored, eval loss %.6f before and %.6f after\n", b.m.nparams, la, lb);
	TEST_CHECK(la == lb, "eval loss %.9f after loading, %.9f before", lb, la);

	snprintf(path, sizeof(path), "%s/tied.onnx", dir);
	if (dnn_onnx_export(&a.m, path, NULL, err, sizeof(err), NULL) != 0)
		die("export", err);
	float ids[16 * T];
	double *want = alloc_d(16 * T * V);
	for (int i = 0; i < 16 * T; i++)
		ids[i] = corpus[(i / T) * 37 + i % T];
	forward_ref(&a, ids, 16, want);
	snprintf(path, sizeof(path), "%s/ids.bin", dir);
	write_file(path, ids, sizeof(ids));
	snprintf(path, sizeof(path), "%s/want.bin", dir);
	write_file(path, want, sizeof(double) * 16 * T * V);
	snprintf(path, sizeof(path), "%s/check.py", dir);
	write_file(path, onnx_check_py, strlen(onnx_check_py));
	const char *py = getenv("DNN_TEST_PYTHON");
	char cmd[1024];
	snprintf(cmd, sizeof(cmd), "'%s' '%s/check.py' '%s'", py ? py : "python3", dir, dir);
	TEST_CHECK(system(cmd) == 0, "the ONNX check failed (%s)", cmd);
	free(want);
	run_close(&a);
	starpu_task_wait_for_all();
	dnn_model_destroy(&b.m);
	dnn_graph_free(&b.g);
	test_rmtree(dir);
}

int main(int argc, char **argv)
{
	test_starpu_init(&argc, &argv);
	make_corpus();
	for (int redux = 0; redux < 2; redux++) {
		check_tied_sum(1, redux);
		check_tied_sum(3, redux);
	}

	double l1[STEPS], l4[STEPS], l4b[STEPS], l4p[STEPS];
	long n1, n4, n4b, n4p;
	float *p1 = trained(1, 0, l1, &n1), *p4 = trained(4, 0, l4, &n4);
	printf("K=1: loss %.4f -> %.4f (log V = %.4f)\n", l1[0], l1[STEPS - 1], log((double)V));
	TEST_CHECK(fabs(l1[0] - log((double)V)) < 0.1, "first loss %.4f, want about log(%d) = %.4f", l1[0], V, log((double)V));
	TEST_CHECK(l1[STEPS - 1] < l1[0] - 0.5, "the loss did not fall: %.4f -> %.4f", l1[0], l1[STEPS - 1]);
	double lw = 0, worst = 0, scale = 0;
	for (int s = 0; s < STEPS; s++)
		lw = fmax(lw, fabs(l4[s] - l1[s]) / fabs(l1[s]));
	for (long i = 0; i < n1 && n4 == n1; i++)
		worst = fmax(worst, fabs(p4[i] - p1[i])), scale = fmax(scale, fabs(p1[i]));
	printf("K=4 vs K=1: losses within %.3g relative, parameters within %.3g of max |w| %.3g\n", lw, worst, scale);
	TEST_CHECK(n4 == n1 && lw <= 2e-5, "K=4: losses differ from K=1 by %.3g relative", lw);
	TEST_CHECK(worst <= 1e-5 * scale, "K=4: parameters differ from K=1 by %.3g (max |w| %.3g)", worst, scale);

	float *p4b = trained(4, 0, l4b, &n4b), *p4p = trained(4, 1, l4p, &n4p);
	const int same = n4b == n4 && memcmp(l4b, l4, sizeof(l4)) == 0 && memcmp(p4b, p4, sizeof(float) * (size_t)n4) == 0;
	const int same_p = n4p == n4 && memcmp(l4p, l4, sizeof(l4)) == 0 && memcmp(p4p, p4, sizeof(float) * (size_t)n4) == 0;
	printf("K=4 twice: bit for bit the same: %s; pinned round-robin to %u workers: %s\n", same ? "yes" : "NO",
	       starpu_worker_get_count(), same_p ? "yes" : "NO");
	TEST_CHECK(same, "two runs of 4 chunks differ");
	TEST_CHECK(same_p, "4 chunks pinned to the workers differ from the scheduler's run");
	free(p1), free(p4), free(p4b), free(p4p);
	check_ckpt_onnx();
	test_starpu_shutdown();
	return test_report("train_tied");
}
