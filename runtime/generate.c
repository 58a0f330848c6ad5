/* generate.c — `starpu_anp generate`: text from a byte-level language model's checkpoint
 * (dnn_cmd_generate, starpu_anp.h; docs/transformers.md "Commands").
 *
 * Each new byte is one forward pass of the net in eval mode through the evaluation machinery: a
 * plan of one sample in one chunk (graph/model.h), whose input-loading task reads the context as
 * a token set of one window (data_source.h). The context is the last T tokens; a shorter one is
 * the window's first positions and the rest is padding, which a causal net never lets the real
 * positions see: the logits at the last real position give the next token. It is drawn from the
 * softmax of logits / temperature over the top-k (greedy argmax at temperature 0, lower index on
 * ties) with the seeded splitmix64, so a command gives the same text each time.
 */
#include <math.h>
#include <starpu.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data.h"
#include "data_source.h"
#include "dnn_rng.h"
#include "graph.h"
#include "knobs.h"
#include "model_ckpt.h"
#include "progress.h"
#include "starpu_anp.h"

#define BYTE_VOCAB 256

typedef struct {
	int idx;
	float z;
} ranked;

/* Larger logit first, then lower index: a total order, so top-k and greedy are deterministic. */
static int by_logit(const void *a, const void *b)
{
	const ranked *x = a, *y = b;
	if (x->z != y->z)
		return x->z > y->z ? -1 : 1;
	return x->idx - y->idx;
}

/* The next token from one position's logits (V of them); r: V entries of scratch. */
static int sample_next(const float *logits, int V, double temperature, int top_k, uint64_t *rng, ranked *r)
{
	for (int v = 0; v < V; v++)
		r[v] = (ranked){v, logits[v]};
	qsort(r, (size_t)V, sizeof(*r), by_logit);
	if (temperature <= 0)
		return r[0].idx;
	const int k = top_k > 0 && top_k < V ? top_k : V;
	double sum = 0;
	for (int i = 0; i < k; i++) /* r[0] holds the largest: exp() never overflows */
		sum += exp(((double)r[i].z - r[0].z) / temperature);
	double u = dnn_uniform01(rng) * sum;
	for (int i = 0; i < k; i++) {
		u -= exp(((double)r[i].z - r[0].z) / temperature);
		if (u <= 0)
			return r[i].idx;
	}
	return r[k - 1].idx; /* rounding left a sliver */
}

/* The net must be a byte-level language model. Returns 0, or 2 after one line naming the reason. */
static int check_byte_lm(const dnn_graph *g, const dnn_train_opts *o)
{
	if (dnn_data_token_context(g) <= 0) {
		fprintf(stderr, "error: --checkpoint %s: net %s is no language model (its input line is not 'input "
				"NAME tokens T'): generate needs one\n", o->checkpoint_in, o->net);
		return 2;
	}
	if (g->classes != BYTE_VOCAB) {
		fprintf(stderr, "error: --checkpoint %s: net %s has a vocabulary of %d tokens, not the byte "
				"tokenizer's %d: generate writes bytes and has no decoder for other token ids\n",
			o->checkpoint_in, o->net, g->classes, BYTE_VOCAB);
		return 2;
	}
	return 0;
}

/* The forward of one window (ctx: T+1 tokens, the first len real) and the logits at position len-1
 * into out (V floats). Returns 0, or -1 after one error line. */
static int forward_last(dnn_plan *p, const dnn_data_source *src, long step, int len, float *out)
{
	char err[512];
	const dnn_graph *g = p->m->g;
	const int V = g->classes, logits = g->nodes[g->nnodes - 1].inputs[0], idx = 0;
	dnn_optim_config none = {0};
	double l, c;
	if (dnn_submit_step(p, 0, src, &idx, step, &none, err, sizeof(err)) != 0 ||
	    dnn_wait_step(p, 0, &l, &c, err, sizeof(err)) != 0) {
		fprintf(stderr, "error: %s\n", err);
		return -1;
	}
	starpu_data_handle_t h = p->y[logits * p->nchunks + 0];
	int rc = starpu_data_acquire(h, STARPU_R);
	if (rc != 0) {
		fprintf(stderr, "error: starpu_data_acquire (logits): %s\n", strerror(-rc));
		return -1;
	}
	const float *y = starpu_data_get_local_ptr(h); /* (T, V) of the one sample */
	memcpy(out, y + (size_t)(len - 1) * V, sizeof(float) * (size_t)V);
	starpu_data_release(h);
	return 0;
}

