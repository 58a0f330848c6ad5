/* graph.c — net-file parser, validation, shape inference, the canonical text (what "the same net"
 * means: compare, fingerprint) and summary. What each op accepts and computes is its
 * descriptor's (op.h, graph/ops/); this file only drives them. */
#include "graph.h"

#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuse.h"
#include "op.h"

#define MAX_NODES 10000
#define MAX_LINE 4096
#define MAX_TOKENS 64
#define NODE_LINE_MAX DNN_DIFF_TEXT
/* Limits of net files (graph.h has the per-attribute ones). */
#define MAX_CHANNELS DNN_MAX_CHANNELS
#define MAX_SPATIAL DNN_MAX_SPATIAL
#define MAX_SAMPLE_FLOATS (1LL << 28) /* one activation of one sample: 1 GiB of float32 */

#define fail dnn_op_fail

/* Strict integer: whole token, in [lo, hi]. */
static int parse_int(const char *s, long lo, long hi, int *out)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || end == s || *end != '\0' || v < lo || v > hi)
		return -1;
	*out = (int)v;
	return 0;
}

/* Strict float: whole token, in [lo, hi] once rounded to float like the bounds (so the canonical
 * text of a bound, p=0.99 written as 0.99000001, reads back). */
static int parse_float(const char *s, double lo, double hi, float *out)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || *end != '\0' || !(v >= -FLT_MAX && v <= FLT_MAX))
		return -1;
	const float f = (float)v;
	if (!(f >= (float)lo && f <= (float)hi))
		return -1;
	*out = f;
	return 0;
}

static int valid_name(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n >= DNN_NAME_MAX)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!(isalnum((unsigned char)s[i]) || s[i] == '_' || s[i] == '-' || s[i] == '.'))
			return 0;
	return 1;
}

/* Pending input names per node, resolved once every node is known. */
typedef struct {
	char names[DNN_MAX_INPUTS][DNN_NAME_MAX];
} pending_inputs;

static int find_node(const dnn_node *nodes, int n, const char *name)
{
	for (int i = 0; i < n; i++)
		if (strcmp(nodes[i].name, name) == 0)
			return i;
	return -1;
}

static int parse_keys(dnn_node *nd, char **tok, int ntok, const char *src, int line, char *err, size_t errlen)
{
	const dnn_op_desc *d = dnn_op_get(nd->op);
	for (int t = 0; t < ntok; t++) {
		char *eq = strchr(tok[t], '=');
		if (!eq)
			return fail(err, errlen, src, line, "expected key=value, got '%s'", tok[t]);
		*eq = '\0';
		const char *key = tok[t], *val = eq + 1;
		int done = 0;
		for (int k = 0; k < d->nkeys && !done; k++) {
			const dnn_op_key *ky = &d->keys[k];
			if (strcmp(key, ky->key) != 0)
				continue;
			void *field = (char *)nd + ky->offset;
			if (ky->type == 'i' && parse_int(val, (long)ky->lo, (long)ky->hi, field) != 0)
				return fail(err, errlen, src, line, "%s: %s=%s is not an integer in [%ld, %ld]", nd->name, key,
					    val, (long)ky->lo, (long)ky->hi);
			if (ky->type == 'f' && parse_float(val, ky->lo, ky->hi, field) != 0)
				return fail(err, errlen, src, line, "%s: %s=%s is not a number in [%g, %g]", nd->name, key, val,
					    ky->lo, ky->hi);
			done = 1;
		}
		if (!done)
			return fail(err, errlen, src, line, "unknown key '%s' for op %s", key, dnn_op_name(nd->op));
	}
	return 0;
}

/* Shape inference for one node whose inputs already have shapes: the op's, plus the size bound. */
static int infer_node(dnn_graph *g, dnn_node *nd, char *err, size_t errlen)
{
	nd->params = 0;
	nd->flops = 0;
	nd->seq = nd->op == DNN_OP_INPUT ? nd->seq : 0;
	const dnn_op_desc *d = dnn_op_get(nd->op);
	for (int j = 0; j < nd->ninputs && d->image_only; j++)
		if (g->nodes[nd->inputs[j]].seq)
			return fail(err, errlen, g->source, nd->line, "%s: %s takes images (C H W), but %s is a sequence",
				    nd->name, d->name, g->nodes[nd->inputs[j]].name);
	if (d->infer(g, nd, err, errlen) != 0)
		return -1;
	if ((long long)nd->C * nd->H * nd->W > MAX_SAMPLE_FLOATS)
		return fail(err, errlen, g->source, nd->line, "%s: output %dx%dx%d is absurdly large", nd->name, nd->C,
			    nd->H, nd->W);
	return 0;
}

static int infer_all(dnn_graph *g, char *err, size_t errlen)
{
	for (int i = 0; i < g->nnodes; i++)
		if (infer_node(g, &g->nodes[i], err, errlen) != 0)
			return -1;
	return 0;
}

