/* unit_cuda_coverage — every codelet that a training step or an evaluation step inserts has a
 * CUDA implementation, so a step can run on a GPU alone (STARPU_NCPU=0 STARPU_NCUDA=1).
 *
 * How: StarPU is started with a scheduling policy of this test's own (conf.sched_policy): an
 * eager central list whose push_task first records task->cl. Every task StarPU schedules passes
 * through it, including StarPU's REDUX reduction tasks (cl_vec_redux_add); a task with a REDUX access
 * also records the handle's init method (cl_vec_zero), which StarPU calls outside the scheduler. Then
 * several nets that together cover every op (lenet5; resnet8; a net with conv+bias, batchnorm
 * with and without a following relu, maxpool, avgpool, add, dense, layernorm, leaky_relu, gelu and
 * dropout; a sequence net with attention, fed by a source of its own; a language model with
 * embed and lm_head on a token set, load_tokens) submit one training step and one evaluation step
 * at each fusion level (DNN_FUSE=0, 1, 2: they insert different codelets), reading an in-memory set
 * (load_batch) and an image folder of PNGs made
 * here (load_images, augmented when training).
 *
 * The check, per recorded codelet:
 *  - CUDA build (DNN_HAVE_CUDA): cl->cuda_funcs[0] != NULL;
 *  - build without CUDA (every cuda_funcs is NULL there): the codelet declares a CUDA function in
 *    source, i.e. it is in the registry of codelets/dnn_codelet.h (DNN_CUDA_DECLARED, a linker
 *    section filled by DNN_CODELET / DNN_CODELET_FP and by hand-written codelets that set
 *    .cuda_funcs = {DNN_CUDA_FN(fn)}). In a CUDA build the
 *    same registry is checked against the pointers too, so the registry itself is tested
 *    wherever CUDA is built (a registered codelet with no CUDA function fails it).
 * Offenders are printed by name. Against a vacuous pass: at least MIN_CODELETS distinct codelets
 * must be recorded, among them the loaders, SGD, dropout and the evaluation-only batchnorm.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <starpu.h>
#include <starpu_scheduler.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data_source.h"
#include "dataset.h"
#include "dnn_codelet.h"
#include "dnn_cuda.h"
#include "dnn_runtime.h"
#include "bnstats.h"
#include "chunksum.h"
#include "fuse.h"
#include "graph.h"
#include "imagefolder.h"
#include "model.h"
#include "test_util.h"
#include "vec.h"

#define MIN_CODELETS 25
#define MAX_CL 256
#define BATCH 8

/* ---------------------------------------------------------------- the recording policy */
static pthread_mutex_t rec_lock = PTHREAD_MUTEX_INITIALIZER;
static struct starpu_codelet *recorded[MAX_CL];
static int nrecorded, overflow;

static void record(struct starpu_codelet *cl)
{
	pthread_mutex_lock(&rec_lock);
	int seen = 0;
	for (int i = 0; i < nrecorded && !seen; i++)
		seen = recorded[i] == cl;
	if (!seen) {
		if (nrecorded < MAX_CL)
			recorded[nrecorded++] = cl;
		else
			overflow = 1;
	}
	pthread_mutex_unlock(&rec_lock);
}

typedef struct {
	struct starpu_task_list list;
	starpu_pthread_mutex_t mu;
} rec_sched;

static void rec_init(unsigned ctx)
{
	rec_sched *d = malloc(sizeof(*d));
	STARPU_ASSERT(d);
	starpu_task_list_init(&d->list);
	STARPU_PTHREAD_MUTEX_INIT(&d->mu, NULL);
	starpu_sched_ctx_set_policy_data(ctx, d);
}

static void rec_deinit(unsigned ctx)
{
	rec_sched *d = starpu_sched_ctx_get_policy_data(ctx);
	STARPU_PTHREAD_MUTEX_DESTROY(&d->mu);
	free(d);
}

