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
 *  - it learns: the loss falls from about log(V). */
#include <math.h>
#include <starpu.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chunksum.h"
#include "dnn_rng.h"
#include "graph.h"
#include "model.h"
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
	test_starpu_shutdown();
	return test_report("train_tied");
}