/* One line of net-file text, copied into line (MAX_LINE + 2 bytes) and split into tokens (the
 * comment cut off). *p advances past it. Returns the token count (0: blank or comment only), or
 * -1 with "src:line: message". */
static int tokenise_line(const char **p, char *line, char **tok, const char *src, int lineno, char *err,
			 size_t errlen)
{
	const char *eol = strchr(*p, '\n');
	size_t len = eol ? (size_t)(eol - *p) : strlen(*p);
	if (len > MAX_LINE)
		return fail(err, errlen, src, lineno, "line longer than %d characters", MAX_LINE);
	memcpy(line, *p, len);
	line[len] = '\0';
	*p += len + (eol ? 1 : 0);
	for (size_t i = 0; i < len; i++)
		if (line[i] == '\0' || (!isprint((unsigned char)line[i]) && !isspace((unsigned char)line[i])))
			return fail(err, errlen, src, lineno, "binary or non-ASCII character (0x%02x)",
				    (unsigned char)line[i]);
	char *hash = strchr(line, '#');
	if (hash)
		*hash = '\0';
	int ntok = 0;
	for (char *t = strtok(line, " \t\r\v\f"); t; t = strtok(NULL, " \t\r\v\f")) {
		if (ntok == MAX_TOKENS)
			return fail(err, errlen, src, lineno, "too many fields");
		tok[ntok++] = t;
	}
	return ntok;
}

/* The op of keyword kw: DNN_OP_COUNT and "src:line: unknown op ..." when there is none. */
static dnn_op lookup_op(const char *kw, const char *src, int lineno, char *err, size_t errlen)
{
	for (int o = 0; o < DNN_OP_COUNT; o++)
		if (strcmp(kw, dnn_op_name((dnn_op)o)) == 0)
			return (dnn_op)o;
	char ops[512] = "";
	for (int o = 0; o < DNN_OP_COUNT; o++)
		snprintf(ops + strlen(ops), sizeof(ops) - strlen(ops), "%s%s", o ? " " : "", dnn_op_name((dnn_op)o));
	fail(err, errlen, src, lineno, "unknown op '%s' (ops: %s)", kw, ops);
	return DNN_OP_COUNT;
}

/* The input line's shape: input <name> C H W. */
static int parse_input_shape(dnn_node *nd, char **tok, int ntok, const char *src, int lineno, char *err,
			     size_t errlen)
{
	int c, h, w;
	if (ntok >= 3 && !strcmp(tok[2], "tokens")) { /* input x tokens T: T token ids per sample */
		if (ntok != 4 || parse_int(tok[3], 1, MAX_SPATIAL, &h))
			return fail(err, errlen, src, lineno, "input %s tokens T: T must be an integer in [1, %d]", nd->name,
				    MAX_SPATIAL);
		nd->C = 1, nd->H = h, nd->W = 1, nd->seq = 1, nd->tokens = 1;
		return 0;
	}
	if (ntok >= 3 && !strcmp(tok[2], "seq")) { /* input x seq T C: T tokens of C floats */
		if (ntok != 5 || parse_int(tok[3], 1, MAX_SPATIAL, &h) || parse_int(tok[4], 1, MAX_CHANNELS, &c))
			return fail(err, errlen, src, lineno,
				    "input %s seq T C: T must be an integer in [1, %d], C in [1, %d]", nd->name,
				    MAX_SPATIAL, MAX_CHANNELS);
		nd->C = c, nd->H = h, nd->W = 1, nd->seq = 1;
	} else {
		if (ntok != 5)
			return fail(err, errlen, src, lineno,
				    "input needs a shape: input <name> C H W, input <name> seq T C or input <name> tokens T");
		if (parse_int(tok[2], 1, MAX_CHANNELS, &c) || parse_int(tok[3], 1, MAX_SPATIAL, &h) ||
		    parse_int(tok[4], 1, MAX_SPATIAL, &w))
			return fail(err, errlen, src, lineno,
				    "input shape '%s %s %s' must be integers (C in [1, %d], H and W in [1, %d])", tok[2],
				    tok[3], tok[4], MAX_CHANNELS, MAX_SPATIAL);
		nd->C = c, nd->H = h, nd->W = w;
	}
	if ((long long)nd->C * nd->H * nd->W > MAX_SAMPLE_FLOATS)
		return fail(err, errlen, src, lineno, "input %dx%dx%d is absurdly large", nd->C, nd->H, nd->W);
	return 0;
}

/* An op line after its name: the input names (into pend), their count, the keys and the op's
 * own checks. */