static int rec_push(struct starpu_task *task)
{
	/* Read before the push: once the task is in the list a worker may run and free it. */
	const unsigned ctx = task->sched_ctx;
	if (task->cl) {
		record(task->cl);
		/* StarPU initialises a REDUX replica by calling the handle's init method on the worker
		 * itself, not through the scheduler; the step's only reduction methods are those of
		 * dnn_vec_set_sum_redux (vec.c), so a REDUX access records both. */
		for (unsigned i = 0; i < (unsigned)STARPU_TASK_GET_NBUFFERS(task); i++)
			if (STARPU_TASK_GET_MODE(task, i) & STARPU_REDUX) {
				record(&cl_vec_zero);
				record(&cl_vec_redux_add);
			}
	}
	rec_sched *d = starpu_sched_ctx_get_policy_data(ctx);
	STARPU_PTHREAD_MUTEX_LOCK(&d->mu);
	starpu_task_list_push_front(&d->list, task);
	starpu_push_task_end(task);
	STARPU_PTHREAD_MUTEX_UNLOCK(&d->mu);
	struct starpu_worker_collection *ws = starpu_sched_ctx_get_worker_collection(ctx);
	struct starpu_sched_ctx_iterator it;
	ws->init_iterator(ws, &it);
	while (ws->has_next(ws, &it))
		starpu_wake_worker_relax_light(ws->get_next(ws, &it));
	return 0;
}

/* Oldest task this worker can run (a CPU-only task is never handed to a CUDA worker). */
static struct starpu_task *rec_pop(unsigned ctx)
{
	rec_sched *d = starpu_sched_ctx_get_policy_data(ctx);
	unsigned w = starpu_worker_get_id_check();
	STARPU_PTHREAD_MUTEX_LOCK(&d->mu);
	struct starpu_task *t = starpu_task_list_back(&d->list);
	while (t && !starpu_worker_can_execute_task_first_impl(w, t, NULL))
		t = t->prev;
	if (t)
		starpu_task_list_erase(&d->list, t);
	STARPU_PTHREAD_MUTEX_UNLOCK(&d->mu);
	return t;
}

static struct starpu_sched_policy rec_policy = {
	.init_sched = rec_init,
	.deinit_sched = rec_deinit,
	.push_task = rec_push,
	.pop_task = rec_pop,
	.policy_name = "cuda_coverage",
	.policy_description = "eager, recording every scheduled codelet",
	.worker_type = STARPU_WORKER_LIST,
};

/* ---------------------------------------------------------------- data */
static char tmpdir[4096];


static void die(const char *what, const char *err)
{
	fprintf(stderr, "FAIL: %s: %s\n", what, err);
	exit(1);
}

/* An in-memory set of n random 1x28x28 samples. */
static void mem_set(dnn_dataset *ds, int n)
{
	memset(ds, 0, sizeof(*ds));
	ds->n = n, ds->C = 1, ds->H = 28, ds->W = 28, ds->classes = 10;
	ds->labels = malloc(sizeof(int32_t) * (size_t)n);
	if (!ds->labels)
		die("mem_set", "out of memory");
	ds->images = test_random_samples(n, 28 * 28, ds->labels);
}

/* An image folder of n grey PNGs of assorted sizes (resized and cropped to 28x28 by the task). */
static void folder_set(dnn_dataset *ds, int n)
{
	int w[16], h[16];
	if (n > 16)
		die("folder_set", "at most 16 images");
	for (int i = 0; i < n; i++)
		w[i] = 28 + 5 * (i % 4), h[i] = 30 + 3 * (i % 3);
	char **paths = test_image_files(tmpdir, sizeof(tmpdir), "/tmp/dnn_cuda_coverage_XXXXXX", n, 0, 1, w, h);
	char err[512];
	if (dnn_imagefolder_from_files(ds, (const char *const *)paths, n, 1, 28, 28, err, sizeof(err)) != 0)
		die("dnn_imagefolder_from_files", err);
	test_image_files_free(paths, n, NULL); /* the files stay until the end */
}

/* ---------------------------------------------------------------- steps */
static const char *mixed_net = "input x 1 28 28\n"
			       "conv c1 x out=8 k=3 pad=1 bias=1\nbatchnorm b1 c1\nrelu r1 b1\nmaxpool p1 r1 k=2\n"
			       "conv c2 p1 out=8 k=3 pad=1\nbatchnorm b2 c2\nadd a2 b2,p1\nrelu r2 a2\n"
			       "avgpool g r2\ndense f1 g out=16\nlayernorm n1 f1\nleaky_relu r3 n1 alpha=0.1\n"
			       "gelu e1 r3\ndropout d1 e1 p=0.3\n"
			       "dense f2 d1 out=10\nsoftmax_xent loss f2\n";

/* --clip-grad-norm's threshold for the training steps (0: off; graph/gradclip.h's codelets). */
static float g_clip;
/* A language model: embed and lm_head (tied), dense per token, per-token loss. */
static const char *tokens_net = "input idx tokens 8\nembed tok idx vocab=11 dim=16\ndense h tok out=16\n"
				"add r tok,h\nlm_head head r,tok\nsoftmax_xent loss head\n";