/* The generation loop: history holds the prompt's nh tokens and room for go->tokens more. */
static int generate(dnn_model *m, const dnn_generate_opts *go, uint64_t seed, uint16_t *hist, long nh, long *made)
{
	char err[512];
	const int T = dnn_data_token_context(m->g), V = m->g->classes;
	dnn_plan p;
	if (dnn_plan_create(&p, m, 1, 1, 1, 0, dnn_knobs_get(), err, sizeof(err)) != 0) {
		fprintf(stderr, "error: generation plan: %s\n", err);
		return -1;
	}
	uint16_t *ctx = calloc((size_t)T + 1, sizeof(uint16_t));
	float *logits = malloc(sizeof(float) * (size_t)V);
	ranked *r = malloc(sizeof(ranked) * (size_t)V);
	int rc = ctx && logits && r ? 0 : -1;
	if (rc != 0)
		fprintf(stderr, "error: out of memory for the context of %d tokens\n", T);
	/* One window over ctx (the set borrows it: not freed with dnn_dataset_free). */
	dnn_dataset ds = {.n = 1, .C = 1, .H = T, .W = 1, .classes = V, .tokens = ctx, .ntokens = T + 1, .T = T,
			  .stride = T, .vocab = V, .bytes = 1};
	dnn_data_source src;
	dnn_dataset_source(&src, &ds);
	uint64_t rng = seed;
	for (long k = 0; rc == 0 && k < go->tokens; k++) {
		const long len = nh < T ? nh : T;
		memcpy(ctx, hist + (nh - len), sizeof(uint16_t) * (size_t)len);
		memset(ctx + len, 0, sizeof(uint16_t) * (size_t)(T + 1 - len)); /* padding: never seen by position len-1 */
		if (forward_last(&p, &src, k, (int)len, logits) != 0) {
			rc = -1;
			break;
		}
		const int next = sample_next(logits, V, go->temperature, go->top_k, &rng, r);
		hist[nh++] = (uint16_t)next;
		putchar(next);
		fflush(stdout);
		(*made)++;
	}
	int w = starpu_task_wait_for_all();
	if (w != 0 && rc == 0) {
		fprintf(stderr, "error: starpu_task_wait_for_all: %s\n", strerror(-w));
		rc = -1;
	}
	dnn_plan_destroy(&p);
	free(ctx), free(logits), free(r);
	return rc;
}

int dnn_cmd_generate(const dnn_train_opts *o, const dnn_generate_opts *go)
{
	char err[1024];
	dnn_graph g;
	int rc = dnn_ckpt_open_graph(&g, o, NULL); /* the checkpoint's net (model_ckpt.h) */
	if (rc != 0)
		return rc;
	if ((rc = check_byte_lm(&g, o)) != 0) {
		dnn_graph_free(&g);
		return rc;
	}
	dnn_model m;
	if (dnn_model_create(&m, &g, o->seed, err, sizeof(err)) != 0) {
		fprintf(stderr, "error: %s\n", err);
		dnn_graph_free(&g);
		return 1;
	}
	rc = 1;
	const long np = (long)strlen(go->prompt);
	uint16_t *hist = malloc(sizeof(uint16_t) * (size_t)(np + go->tokens));
	if (!hist) {
		fprintf(stderr, "error: out of memory for %ld tokens\n", np + go->tokens);
		goto out;
	}
	if (dnn_model_load(&m, o->checkpoint_in, NULL, NULL, NULL, err, sizeof(err)) != 0) {
		fprintf(stderr, "error: %s\n", err);
		goto out;
	}
	for (long i = 0; i < np; i++)
		hist[i] = (unsigned char)go->prompt[i];
	fwrite(go->prompt, 1, (size_t)np, stdout); /* the text is the prompt and what follows it */
	long made = 0;
	const double t0 = dnn_now();
	const int grc = generate(&m, go, o->seed, hist, np, &made);
	const double wall = dnn_now() - t0;
	fflush(stdout);
	if (grc == 0) {
		rc = 0;
		if (!o->quiet) /* stdout holds only the text */
			fprintf(stderr, "\nresult: cmd=generate net=%s checkpoint=%s prompt_bytes=%ld tokens=%ld temperature=%g "
					"top_k=%d seed=%llu tokens_per_s=%.1f wall_s=%.2f\n",
				o->net, o->checkpoint_in, np, made, go->temperature, go->top_k, (unsigned long long)o->seed,
				wall > 0 ? made / wall : 0, wall);
	}
out:
	free(hist);
	dnn_model_destroy(&m);
	dnn_graph_free(&g);
	return rc;
}