static int parse_op_fields(dnn_node *nd, pending_inputs *pend, char **tok, int ntok, const char *src, int lineno,
			   char *err, size_t errlen)
{
	const dnn_op_desc *desc = dnn_op_get(nd->op);
	if (ntok < 3 || strchr(tok[2], '='))
		return fail(err, errlen, src, lineno, "%s %s: missing input name(s)", tok[0], tok[1]);
	char *save = NULL;
	for (char *in = strtok_r(tok[2], ",", &save); in; in = strtok_r(NULL, ",", &save)) {
		if (nd->ninputs == DNN_MAX_INPUTS)
			return fail(err, errlen, src, lineno, "%s: more than %d inputs", nd->name, DNN_MAX_INPUTS);
		if (!valid_name(in))
			return fail(err, errlen, src, lineno, "%s: invalid input name '%s'", nd->name, in);
		snprintf(pend->names[nd->ninputs++], DNN_NAME_MAX, "%s", in);
	}
	const int want_min = desc->min_inputs, want_max = desc->max_inputs;
	if (nd->ninputs < want_min || nd->ninputs > want_max)
		return fail(err, errlen, src, lineno, "%s: op %s takes %s input%s, got %d", nd->name, tok[0],
			    want_max > 1 ? (want_max == 2 && want_min == 2 ? "two" : "two or more") : "one",
			    want_max > 1 ? "s" : "", nd->ninputs);
	if (desc->defaults)
		desc->defaults(nd);
	if (parse_keys(nd, tok + 3, ntok - 3, src, lineno, err, errlen) != 0)
		return -1;
	if (desc->check && desc->check(nd, src, err, errlen) != 0)
		return -1;
	return 0;
}

/* One node from the tokens of its line; nodes[0..n-1] are the nodes read so far (names must be
 * new). Input names go into pend, resolved once every node is known. */
static int parse_node(dnn_node *nodes, int n, pending_inputs *pend, char **tok, int ntok, const char *src,
		      int lineno, char *err, size_t errlen)
{
	dnn_node *nd = &nodes[n];
	memset(nd, 0, sizeof(*nd));
	memset(pend, 0, sizeof(*pend));
	nd->line = lineno;
	nd->op = lookup_op(tok[0], src, lineno, err, errlen);
	if (nd->op == DNN_OP_COUNT)
		return -1;
	if (ntok < 2)
		return fail(err, errlen, src, lineno, "%s: missing node name", tok[0]);
	if (!valid_name(tok[1]))
		return fail(err, errlen, src, lineno, "invalid name '%s' (letters, digits, _ - . ; at most %d chars)",
			    tok[1], DNN_NAME_MAX - 1);
	int dup = find_node(nodes, n, tok[1]);
	if (dup >= 0)
		return fail(err, errlen, src, lineno, "duplicate name '%s' (first defined on line %d)", tok[1],
			    nodes[dup].line);
	snprintf(nd->name, sizeof(nd->name), "%s", tok[1]);
	nd->stride = 1, nd->dilation = 1, nd->eps = 1e-5f, nd->momentum = 0.1f;
	if (nd->op == DNN_OP_INPUT)
		return parse_input_shape(nd, tok, ntok, src, lineno, err, errlen);
	return parse_op_fields(nd, pend, tok, ntok, src, lineno, err, errlen);
}

/* The nodes of a net's text, in file order, with their input names still pending. */
typedef struct {
	dnn_node *nodes;
	pending_inputs *pend;
	int n, cap;
} node_list;

static int grow_nodes(node_list *l, const char *src, int lineno, char *err, size_t errlen)
{
	if (l->n < l->cap)
		return 0;
	int cap = l->cap * 2;
	dnn_node *nn = realloc(l->nodes, (size_t)cap * sizeof(dnn_node));
	if (nn)
		l->nodes = nn;
	pending_inputs *np = nn ? realloc(l->pend, (size_t)cap * sizeof(pending_inputs)) : NULL;
	if (np)
		l->pend = np;
	if (!nn || !np)
		return fail(err, errlen, src, lineno, "out of memory");
	l->cap = cap;
	return 0;
}

/* Every line of text into l (allocated: the caller frees l->nodes and l->pend either way). */
static int tokenise(node_list *l, const char *text, const char *src, char *err, size_t errlen)
{
	l->cap = 64, l->n = 0;
	l->nodes = calloc((size_t)l->cap, sizeof(dnn_node));
	l->pend = calloc((size_t)l->cap, sizeof(pending_inputs));
	char *line = malloc(MAX_LINE + 2);
	int rc = -1, lineno = 0;
	if (!l->nodes || !l->pend || !line) {
		fail(err, errlen, src, 0, "out of memory");
		goto out;
	}
	for (const char *p = text; *p;) {
		char *tok[MAX_TOKENS];
		int ntok = tokenise_line(&p, line, tok, src, ++lineno, err, errlen);
		if (ntok < 0)
			goto out;
		if (ntok == 0)
			continue;
		if (l->n == MAX_NODES) {
			fail(err, errlen, src, lineno, "more than %d nodes", MAX_NODES);
			goto out;
		}
		if (grow_nodes(l, src, lineno, err, errlen) != 0 ||
		    parse_node(l->nodes, l->n, &l->pend[l->n], tok, ntok, src, lineno, err, errlen) != 0)
			goto out;
		l->n++;
	}
	if (l->n == 0) {
		fail(err, errlen, src, 0, "empty network (no nodes)");
		goto out;
	}
	rc = 0;
out:
	free(line);
	return rc;
}