/* Its data: windows of 8 random ids below 11 (the text data sets' loader, load_tokens). */
static void token_set(dnn_dataset *ds)
{
	uint16_t tok[200];
	char err[512];
	for (int i = 0; i < 200; i++)
		tok[i] = (uint16_t)test_rng_int(0, 10);
	if (dnn_dataset_from_tokens(ds, tok, 200, 8, 1, 11, 0, "tokens", err, sizeof(err)) != 0)
		die("token set", err);
}

/* One training step (train = 1) or one evaluation step (train = 0) of the net in 2 chunks;
 * bn_global: with --batchnorm global's codelets (bnstats.h); redux: with --deterministic off's
 * (StarPU's REDUX reductions instead of the fixed-order sums of chunksum.h). */
static void one_step_bn(const char *name, const char *text, const dnn_dataset *ds, int fuse, int train, int bn_global,
			int redux)
{
	char err[512];
	dnn_exec_config cfg = DNN_EXEC_CONFIG_DEFAULTS;
	cfg.fuse = fuse; /* what DNN_FUSE sets (runtime/knobs.c) */
	dnn_graph g;
	dnn_model m;
	dnn_plan p;
	if ((text ? dnn_graph_parse(&g, text, name, err, sizeof(err)) : dnn_graph_load(&g, name, err, sizeof(err))) != 0)
		die("graph", err);
	if (dnn_model_create(&m, &g, 7, err, sizeof(err)) != 0)
		die("model", err);
	m.in_mean[0] = 0.5f, m.in_std[0] = 0.25f;
	if (dnn_plan_create(&p, &m, BATCH, 2, 1, train, &cfg, err, sizeof(err)) != 0 ||
	    dnn_plan_set_sum_redux(&p, redux, err, sizeof(err)) != 0 ||
	    dnn_plan_set_batchnorm(&p, bn_global, err, sizeof(err)) != 0)
		die("plan", err);
	dnn_data_source src;
	dnn_dataset_source(&src, ds);
	dnn_optim_config optim = {.lr = 0.01f, .momentum = 0.9f, .weight_decay = 5e-4f, .clip_norm = g_clip};
	int idx[BATCH];
	for (int i = 0; i < BATCH; i++)
		idx[i] = (i * 5 + 3) % ds->n;
	double l, c;
	if (dnn_submit_step(&p, 0, &src, idx, 0, &optim, err, sizeof(err)) != 0 ||
	    dnn_wait_step(&p, 0, &l, &c, err, sizeof(err)) != 0)
		die(train ? "training step" : "evaluation step", err);
	starpu_task_wait_for_all();
	printf("%-8s %-6s DNN_FUSE=%d %s%s%s: %ld tasks, loss %.4f; %d distinct codelets so far\n", name,
	       ds->folder ? "folder" : "memory", fuse, train ? "train" : "eval ", bn_global ? " (bn global)" : "",
	       redux ? " (REDUX)" : "", p.tasks_per_step, l / BATCH, nrecorded);
	dnn_plan_destroy(&p);
	dnn_model_destroy(&m);
	dnn_graph_free(&g);
}

static void one_step(const char *name, const char *text, const dnn_dataset *ds, int fuse, int train)
{
	one_step_bn(name, text, ds, fuse, train, 0, 0);
}

/* A sequence net (attention between per-token dense layers, the per-token loss). No loader gives
 * sequences yet, so its source writes each chunk's x (n T C floats) and labels (n T ids) from the
 * submitting thread (starpu_data_acquire) instead of inserting a load task. */
#define SEQ_T 6
#define SEQ_C 12
#define SEQ_V 5
static const char *seq_net = "input x seq 6 12\ndense qkv x out=48\nattention att qkv heads=2\ndense o att out=5\n"
			     "softmax_xent loss o\n";

static int seq_insert_load(const dnn_data_source *src, const dnn_task_opts *o, const int *idx, int n, int train,
			   long step, const float *mean, const float *std, starpu_data_handle_t x,
			   starpu_data_handle_t labels)
{
	(void)src, (void)o, (void)train, (void)step, (void)mean, (void)std;
	if (starpu_data_acquire(x, STARPU_W) != 0)
		return -EIO;
	float *xp = (float *)starpu_vector_get_local_ptr(x);
	for (size_t i = 0; i < (size_t)n * SEQ_T * SEQ_C; i++)
		xp[i] = (float)((idx[i / (SEQ_T * SEQ_C)] * 31 + (int)i * 7) % 17) / 8.0f - 1.0f;
	starpu_data_release(x);
	if (starpu_data_acquire(labels, STARPU_W) != 0)
		return -EIO;
	int32_t *lp = (int32_t *)starpu_vector_get_local_ptr(labels);
	for (int i = 0; i < n * SEQ_T; i++)
		lp[i] = (idx[i / SEQ_T] + i) % SEQ_V;
	starpu_data_release(labels);
	return 0;
}

