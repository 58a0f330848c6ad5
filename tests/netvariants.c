/* netvariants — a helper of tests/scripts/bad_same_net.sh (not a test): the nets that differ from
 * a base net in exactly one key, for every key of every op, read from the op descriptors
 * (graph/op.h), so a new op or key is covered without editing the test.
 *
 *   netvariants keys BASE.net OUTDIR
 *     For every op of graph/ops/ops.def and every key of its descriptor, and for the input line's
 *     channel count: the first node of that op (topological order) and the first new value
 *     (int: +1, -1, the range's ends; float: /2, *2, the range's ends) for which the changed net
 *     still parses and infers; written as OUTDIR/<op>.<key>.net (its canonical text). Prints one
 *     line per variant, "<op> <key> <node number> <node name> <new value> <old value> <file>",
 *     then "covered N keys of M ops". Exits 1, naming it, on an op that BASE does not use or a
 *     key that no node of BASE lets change: the test then fails instead of skipping the key.
 *     Further bases after OUTDIR (`keys BASE.net OUTDIR SEQ.net ...`: nets of another input,
 *     tests/data/every_seq_op.net's tokens for the ops that take only sequences, which an image net
 *     cannot hold) count too: an op is covered by the first base that uses it, and its variants
 *     are that base's, written as OUTDIR/<op>.<key>.net alike.
 *   netvariants ckpt NET.net CKPT
 *     A checkpoint of NET's freshly made model (seed 1, step 0), as train writes one: for a base
 *     no command can train yet (a token net before a token data set), whose variants must still
 *     be refused against it.
 *   netvariants fp-v1 CKPT
 *     The structure hash (what version-1 and -2 checkpoints stored as their fingerprint) of the
 *     net that CKPT carries, in hex: tests/scripts/ckpt_v1.py writes it into the version-1 file. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "graph.h"
#include "model_ckpt.h"
#include "op.h"
#include "starpu_anp.h"

/* The net g with node i's key ky set by set(): parsed back from its canonical text, so shape
 * inference and the op's checks run. 0 when it parses and differs from g in that node and key
 * alone (d: the difference). */
static int try_variant(const dnn_graph *g, int i, const char *key, void (*set)(dnn_node *, const void *),
		       const void *value, dnn_graph *out, dnn_graph_diff *d)
{
	dnn_graph c = *g;
	c.nodes = malloc(sizeof(dnn_node) * (size_t)g->nnodes);
	if (!c.nodes)
		return -1;
	memcpy(c.nodes, g->nodes, sizeof(dnn_node) * (size_t)g->nnodes);
	set(&c.nodes[i], value);
	char *text = dnn_graph_to_text(&c, NULL), err[512];
	free(c.nodes);
	if (!text)
		return -1;
	int rc = dnn_graph_parse(out, text, "variant.net", err, sizeof(err));
	free(text);
	if (rc != 0)
		return -1;
	if (dnn_graph_compare(out, g, d) == 1 && d->node == i + 1 && !strcmp(d->key, key))
		return 0;
	dnn_graph_free(out);
	return -1;
}

static const dnn_op_key *cur_key;
static void set_key(dnn_node *n, const void *v)
{
	void *field = (char *)n + cur_key->offset;
	if (cur_key->type == 'i')
		*(int *)field = (int)*(const double *)v;
	else
		*(float *)field = (float)*(const double *)v;
}
static void set_channels(dnn_node *n, const void *v) { n->C = (int)*(const double *)v; }

/* Candidate new values of a key whose value is v, within [lo, hi]. */
static int candidates(char type, double v, double lo, double hi, double *out)
{
	double c[4] = {v + 1, v - 1, lo, hi};
	if (type == 'f')
		c[0] = v / 2, c[1] = v * 2;
	int n = 0;
	for (int k = 0; k < 4; k++)
		if (c[k] >= lo && c[k] <= hi && c[k] != v)
			out[n++] = c[k];
	return n;
}

static int write_variant(const dnn_graph *v, const char *dir, const char *op, const char *key, const dnn_graph_diff *d)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s.%s.net", dir, op, key);
	char *text = dnn_graph_to_text(v, "a variant of the every-op net (tests/netvariants.c)");
	FILE *f = fopen(path, "w");
	int ok = text && f && fputs(text, f) >= 0;
	if (f && fclose(f) != 0)
		ok = 0;
	free(text);
	if (!ok) {
		fprintf(stderr, "netvariants: cannot write %s\n", path);
		return -1;
	}
	printf("%s %s %d %s %s %s %s\n", op, key, d->node, d->name, d->a, d->b, path);
	return 0;
}