/* Input names to node indices; then exactly one input line and one loss. */
static int resolve(node_list *l, const char *src, char *err, size_t errlen)
{
	dnn_node *nodes = l->nodes;
	const int n = l->n;
	for (int i = 0; i < n; i++)
		for (int j = 0; j < nodes[i].ninputs; j++) {
			int k = find_node(nodes, n, l->pend[i].names[j]);
			if (k < 0)
				return fail(err, errlen, src, nodes[i].line, "%s: unknown input '%s'", nodes[i].name,
					    l->pend[i].names[j]);
			if (k == i)
				return fail(err, errlen, src, nodes[i].line, "%s: a node cannot be its own input (cycle)",
					    nodes[i].name);
			nodes[i].inputs[j] = k;
		}
	int ninput = 0, nloss = 0;
	for (int i = 0; i < n; i++) {
		if (nodes[i].op == DNN_OP_INPUT && ninput++ > 0)
			return fail(err, errlen, src, nodes[i].line, "a net has exactly one input line ('%s' is a second)",
				    nodes[i].name);
		if (nodes[i].op == DNN_OP_SOFTMAX_XENT && nloss++ > 0)
			return fail(err, errlen, src, nodes[i].line, "a net has exactly one loss ('%s' is a second)",
				    nodes[i].name);
	}
	if (!ninput)
		return fail(err, errlen, src, 0, "no input line (input <name> C H W)");
	if (!nloss)
		return fail(err, errlen, src, 0, "no loss node (softmax_xent) — the last node must be the loss");
	return 0;
}

/* Kahn's order of the n nodes into order[] (ties by file order, so nets read top to bottom);
 * -1 with "src:line: ... cycle" naming a node on a cycle. */
static int kahn_order(const dnn_node *nodes, int n, int *order, const char *src, char *err, size_t errlen)
{
	int *indeg = calloc((size_t)n, sizeof(int));
	char *done = calloc((size_t)n, 1);
	if (!indeg || !done) {
		free(indeg), free(done);
		return fail(err, errlen, src, 0, "out of memory");
	}
	for (int i = 0; i < n; i++)
		indeg[i] = nodes[i].ninputs;
	int m = 0;
	while (m < n) {
		int pick = -1;
		for (int i = 0; i < n && pick < 0; i++)
			if (!done[i] && indeg[i] == 0)
				pick = i;
		if (pick < 0)
			break;
		done[pick] = 1;
		order[m++] = pick;
		for (int i = 0; i < n; i++)
			for (int j = 0; j < nodes[i].ninputs; j++)
				if (nodes[i].inputs[j] == pick)
					indeg[i]--;
	}
	int rc = 0;
	if (m < n) {
		int bad = 0;
		while (done[bad])
			bad++;
		rc = fail(err, errlen, src, nodes[bad].line, "%s: the net has a cycle through this node", nodes[bad].name);
	}
	free(indeg), free(done);
	return rc;
}

/* l->nodes in topological order, inputs renumbered. */
static int sort_nodes(node_list *l, const char *src, char *err, size_t errlen)
{
	const int n = l->n;
	int *order = malloc((size_t)n * sizeof(int)), *newidx = malloc((size_t)n * sizeof(int));
	dnn_node *sorted = malloc((size_t)n * sizeof(dnn_node));
	int rc = -1;
	if (!order || !newidx || !sorted)
		fail(err, errlen, src, 0, "out of memory");
	else if (kahn_order(l->nodes, n, order, src, err, errlen) == 0) {
		for (int i = 0; i < n; i++)
			newidx[order[i]] = i;
		for (int i = 0; i < n; i++) {
			sorted[i] = l->nodes[order[i]];
			for (int j = 0; j < sorted[i].ninputs; j++)
				sorted[i].inputs[j] = newidx[sorted[i].inputs[j]];
		}
		free(l->nodes);
		l->nodes = sorted;
		sorted = NULL;
		rc = 0;
	}
	free(order), free(newidx), free(sorted);
	return rc;
}

/* The sorted net's shape rules: the input first, the loss last and fed only by its input, every
 * other output used. Counts the consumers. */
static int check_wiring(dnn_node *nodes, int n, const char *src, char *err, size_t errlen)
{
	if (nodes[0].op != DNN_OP_INPUT)
		return fail(err, errlen, src, nodes[0].line, "%s: only the input line may have no inputs", nodes[0].name);
	for (int i = 0; i < n; i++)
		for (int j = 0; j < nodes[i].ninputs; j++)
			nodes[nodes[i].inputs[j]].nconsumers++;
	if (nodes[n - 1].op != DNN_OP_SOFTMAX_XENT) /* something else is last in topological order: unused */
		return fail(err, errlen, src, nodes[n - 1].line, "%s: output is never used (the loss must come last)",
			    nodes[n - 1].name);
	for (int i = 0; i < n - 1; i++)
		if (nodes[i].nconsumers == 0)
			return fail(err, errlen, src, nodes[i].line, "%s: output is never used", nodes[i].name);
	if (nodes[nodes[n - 1].inputs[0]].nconsumers != 1)
		return fail(err, errlen, src, nodes[n - 1].line, "%s: its input '%s' must feed only the loss",
			    nodes[n - 1].name, nodes[nodes[n - 1].inputs[0]].name);
	return 0;
}