static void seq_step(int train)
{
	char err[512];
	const dnn_exec_config cfg = DNN_EXEC_CONFIG_DEFAULTS;
	dnn_graph g;
	dnn_model m;
	dnn_plan p;
	if (dnn_graph_parse(&g, seq_net, "seq", err, sizeof(err)) != 0)
		die("graph", err);
	if (dnn_model_create(&m, &g, 7, err, sizeof(err)) != 0)
		die("model", err);
	if (dnn_plan_create(&p, &m, BATCH, 2, 1, train, &cfg, err, sizeof(err)) != 0)
		die("plan", err);
	dnn_data_source src = {.insert_load = seq_insert_load};
	dnn_optim_config optim = {.lr = 0.01f, .momentum = 0.9f, .weight_decay = 5e-4f};
	int idx[BATCH];
	for (int i = 0; i < BATCH; i++)
		idx[i] = i;
	double l, c;
	if (dnn_submit_step(&p, 0, &src, idx, 0, &optim, err, sizeof(err)) != 0 ||
	    dnn_wait_step(&p, 0, &l, &c, err, sizeof(err)) != 0)
		die(train ? "sequence training step" : "sequence evaluation step", err);
	starpu_task_wait_for_all();
	printf("%-8s %-6s %s: %ld tasks, loss %.4f; %d distinct codelets so far\n", "seq", "memory",
	       train ? "train" : "eval ", p.tasks_per_step, l / BATCH, nrecorded);
	dnn_plan_destroy(&p);
	dnn_model_destroy(&m);
	dnn_graph_free(&g);
}

static int recorded_named(const char *name)
{
	for (int i = 0; i < nrecorded; i++)
		if (recorded[i]->name && !strcmp(recorded[i]->name, name))
			return 1;
	return 0;
}