/* The first node of op (topological order) and value that make a variant in key: written. */
static int variant_of(const dnn_graph *g, dnn_op op, const dnn_op_key *ky, const char *dir)
{
	const char *key = ky ? ky->key : "C";
	for (int i = 0; i < g->nnodes; i++) {
		const dnn_node *n = &g->nodes[i];
		if (n->op != op)
			continue;
		double v, vals[4];
		int nv;
		if (ky) {
			const void *field = (const char *)n + ky->offset;
			v = ky->type == 'i' ? *(const int *)field : *(const float *)field;
			nv = candidates(ky->type, v, ky->lo, ky->hi, vals);
		} else {
			nv = candidates('i', n->C, 1, DNN_MAX_CHANNELS, vals);
		}
		cur_key = ky;
		for (int k = 0; k < nv; k++) {
			dnn_graph out;
			dnn_graph_diff d;
			if (try_variant(g, i, key, ky ? set_key : set_channels, &vals[k], &out, &d) != 0)
				continue;
			int rc = write_variant(&out, dir, dnn_op_name(op), key, &d);
			dnn_graph_free(&out);
			return rc;
		}
	}
	fprintf(stderr, "netvariants: no node of op %s in the base net lets its key %s change (add one that does)\n",
		dnn_op_name(op), key);
	return -1;
}

#define MAX_BASES 4

static int cmd_keys(char **base, int nbase, const char *dir)
{
	dnn_graph g[MAX_BASES];
	char err[512];
	for (int b = 0; b < nbase; b++)
		if (dnn_graph_load(&g[b], base[b], err, sizeof(err)) != 0) {
			fprintf(stderr, "netvariants: %s\n", err);
			while (b-- > 0)
				dnn_graph_free(&g[b]);
			return 1;
		}
	int bad = 0, nkeys = 0;
	for (int o = 0; o < DNN_OP_COUNT; o++) {
		int used = -1; /* the first base that uses op o */
		for (int b = 0; b < nbase && used < 0; b++)
			for (int i = 0; i < g[b].nnodes; i++)
				used = g[b].nodes[i].op == (dnn_op)o ? b : used;
		if (used < 0) {
			fprintf(stderr, "netvariants: op %s is not in %s%s: add a line that uses it\n", dnn_op_name((dnn_op)o),
				base[0], nbase > 1 ? " nor the other bases" : "");
			bad = 1;
			continue;
		}
		const dnn_op_desc *d = dnn_op_get((dnn_op)o);
		for (int k = 0; k < d->nkeys; k++, nkeys++)
			bad |= variant_of(&g[used], (dnn_op)o, &d->keys[k], dir) != 0;
		if (o == DNN_OP_INPUT) /* the input line's shape is positional: its channels */
			bad |= variant_of(&g[used], DNN_OP_INPUT, NULL, dir) != 0, nkeys++;
	}
	printf("covered %d keys of %d ops\n", nkeys, DNN_OP_COUNT);
	for (int b = 0; b < nbase; b++)
		dnn_graph_free(&g[b]);
	return bad;
}

/* argc, argv: the whole command line (start-up may re-execute the program with it). */
static int cmd_ckpt(int argc, char **argv, const char *net, const char *ck)
{
	char err[1024];
	dnn_graph g;
	dnn_model m;
	if (dnn_graph_load(&g, net, err, sizeof(err)) != 0) {
		fprintf(stderr, "netvariants: %s\n", err);
		return 1;
	}
	int rc = dnn_runtime_init(&argc, &argv, 0, err, sizeof(err));
	if (rc == 0) {
		rc = dnn_model_create(&m, &g, 1, err, sizeof(err));
		if (rc == 0) {
			rc = dnn_model_save(&m, ck, 0, 0, 1, err, sizeof(err));
			dnn_model_destroy(&m);
		}
		dnn_runtime_shutdown();
	}
	dnn_graph_free(&g);
	if (rc != 0)
		fprintf(stderr, "netvariants: %s\n", err);
	return rc != 0;
}

static int cmd_fp_v1(const char *ck)
{
	dnn_ckpt_meta info;
	dnn_graph g;
	char err[1024];
	if (dnn_checkpoint_read_info(ck, &info, 1, err, sizeof(err)) != 0 || !info.net_text) {
		fprintf(stderr, "netvariants: %s\n", info.net_text ? err : "the checkpoint carries no net");
		return 1;
	}
	int rc = dnn_graph_parse(&g, info.net_text, ck, err, sizeof(err));
	dnn_ckpt_free_names(&info);
	if (rc != 0) {
		fprintf(stderr, "netvariants: %s\n", err);
		return 1;
	}
	printf("%016llx\n", (unsigned long long)dnn_graph_structure_hash(&g));
	dnn_graph_free(&g);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 4 && argc - 3 <= MAX_BASES && !strcmp(argv[1], "keys")) {
		char *bases[MAX_BASES] = {argv[2]};
		for (int i = 4; i < argc; i++)
			bases[i - 3] = argv[i];
		return cmd_keys(bases, argc - 3, argv[3]);
	}
	if (argc == 4 && !strcmp(argv[1], "ckpt"))
		return cmd_ckpt(argc, argv, argv[2], argv[3]);
	if (argc == 3 && !strcmp(argv[1], "fp-v1"))
		return cmd_fp_v1(argv[2]);
	fprintf(stderr, "usage: netvariants keys BASE.net OUTDIR [MORE.net ...] | netvariants ckpt NET.net CKPT | "
			"netvariants fp-v1 CKPT\n");
	return 2;
}