/* Three passes: tokenise (lines into nodes, each checked by its op's descriptor), resolve (input
 * names, one input line and one loss), sort (topological order); then the wiring rules and shape
 * inference. */
int dnn_graph_parse(dnn_graph *g, const char *text, const char *source, char *err, size_t errlen)
{
	memset(g, 0, sizeof(*g));
	snprintf(g->source, sizeof(g->source), "%s", source);
	const char *src = g->source;
	node_list l = {0};
	int rc = -1;
	if (tokenise(&l, text, src, err, errlen) != 0 || resolve(&l, src, err, errlen) != 0 ||
	    sort_nodes(&l, src, err, errlen) != 0)
		goto out;
	g->nodes = l.nodes;
	g->nnodes = l.n;
	if (check_wiring(l.nodes, l.n, src, err, errlen) != 0 || infer_all(g, err, errlen) != 0) {
		g->nodes = NULL;
		g->nnodes = 0;
		goto out;
	}
	l.nodes = NULL;
	rc = 0;
out:
	free(l.nodes);
	free(l.pend);
	return rc;
}

int dnn_graph_load(dnn_graph *g, const char *name_or_path, char *err, size_t errlen)
{
	const char *builtin = dnn_builtin_net_text(name_or_path);
	if (builtin) {
		char src[128];
		snprintf(src, sizeof(src), "%s.net", name_or_path);
		return dnn_graph_parse(g, builtin, src, err, errlen);
	}
	struct stat st;
	if (stat(name_or_path, &st) != 0) {
		char names[512] = "";
		for (int i = 0; i < dnn_builtin_net_count(); i++) {
			strncat(names, " ", sizeof(names) - strlen(names) - 1);
			strncat(names, dnn_builtin_net_name(i), sizeof(names) - strlen(names) - 1);
		}
		return fail(err, errlen, name_or_path, 0, "no such net file, and not a built-in net (built-in:%s)", names);
	}
	if (S_ISDIR(st.st_mode))
		return fail(err, errlen, name_or_path, 0, "is a directory, not a net file");
	if (st.st_size > (16 << 20))
		return fail(err, errlen, name_or_path, 0, "net file is larger than 16 MiB");
	FILE *f = fopen(name_or_path, "rb");
	if (!f)
		return fail(err, errlen, name_or_path, 0, "cannot open: %s", strerror(errno));
	char *text = malloc((size_t)st.st_size + 1);
	if (!text) {
		fclose(f);
		return fail(err, errlen, name_or_path, 0, "out of memory");
	}
	size_t got = fread(text, 1, (size_t)st.st_size, f);
	int rerr = ferror(f);
	fclose(f);
	if (rerr) {
		free(text);
		return fail(err, errlen, name_or_path, 0, "read error");
	}
	text[got] = '\0';
	if (memchr(text, '\0', got)) {
		free(text);
		return fail(err, errlen, name_or_path, 0, "binary file (contains NUL bytes), not a net file");
	}
	int rc = dnn_graph_parse(g, text, name_or_path, err, errlen);
	free(text);
	return rc;
}

void dnn_graph_free(dnn_graph *g)
{
	free(g->nodes);
	g->nodes = NULL;
	g->nnodes = 0;
}

int dnn_graph_set_input_hw(dnn_graph *g, int H, int W, char *err, size_t errlen)
{
	if (H < 1 || W < 1 || H > MAX_SPATIAL || W > MAX_SPATIAL)
		return fail(err, errlen, g->source, 0, "input size %dx%d out of range [1, %d]", H, W, MAX_SPATIAL);
	/* The bound the parser puts on the input line: every later product stays in range. */
	if ((long long)g->nodes[0].C * H * W > MAX_SAMPLE_FLOATS)
		return fail(err, errlen, g->source, 0, "input %dx%dx%d is absurdly large", g->nodes[0].C, H, W);
	g->nodes[0].H = H;
	g->nodes[0].W = W;
	return infer_all(g, err, errlen);
}

long long dnn_graph_params(const dnn_graph *g)
{
	long long p = 0;
	for (int i = 0; i < g->nnodes; i++)
		p += g->nodes[i].params;
	return p;
}

double dnn_graph_flops_fwd(const dnn_graph *g)
{
	double f = 0;
	for (int i = 0; i < g->nnodes; i++)
		f += g->nodes[i].flops;
	return f;
}

/* Backward costs about twice the forward (data gradient + weight gradient): 3x in total, the
 * usual convention for training FLOPs. */
double dnn_graph_flops_train(const dnn_graph *g) { return 3.0 * dnn_graph_flops_fwd(g); }