int main(void)
{
	struct starpu_conf conf;
	if (starpu_conf_init(&conf) != 0)
		die("starpu_conf_init", "failed");
	conf.sched_policy = &rec_policy;
	int rc = starpu_init(&conf);
	if (rc == -ENODEV) {
		fprintf(stderr, "SKIP: no StarPU worker available\n");
		return TEST_SKIP;
	}
	if (rc != 0)
		die("starpu_init", strerror(-rc));
#ifdef DNN_HAVE_CUDA
	char cerr[512];
	const dnn_exec_config defaults = DNN_EXEC_CONFIG_DEFAULTS;
	if (dnn_cuda_init(&defaults.cuda, cerr, sizeof(cerr)) != 0)
		die("dnn_cuda_init", cerr);
#endif
	test_rng_seed(2024);
	dnn_dataset mem, folder, tokens;
	mem_set(&mem, 32);
	folder_set(&folder, 12);
	token_set(&tokens);

	/* not level 3: CPU-only by design, graph/fuse.c takes it only where no CUDA worker exists */
	for (int fuse = 0; fuse <= 2; fuse++)
		for (int train = 1; train >= 0; train--) {
			one_step("lenet5", NULL, &mem, fuse, train);
			one_step("resnet8", NULL, &mem, fuse, train);
			one_step("mixed", mixed_net, &mem, fuse, train);
			one_step("tokens", tokens_net, &tokens, fuse, train);
		}
	for (int train = 1; train >= 0; train--)
		one_step("lenet5", NULL, &folder, 1, train);
	for (int fuse = 0; fuse <= 1; fuse++) /* --batchnorm global: its sums, with and without the fused relu */
		for (int redux = 0; redux <= 1; redux++) /* fixed-order sums, and --deterministic off */
			one_step_bn("mixed", mixed_net, &mem, fuse, 1, 1, redux);
	one_step_bn("resnet8", NULL, &mem, 1, 1, 0, 1); /* --deterministic off's gradient reductions */
	for (int train = 1; train >= 0; train--) /* attention: forward with and without its saved buffer */
		seq_step(train);
	g_clip = 0.01f; /* --clip-grad-norm: the sums of squares and the coefficient */
	one_step("lenet5", NULL, &mem, 1, 1);
	g_clip = 0;
	one_step_bn("tokens", tokens_net, &tokens, 1, 1, 0, 1); /* the tied table's REDUX gradient */

	/* The check. */
	int bad = 0;
	printf("\n%d distinct codelets scheduled:\n", nrecorded);
	for (int i = 0; i < nrecorded; i++) {
		const struct starpu_codelet *cl = recorded[i];
		const char *name = cl->name ? cl->name : "(unnamed)";
		int declared = dnn_codelet_declares_cuda(cl);
#ifdef DNN_HAVE_CUDA
		int has = cl->cuda_funcs[0] != NULL;
		if (declared && !has)
			fprintf(stderr, "FAIL: %s is registered with DNN_CUDA_DECLARED but has no CUDA function\n", name);
		bad += declared && !has;
#else
		int has = declared;
#endif
		printf("  %-28s %s\n", name, has ? "cuda" : "CPU ONLY");
		if (!has) {
			fprintf(stderr, "FAIL: codelet %s has no CUDA implementation: a step cannot run on a GPU alone\n", name);
			bad++;
		}
	}
	TEST_CHECK(bad == 0, "%d codelet(s) of a training or evaluation step lack a CUDA implementation", bad);
	TEST_CHECK(!overflow, "more than %d distinct codelets: raise MAX_CL", MAX_CL);
	TEST_CHECK(nrecorded >= MIN_CODELETS, "only %d distinct codelets recorded (want >= %d): is the recording policy in use?",
		   nrecorded, MIN_CODELETS);
	const char *must[] = {"cl_load_batch",    "cl_load_images",        "cl_conv2d_fwd",     "cl_conv2d_bwd_filter",
			      "cl_optim_update",    "cl_dropout_fwd",        "cl_dropout_bwd",    "cl_batchnorm_fwd_eval",
			      "cl_batchnorm_bwd", "cl_avgpool_bwd",        "cl_maxpool_bwd",    "cl_add_fwd",
			      "cl_softmax_xent",  "cl_dense_bwd_weight",   "cl_vec_zero",       "cl_vec_redux_add",
			      "cl_vec_add_clear", "cl_grad_sumsq",       "cl_clip_coef",      "cl_load_tokens"};
	for (size_t i = 0; i < sizeof(must) / sizeof(must[0]); i++)
		TEST_CHECK(recorded_named(must[i]), "%s was never scheduled: the nets do not cover it", must[i]);
	const char *bn_global[] = {"cl_batchnorm_sums_fwd", "cl_batchnorm_fwd_global", "cl_batchnorm_sums_bwd",
				   "cl_batchnorm_bwd_global", "cl_bn_dsum_zero", "cl_bn_dsum_redux_add"};
	for (size_t i = 0; i < sizeof(bn_global) / sizeof(bn_global[0]); i++)
		TEST_CHECK(recorded_named(bn_global[i]), "%s was never scheduled: --batchnorm global is not covered", bn_global[i]);
	TEST_CHECK(recorded_named("cl_leaky_relu_fwd") && recorded_named("cl_leaky_relu_bwd"),
		   "cl_leaky_relu_fwd/bwd were never scheduled: the nets do not cover leaky_relu");
	TEST_CHECK(recorded_named("cl_layernorm_fwd") && recorded_named("cl_layernorm_bwd"),
		   "cl_layernorm_fwd/bwd were never scheduled: the nets do not cover layernorm");
	TEST_CHECK(recorded_named("cl_gelu_fwd") && recorded_named("cl_gelu_bwd"),
		   "cl_gelu_fwd/bwd were never scheduled: the nets do not cover gelu");
	TEST_CHECK(recorded_named("cl_attention_fwd") && recorded_named("cl_attention_bwd"),
		   "cl_attention_fwd/bwd were never scheduled: the nets do not cover attention");
	TEST_CHECK(recorded_named("cl_embed_fwd") && recorded_named("cl_embed_bwd") &&
			   recorded_named("cl_dense_fwd_nobias") && recorded_named("cl_dense_bwd_weight_nobias"),
		   "embed's or lm_head's codelets were never scheduled: the nets do not cover embed and lm_head");

	dnn_dataset_free(&mem);
	dnn_dataset_free(&tokens);
	dnn_dataset_free(&folder);
	test_rmtree(tmpdir);
	dnn_runtime_shutdown();
	return test_report("unit_cuda_coverage");
}