int dnn_graph_set_classes(dnn_graph *g, int classes, char *err, size_t errlen)
{
	if (classes == g->classes)
		return 0;
	if (classes < 2 || classes > MAX_CHANNELS)
		return fail(err, errlen, g->source, 0, "%d classes out of range [2, %d]", classes, MAX_CHANNELS);
	dnn_node *logits = &g->nodes[g->nodes[g->nnodes - 1].inputs[0]];
	if (logits->op != DNN_OP_DENSE || logits->nconsumers != 1)
		return fail(err, errlen, g->source, logits->line,
			    "%s: cannot set %d classes: the loss's input is not a dense layer read only by the loss",
			    logits->name, classes);
	logits->out = classes;
	return infer_all(g, err, errlen);
}

/* The text of one key of node n: an int, or a float with 9 significant digits (which reads back
 * as the same float). What the canonical text, the comparison and the fingerprint all use. */
static int key_text(const dnn_node *n, const dnn_op_key *ky, char *buf, size_t len)
{
	const void *field = (const char *)n + ky->offset;
	if (ky->type == 'i')
		return snprintf(buf, len, "%d", *(const int *)field);
	return snprintf(buf, len, "%.9g", (double)*(const float *)field);
}

/* Node i's inputs, comma-separated ("c1,r1"). */
static int inputs_text(const dnn_graph *g, const dnn_node *n, char *buf, size_t len)
{
	size_t o = 0;
	if (len)
		buf[0] = '\0';
	for (int j = 0; j < n->ninputs; j++) {
		int k = snprintf(buf + o, o < len ? len - o : 0, "%s%s", j ? "," : "", g->nodes[n->inputs[j]].name);
		if (k < 0)
			return -1;
		o += (size_t)k;
	}
	return (int)o;
}

/* One node as a net-file line: every key of its op written out (key_text), so the line parses to
 * the same node. The canonical text of a net is these lines, in topological order. */
int dnn_graph_node_line(const dnn_graph *g, int i, char *buf, size_t len)
{
	const dnn_node *n = &g->nodes[i];
	const dnn_op_desc *d = dnn_op_get(n->op);
	char val[DNN_DIFF_TEXT];
	size_t o = 0;
#define OUT(...)                                                                    \
	do {                                                                        \
		int k_ = snprintf(buf + o, o < len ? len - o : 0, __VA_ARGS__);     \
		if (k_ < 0)                                                         \
			return -1;                                                  \
		o += (size_t)k_;                                                    \
	} while (0)
	if (len)
		buf[0] = '\0';
	if (n->op == DNN_OP_INPUT) {
		if (n->tokens)
			OUT("input %s tokens %d", n->name, n->H);
		else if (n->seq)
			OUT("input %s seq %d %d", n->name, n->H, n->C);
		else
			OUT("input %s %d %d %d", n->name, n->C, n->H, n->W);
	} else {
		inputs_text(g, n, val, sizeof(val));
		OUT("%s %s %s", dnn_op_name(n->op), n->name, val);
		for (int k = 0; k < d->nkeys; k++) {
			key_text(n, &d->keys[k], val, sizeof(val));
			OUT(" %s=%s", d->keys[k].key, val);
		}
	}
#undef OUT
	return o < len ? (int)o : -1;
}

char *dnn_graph_to_text(const dnn_graph *g, const char *comment)
{
	size_t cap = 256 + (comment ? strlen(comment) : 0) + (size_t)g->nnodes * NODE_LINE_MAX, o = 0;
	char *t = malloc(cap);
	if (!t)
		return NULL;
	t[0] = '\0';
	if (comment)
		o += (size_t)snprintf(t, cap, "# %s\n", comment);
	for (int i = 0; i < g->nnodes; i++) {
		int k = dnn_graph_node_line(g, i, t + o, cap - o - 1);
		if (k < 0) {
			free(t);
			return NULL;
		}
		o += (size_t)k;
		t[o++] = '\n';
		t[o] = '\0';
	}
	return t;
}

/* ---------------------------------------------------------------- the same net */

/* d's fields for a difference at node i (0-based) in key `key`; returns 1. */
static int differ(dnn_graph_diff *d, int i, const char *name, const char *key, const char *va, const char *vb)
{
	d->node = i + 1;
	snprintf(d->name, sizeof(d->name), "%s", name);
	snprintf(d->key, sizeof(d->key), "%s", key);
	snprintf(d->a, sizeof(d->a), "%s", va);
	snprintf(d->b, sizeof(d->b), "%s", vb);
	return 1;
}

/* Node i of a and of b (both exist): the first field of its line that differs, in the line's order. */
static int compare_node(const dnn_graph *a, const dnn_graph *b, int i, dnn_graph_diff *d)
{
	const dnn_node *x = &a->nodes[i], *y = &b->nodes[i];
	char va[DNN_DIFF_TEXT], vb[DNN_DIFF_TEXT];
	if (x->op != y->op)
		return differ(d, i, x->name, "op", dnn_op_name(x->op), dnn_op_name(y->op));
	if (strcmp(x->name, y->name) != 0)
		return differ(d, i, x->name, "name", x->name, y->name);
	if (x->op == DNN_OP_INPUT) {
		const int xs[3] = {x->C, x->H, x->W}, ys[3] = {y->C, y->H, y->W};
		static const char *const dim[3] = {"C", "H", "W"};
		for (int k = 0; k < 3; k++)
			if (xs[k] != ys[k]) {
				snprintf(va, sizeof(va), "%d", xs[k]);
				snprintf(vb, sizeof(vb), "%d", ys[k]);
				return differ(d, i, x->name, dim[k], va, vb);
			}
		return 0;
	}
	inputs_text(a, x, va, sizeof(va));
	inputs_text(b, y, vb, sizeof(vb));
	if (strcmp(va, vb) != 0)
		return differ(d, i, x->name, "inputs", va, vb);
	const dnn_op_desc *desc = dnn_op_get(x->op);
	for (int k = 0; k < desc->nkeys; k++) {
		key_text(x, &desc->keys[k], va, sizeof(va));
		key_text(y, &desc->keys[k], vb, sizeof(vb));
		if (strcmp(va, vb) != 0)
			return differ(d, i, x->name, desc->keys[k].key, va, vb);
	}
	return 0;
}

int dnn_graph_compare(const dnn_graph *a, const dnn_graph *b, dnn_graph_diff *d)
{
	memset(d, 0, sizeof(*d));
	const int n = a->nnodes < b->nnodes ? a->nnodes : b->nnodes;
	for (int i = 0; i < n; i++)
		if (compare_node(a, b, i, d))
			return 1;
	if (a->nnodes == b->nnodes)
		return 0;
	const dnn_graph *longer = a->nnodes > n ? a : b;
	char line[NODE_LINE_MAX];
	if (dnn_graph_node_line(longer, n, line, sizeof(line)) < 0)
		snprintf(line, sizeof(line), "%s %s", dnn_op_name(longer->nodes[n].op), longer->nodes[n].name);
	return differ(d, n, longer->nodes[n].name, "node", longer == a ? line : "(none)", longer == b ? line : "(none)");
}

void dnn_graph_diff_line(const dnn_graph_diff *d, const char *a_label, const char *b_label, char *buf, size_t len)
{
	if (d->node == 0)
		snprintf(buf, len, "the same net");
	else if (!strcmp(d->key, "node"))
		snprintf(buf, len, "node %d is '%s' in %s, '%s' in %s", d->node, d->a, a_label, d->b, b_label);
	else
		snprintf(buf, len, "node %d (%s): %s=%s in %s, %s=%s in %s", d->node, d->name, d->key, d->a, a_label,
			 d->key, d->b, b_label);
}

static uint64_t fnv1a(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;
	for (size_t i = 0; i < n; i++) {
		h ^= b[i];
		h *= 1099511628211ull;
	}
	return h;
}

/* FNV-1a of the canonical text, line by line. */
uint64_t dnn_graph_fingerprint(const dnn_graph *g)
{
	uint64_t h = 1469598103934665603ull;
	char line[NODE_LINE_MAX];
	for (int i = 0; i < g->nnodes; i++) {
		int k = dnn_graph_node_line(g, i, line, sizeof(line));
		if (k < 0) /* cannot happen within the parser's limits; still hash something of the node */
			k = snprintf(line, sizeof(line), "%s %s ...", dnn_op_name(g->nodes[i].op), g->nodes[i].name);
		h = fnv1a(h, line, (size_t)k);
		h = fnv1a(h, "\n", 1);
	}
	return h;
}

uint64_t dnn_graph_structure_hash(const dnn_graph *g)
{
	uint64_t h = 1469598103934665603ull;
	for (int i = 0; i < g->nnodes; i++) {
		const dnn_node *n = &g->nodes[i];
		int fields[] = {n->op, n->ninputs, n->out, n->k, n->stride, n->pad, n->dilation, n->bias, n->C, n->H, n->W};
		h = fnv1a(h, n->name, strlen(n->name));
		h = fnv1a(h, fields, sizeof(fields));
		h = fnv1a(h, n->inputs, sizeof(int) * (size_t)n->ninputs);
	}
	return h;
}

static void fmt_count(char *buf, size_t len, double v)
{
	if (v >= 1e9)
		snprintf(buf, len, "%.2fG", v / 1e9);
	else if (v >= 1e6)
		snprintf(buf, len, "%.2fM", v / 1e6);
	else if (v >= 1e3)
		snprintf(buf, len, "%.1fk", v / 1e3);
	else
		snprintf(buf, len, "%.0f", v);
}

/* A language model's table (input `tokens` or `seq`): per layer its output T x C, parameters,
 * forward FLOPs per token and output bytes per token (the activation a training step keeps, and
 * as much again for its gradient). */
static void print_seq_summary(const dnn_graph *g, int fuse, FILE *out)
{
	const int T = g->nodes[0].H;
	fprintf(out, "%-4s %-16s %-12s %-22s %-14s %12s %12s %12s\n", "#", "name", "op", "inputs", "output (TxC)",
		"params", "FLOPs/token", "act B/token");
	double act = 0;
	for (int i = 0; i < g->nnodes; i++) {
		const dnn_node *n = &g->nodes[i];
		char ins[23] = "", shape[32], fl[16], ab[16];
		for (int j = 0; j < n->ninputs; j++) {
			if (j)
				strncat(ins, ",", sizeof(ins) - strlen(ins) - 1);
			strncat(ins, g->nodes[n->inputs[j]].name, sizeof(ins) - strlen(ins) - 1);
		}
		const int loss = n->op == DNN_OP_SOFTMAX_XENT;
		if (n->seq)
			snprintf(shape, sizeof(shape), "%dx%d", n->H, n->C);
		else
			snprintf(shape, sizeof(shape), "%s", loss ? "loss" : "(flat)");
		const double bytes = loss ? 0 : 4.0 * n->C * n->H * n->W / T;
		act += bytes;
		fmt_count(fl, sizeof(fl), n->flops / T);
		fmt_count(ab, sizeof(ab), bytes);
		fprintf(out, "%-4d %-16s %-12s %-22s %-14s %12lld %12s %12s\n", i, n->name, dnn_op_name(n->op), ins, shape,
			n->params, fl, ab);
	}
	char fl[16], tr[16], ab[16];
	fmt_count(fl, sizeof(fl), dnn_graph_flops_fwd(g) / T);
	fmt_count(tr, sizeof(tr), dnn_graph_flops_train(g) / T);
	fmt_count(ab, sizeof(ab), act);
	fprintf(out, "total: %d nodes, %lld parameters (%.2f MB), %s FLOPs forward / %s FLOPs training per token, "
		     "%sB of layer outputs per token (training keeps about twice that with their gradients), "
		     "context %d, vocabulary %d\n",
		g->nnodes, dnn_graph_params(g), dnn_graph_params(g) * 4.0 / 1e6, fl, tr, ab, T, g->classes);
	dnn_fuse_print_summary(g, fuse, out);
}

void dnn_graph_print_summary(const dnn_graph *g, int fuse, FILE *out)
{
	if (g->nodes[0].seq) {
		print_seq_summary(g, fuse, out);
		return;
	}
	fprintf(out, "%-4s %-16s %-12s %-22s %-16s %12s %10s\n", "#", "name", "op", "inputs", "output (CxHxW)",
		"params", "fwd FLOPs");
	for (int i = 0; i < g->nnodes; i++) {
		const dnn_node *n = &g->nodes[i];
		char ins[23] = "", shape[32], fl[16];
		for (int j = 0; j < n->ninputs; j++) {
			if (j)
				strncat(ins, ",", sizeof(ins) - strlen(ins) - 1);
			strncat(ins, g->nodes[n->inputs[j]].name, sizeof(ins) - strlen(ins) - 1);
		}
		snprintf(shape, sizeof(shape), "%dx%dx%d", n->C, n->H, n->W);
		fmt_count(fl, sizeof(fl), n->flops);
		fprintf(out, "%-4d %-16s %-12s %-22s %-16s %12lld %10s\n", i, n->name, dnn_op_name(n->op), ins,
			n->op == DNN_OP_SOFTMAX_XENT ? "loss" : shape, n->params, fl);
	}
	char fl[16], tr[16];
	fmt_count(fl, sizeof(fl), dnn_graph_flops_fwd(g));
	fmt_count(tr, sizeof(tr), dnn_graph_flops_train(g));
	fprintf(out, "total: %d nodes, %lld parameters (%.2f MB), %s FLOPs forward / %s FLOPs training per sample, %d classes\n",
		g->nnodes, dnn_graph_params(g), dnn_graph_params(g) * 4.0 / 1e6, fl, tr, g->classes);
	dnn_fuse_print_summary(g, fuse, out);
}

dnn_mem_estimate dnn_graph_train_memory(const dnn_graph *g, int batch, int chunks, int window, int state_mult)
{
	dnn_mem_estimate e = {0};
	const double P = (double)dnn_graph_params(g);
	e.params = 4.0 * P;
	e.grads = 4.0 * P * (chunks > 1 ? chunks : 1);
	e.state = 4.0 * P * state_mult;
	for (int i = 0; i < g->nnodes; i++) {
		const dnn_node *n = &g->nodes[i];
		const dnn_op_desc *d = dnn_op_get(n->op);
		const double out = (double)n->C * n->H * n->W;
		if (n->op != DNN_OP_SOFTMAX_XENT)
			e.activations += 4.0 * batch * (i == 0 ? out : 2 * out); /* y and dy (the input: x only) */
		if (d->saved_floats)
			e.activations += 4.0 * (double)d->saved_floats(n) * chunks;
		if (d->saved_floats_per_sample)
			e.activations += 4.0 * (double)d->saved_floats_per_sample(n) * batch;
	}
	const dnn_node *in = &g->nodes[0];
	e.inputs = (double)window * batch * (4.0 * in->C * in->H * in->W + 4.0 * (g->label_len > 0 ? g->label_len : 1));
	e.total = e.params + e.grads + e.state + e.activations + e.inputs;
	return e;
}
