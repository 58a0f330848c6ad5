/* graph.c — net-file parser, validation, shape inference, fingerprint and summary. */
#include "graph.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_NODES 10000
#define MAX_LINE 4096
/* "Absurd size" limits: generous for real nets, small enough that no product overflows. */
#define MAX_CHANNELS 65536
#define MAX_SPATIAL 16384
#define MAX_KERNEL 64
#define MAX_STRIDE 64
#define MAX_SAMPLE_FLOATS (1LL << 28) /* one activation of one sample: 1 GiB of float32 */

static const char *op_names[DNN_OP_COUNT] = {"input", "conv", "dense", "relu", "maxpool",
					     "avgpool", "batchnorm", "add", "softmax_xent"};

const char *dnn_op_name(dnn_op op) { return op < DNN_OP_COUNT ? op_names[op] : "?"; }

static int fail(char *err, size_t errlen, const char *source, int line, const char *fmt, ...)
{
	va_list ap;
	int n = line > 0 ? snprintf(err, errlen, "%s:%d: ", source, line) : snprintf(err, errlen, "%s: ", source);
	if (n < 0 || (size_t)n >= errlen)
		return -1;
	va_start(ap, fmt);
	vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
	va_end(ap);
	return -1;
}

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

static int parse_float(const char *s, double lo, double hi, float *out)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || *end != '\0' || !(v >= lo && v <= hi))
		return -1;
	*out = (float)v;
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

typedef struct {
	const char *key;
	long lo, hi;
	size_t offset; /* into dnn_node, an int field */
} int_key;

#define KEY(k, lo, hi, field) {k, lo, hi, offsetof(dnn_node, field)}
static const int_key conv_keys[] = {KEY("out", 1, MAX_CHANNELS, out), KEY("k", 1, MAX_KERNEL, k),
				    KEY("stride", 1, MAX_STRIDE, stride), KEY("pad", 0, MAX_KERNEL, pad),
				    KEY("dilation", 1, MAX_KERNEL, dilation), KEY("bias", 0, 1, bias)};
static const int_key dense_keys[] = {KEY("out", 1, 1 << 20, out)};
static const int_key pool_keys[] = {KEY("k", 1, MAX_KERNEL, k), KEY("stride", 1, MAX_STRIDE, stride),
				    KEY("pad", 0, MAX_KERNEL, pad)};

static int parse_keys(dnn_node *nd, char **tok, int ntok, const char *src, int line, char *err, size_t errlen)
{
	const int_key *keys = NULL;
	int nkeys = 0;
	switch (nd->op) {
	case DNN_OP_CONV: keys = conv_keys; nkeys = 6; break;
	case DNN_OP_DENSE: keys = dense_keys; nkeys = 1; break;
	case DNN_OP_MAXPOOL: keys = pool_keys; nkeys = 3; break;
	default: break;
	}
	for (int t = 0; t < ntok; t++) {
		char *eq = strchr(tok[t], '=');
		if (!eq)
			return fail(err, errlen, src, line, "expected key=value, got '%s'", tok[t]);
		*eq = '\0';
		const char *key = tok[t], *val = eq + 1;
		int done = 0;
		for (int k = 0; k < nkeys; k++) {
			if (strcmp(key, keys[k].key) != 0)
				continue;
			int *field = (int *)((char *)nd + keys[k].offset);
			if (parse_int(val, keys[k].lo, keys[k].hi, field) != 0)
				return fail(err, errlen, src, line, "%s: %s=%s is not an integer in [%ld, %ld]",
					    nd->name, key, val, keys[k].lo, keys[k].hi);
			done = 1;
		}
		if (!done && nd->op == DNN_OP_BATCHNORM && strcmp(key, "eps") == 0) {
			if (parse_float(val, 1e-12, 1.0, &nd->eps) != 0)
				return fail(err, errlen, src, line, "%s: eps=%s is not a number in [1e-12, 1]", nd->name, val);
			done = 1;
		}
		if (!done && nd->op == DNN_OP_BATCHNORM && strcmp(key, "momentum") == 0) {
			if (parse_float(val, 0.0, 1.0, &nd->momentum) != 0)
				return fail(err, errlen, src, line, "%s: momentum=%s is not a number in [0, 1]", nd->name, val);
			done = 1;
		}
		if (!done)
			return fail(err, errlen, src, line, "unknown key '%s' for op %s", key, dnn_op_name(nd->op));
	}
	return 0;
}

/* Shape inference for one node whose inputs already have shapes. */
static int infer_node(dnn_graph *g, dnn_node *nd, char *err, size_t errlen)
{
	const char *src = g->source;
	const dnn_node *in = nd->ninputs > 0 ? &g->nodes[nd->inputs[0]] : NULL;
	long long C = in ? in->C : 0, H = in ? in->H : 0, W = in ? in->W : 0;
	long long chw = C * H * W;
	nd->params = 0;
	nd->flops = 0;
	switch (nd->op) {
	case DNN_OP_INPUT:
		return 0;
	case DNN_OP_CONV: {
		long long eff = (long long)nd->dilation * (nd->k - 1) + 1;
		long long P = (H + 2LL * nd->pad - eff) / nd->stride + 1;
		long long Q = (W + 2LL * nd->pad - eff) / nd->stride + 1;
		if (H + 2LL * nd->pad < eff || W + 2LL * nd->pad < eff || P < 1 || Q < 1)
			return fail(err, errlen, src, nd->line,
				    "%s: kernel %d (dilation %d) does not fit its %lldx%lld input with pad %d",
				    nd->name, nd->k, nd->dilation, H, W, nd->pad);
		if (nd->pad >= eff)
			return fail(err, errlen, src, nd->line, "%s: pad=%d must be smaller than the kernel extent %lld",
				    nd->name, nd->pad, eff);
		nd->C = nd->out, nd->H = (int)P, nd->W = (int)Q;
		double macs = (double)nd->out * P * Q * C * nd->k * nd->k;
		nd->params = (long long)nd->out * C * nd->k * nd->k + (nd->bias ? nd->out : 0);
		nd->flops = 2 * macs + (nd->bias ? (double)nd->out * P * Q : 0);
		break;
	}
	case DNN_OP_DENSE:
		nd->C = nd->out, nd->H = 1, nd->W = 1;
		nd->params = (long long)nd->out * chw + nd->out;
		nd->flops = 2.0 * nd->out * chw + nd->out;
		break;
	case DNN_OP_RELU:
		nd->C = (int)C, nd->H = (int)H, nd->W = (int)W;
		nd->flops = (double)chw;
		break;
	case DNN_OP_MAXPOOL: {
		if (nd->stride == 0)
			nd->stride = nd->k;
		if (nd->pad * 2 > nd->k)
			return fail(err, errlen, src, nd->line, "%s: pad=%d must be at most half of k=%d", nd->name,
				    nd->pad, nd->k);
		long long P = (H + 2LL * nd->pad - nd->k) / nd->stride + 1;
		long long Q = (W + 2LL * nd->pad - nd->k) / nd->stride + 1;
		if (H + 2LL * nd->pad < nd->k || W + 2LL * nd->pad < nd->k || P < 1 || Q < 1)
			return fail(err, errlen, src, nd->line, "%s: window %d does not fit its %lldx%lld input",
				    nd->name, nd->k, H, W);
		nd->C = (int)C, nd->H = (int)P, nd->W = (int)Q;
		nd->flops = (double)C * P * Q * nd->k * nd->k;
		break;
	}
	case DNN_OP_AVGPOOL:
		nd->C = (int)C, nd->H = 1, nd->W = 1;
		nd->flops = (double)chw;
		break;
	case DNN_OP_BATCHNORM:
		nd->C = (int)C, nd->H = (int)H, nd->W = (int)W;
		nd->params = 2 * C;
		nd->flops = 4.0 * chw;
		break;
	case DNN_OP_ADD:
		for (int i = 1; i < nd->ninputs; i++) {
			const dnn_node *o = &g->nodes[nd->inputs[i]];
			if (o->C != C || o->H != H || o->W != W)
				return fail(err, errlen, src, nd->line,
					    "%s: inputs have different shapes: %s is %lldx%lldx%lld but %s is %dx%dx%d",
					    nd->name, in->name, C, H, W, o->name, o->C, o->H, o->W);
		}
		nd->C = (int)C, nd->H = (int)H, nd->W = (int)W;
		nd->flops = (double)chw * (nd->ninputs - 1);
		break;
	case DNN_OP_SOFTMAX_XENT:
		if (H != 1 || W != 1)
			return fail(err, errlen, src, nd->line,
				    "%s: the loss needs a flat input (C x 1 x 1, e.g. a dense layer), but %s is %lldx%lldx%lld",
				    nd->name, in->name, C, H, W);
		if (C < 2)
			return fail(err, errlen, src, nd->line, "%s: the loss needs at least 2 classes, got %lld",
				    nd->name, C);
		nd->C = 1, nd->H = 1, nd->W = 1;
		nd->flops = 5.0 * C;
		g->classes = (int)C;
		break;
	default:
		return fail(err, errlen, src, nd->line, "internal: unknown op");
	}
	if ((long long)nd->C * nd->H * nd->W > MAX_SAMPLE_FLOATS)
		return fail(err, errlen, src, nd->line, "%s: output %dx%dx%d is absurdly large", nd->name, nd->C,
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

int dnn_graph_parse(dnn_graph *g, const char *text, const char *source, char *err, size_t errlen)
{
	memset(g, 0, sizeof(*g));
	snprintf(g->source, sizeof(g->source), "%s", source);
	const char *src = g->source;
	int cap = 64, n = 0;
	dnn_node *nodes = calloc((size_t)cap, sizeof(dnn_node));
	pending_inputs *pend = calloc((size_t)cap, sizeof(pending_inputs));
	char *line = malloc(MAX_LINE + 2);
	int rc = -1, lineno = 0;
	if (!nodes || !pend || !line) {
		fail(err, errlen, src, 0, "out of memory");
		goto out;
	}
	const char *p = text;
	while (*p) {
		lineno++;
		const char *eol = strchr(p, '\n');
		size_t len = eol ? (size_t)(eol - p) : strlen(p);
		if (len > MAX_LINE) {
			fail(err, errlen, src, lineno, "line longer than %d characters", MAX_LINE);
			goto out;
		}
		memcpy(line, p, len);
		line[len] = '\0';
		p += len + (eol ? 1 : 0);
		for (size_t i = 0; i < len; i++)
			if (line[i] == '\0' || (!isprint((unsigned char)line[i]) && !isspace((unsigned char)line[i]))) {
				fail(err, errlen, src, lineno, "binary or non-ASCII character (0x%02x)",
				     (unsigned char)line[i]);
				goto out;
			}
		char *hash = strchr(line, '#');
		if (hash)
			*hash = '\0';
		char *tok[64];
		int ntok = 0;
		for (char *t = strtok(line, " \t\r\v\f"); t; t = strtok(NULL, " \t\r\v\f")) {
			if (ntok == 64) {
				fail(err, errlen, src, lineno, "too many fields");
				goto out;
			}
			tok[ntok++] = t;
		}
		if (ntok == 0)
			continue;
		if (n == MAX_NODES) {
			fail(err, errlen, src, lineno, "more than %d nodes", MAX_NODES);
			goto out;
		}
		if (n == cap) {
			cap *= 2;
			dnn_node *nn = realloc(nodes, (size_t)cap * sizeof(dnn_node));
			pending_inputs *np = nn ? realloc(pend, (size_t)cap * sizeof(pending_inputs)) : NULL;
			if (nn)
				nodes = nn;
			if (np)
				pend = np;
			if (!nn || !np) {
				fail(err, errlen, src, lineno, "out of memory");
				goto out;
			}
		}
		dnn_node *nd = &nodes[n];
		memset(nd, 0, sizeof(*nd));
		memset(&pend[n], 0, sizeof(pend[n]));
		nd->line = lineno;
		nd->op = DNN_OP_COUNT;
		for (int o = 0; o < DNN_OP_COUNT; o++)
			if (strcmp(tok[0], op_names[o]) == 0)
				nd->op = (dnn_op)o;
		if (nd->op == DNN_OP_COUNT) {
			fail(err, errlen, src, lineno,
			     "unknown op '%s' (ops: input conv dense relu maxpool avgpool batchnorm add softmax_xent)",
			     tok[0]);
			goto out;
		}
		if (ntok < 2) {
			fail(err, errlen, src, lineno, "%s: missing node name", tok[0]);
			goto out;
		}
		if (!valid_name(tok[1])) {
			fail(err, errlen, src, lineno, "invalid name '%s' (letters, digits, _ - . ; at most %d chars)",
			     tok[1], DNN_NAME_MAX - 1);
			goto out;
		}
		if (find_node(nodes, n, tok[1]) >= 0) {
			fail(err, errlen, src, lineno, "duplicate name '%s' (first defined on line %d)", tok[1],
			     nodes[find_node(nodes, n, tok[1])].line);
			goto out;
		}
		snprintf(nd->name, sizeof(nd->name), "%s", tok[1]);
		nd->stride = 1, nd->dilation = 1, nd->eps = 1e-5f, nd->momentum = 0.1f;
		if (nd->op == DNN_OP_INPUT) {
			int c, h, w;
			if (ntok != 5) {
				fail(err, errlen, src, lineno, "input needs a shape: input <name> C H W");
				goto out;
			}
			if (parse_int(tok[2], 1, MAX_CHANNELS, &c) || parse_int(tok[3], 1, MAX_SPATIAL, &h) ||
			    parse_int(tok[4], 1, MAX_SPATIAL, &w)) {
				fail(err, errlen, src, lineno,
				     "input shape '%s %s %s' must be integers (C in [1, %d], H and W in [1, %d])", tok[2],
				     tok[3], tok[4], MAX_CHANNELS, MAX_SPATIAL);
				goto out;
			}
			nd->C = c, nd->H = h, nd->W = w;
			if ((long long)c * h * w > MAX_SAMPLE_FLOATS) {
				fail(err, errlen, src, lineno, "input %dx%dx%d is absurdly large", c, h, w);
				goto out;
			}
		} else {
			if (ntok < 3 || strchr(tok[2], '=')) {
				fail(err, errlen, src, lineno, "%s %s: missing input name(s)", tok[0], tok[1]);
				goto out;
			}
			char *save = NULL;
			for (char *in = strtok_r(tok[2], ",", &save); in; in = strtok_r(NULL, ",", &save)) {
				if (nd->ninputs == DNN_MAX_INPUTS) {
					fail(err, errlen, src, lineno, "%s: more than %d inputs", nd->name, DNN_MAX_INPUTS);
					goto out;
				}
				if (!valid_name(in)) {
					fail(err, errlen, src, lineno, "%s: invalid input name '%s'", nd->name, in);
					goto out;
				}
				snprintf(pend[n].names[nd->ninputs++], DNN_NAME_MAX, "%s", in);
			}
			int want_min = nd->op == DNN_OP_ADD ? 2 : 1, want_max = nd->op == DNN_OP_ADD ? DNN_MAX_INPUTS : 1;
			if (nd->ninputs < want_min || nd->ninputs > want_max) {
				fail(err, errlen, src, lineno, "%s: op %s takes %s input%s, got %d", nd->name, tok[0],
				     nd->op == DNN_OP_ADD ? "two or more" : "one", nd->op == DNN_OP_ADD ? "s" : "",
				     nd->ninputs);
				goto out;
			}
			if (nd->op == DNN_OP_MAXPOOL)
				nd->stride = 0; /* default: = k, set after keys */
			if (nd->op == DNN_OP_DENSE)
				nd->bias = 1;
			if (parse_keys(nd, tok + 3, ntok - 3, src, lineno, err, errlen) != 0)
				goto out;
			if ((nd->op == DNN_OP_CONV || nd->op == DNN_OP_DENSE) && nd->out == 0) {
				fail(err, errlen, src, lineno, "%s: %s needs out=N", nd->name, tok[0]);
				goto out;
			}
			if ((nd->op == DNN_OP_CONV || nd->op == DNN_OP_MAXPOOL) && nd->k == 0) {
				fail(err, errlen, src, lineno, "%s: %s needs k=N", nd->name, tok[0]);
				goto out;
			}
		}
		n++;
	}
	if (n == 0) {
		fail(err, errlen, src, 0, "empty network (no nodes)");
		goto out;
	}
	/* Resolve input names. */
	for (int i = 0; i < n; i++)
		for (int j = 0; j < nodes[i].ninputs; j++) {
			int k = find_node(nodes, n, pend[i].names[j]);
			if (k < 0) {
				fail(err, errlen, src, nodes[i].line, "%s: unknown input '%s'", nodes[i].name, pend[i].names[j]);
				goto out;
			}
			if (k == i) {
				fail(err, errlen, src, nodes[i].line, "%s: a node cannot be its own input (cycle)", nodes[i].name);
				goto out;
			}
			nodes[i].inputs[j] = k;
		}
	/* Exactly one input node and one loss. */
	int ninput = 0, nloss = 0;
	for (int i = 0; i < n; i++) {
		if (nodes[i].op == DNN_OP_INPUT && ninput++ > 0) {
			fail(err, errlen, src, nodes[i].line, "a net has exactly one input line ('%s' is a second)", nodes[i].name);
			goto out;
		}
		if (nodes[i].op == DNN_OP_SOFTMAX_XENT && nloss++ > 0) {
			fail(err, errlen, src, nodes[i].line, "a net has exactly one loss ('%s' is a second)", nodes[i].name);
			goto out;
		}
	}
	if (!ninput) {
		fail(err, errlen, src, 0, "no input line (input <name> C H W)");
		goto out;
	}
	if (!nloss) {
		fail(err, errlen, src, 0, "no loss node (softmax_xent) — the last node must be the loss");
		goto out;
	}
	/* Topological sort (Kahn); order ties by file order so nets read top to bottom. */
	{
		int *indeg = calloc((size_t)n, sizeof(int)), *order = malloc((size_t)n * sizeof(int));
		int *newidx = malloc((size_t)n * sizeof(int));
		char *done = calloc((size_t)n, 1);
		if (!indeg || !order || !newidx || !done) {
			free(indeg), free(order), free(newidx), free(done);
			fail(err, errlen, src, 0, "out of memory");
			goto out;
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
		if (m < n) {
			int bad = 0;
			while (done[bad])
				bad++;
			fail(err, errlen, src, nodes[bad].line, "%s: the net has a cycle through this node", nodes[bad].name);
			free(indeg), free(order), free(newidx), free(done);
			goto out;
		}
		dnn_node *sorted = malloc((size_t)n * sizeof(dnn_node));
		if (!sorted) {
			free(indeg), free(order), free(newidx), free(done);
			fail(err, errlen, src, 0, "out of memory");
			goto out;
		}
		for (int i = 0; i < n; i++)
			newidx[order[i]] = i;
		for (int i = 0; i < n; i++) {
			sorted[i] = nodes[order[i]];
			for (int j = 0; j < sorted[i].ninputs; j++)
				sorted[i].inputs[j] = newidx[sorted[i].inputs[j]];
		}
		free(nodes);
		nodes = sorted;
		free(indeg), free(order), free(newidx), free(done);
	}
	g->nodes = nodes;
	g->nnodes = n;
	if (nodes[0].op != DNN_OP_INPUT) {
		fail(err, errlen, src, nodes[0].line, "%s: only the input line may have no inputs", nodes[0].name);
		goto out_g;
	}
	for (int i = 0; i < n; i++)
		for (int j = 0; j < nodes[i].ninputs; j++)
			nodes[nodes[i].inputs[j]].nconsumers++;
	if (nodes[n - 1].op != DNN_OP_SOFTMAX_XENT) {
		/* Something other than the loss is last in topological order: it is unused. */
		fail(err, errlen, src, nodes[n - 1].line, "%s: output is never used (the loss must come last)",
		     nodes[n - 1].name);
		goto out_g;
	}
	for (int i = 0; i < n - 1; i++)
		if (nodes[i].nconsumers == 0) {
			fail(err, errlen, src, nodes[i].line, "%s: output is never used", nodes[i].name);
			goto out_g;
		}
	if (nodes[nodes[n - 1].inputs[0]].nconsumers != 1) {
		fail(err, errlen, src, nodes[n - 1].line, "%s: its input '%s' must feed only the loss", nodes[n - 1].name,
		     nodes[nodes[n - 1].inputs[0]].name);
		goto out_g;
	}
	for (int i = 1; i < n; i++)
		if (nodes[i].op == DNN_OP_BATCHNORM && nodes[i].inputs[0] == 0) {
			/* Its backward task writes dx too; the data has no gradient handle. */
			fail(err, errlen, src, nodes[i].line, "%s: batchnorm directly on the input is not supported "
			     "(put a conv or dense layer first)", nodes[i].name);
			goto out_g;
		}
	if (infer_all(g, err, errlen) != 0)
		goto out_g;
	nodes = NULL;
	rc = 0;
	goto out;
out_g:
	g->nodes = NULL;
	g->nnodes = 0;
out:
	free(nodes);
	free(pend);
	free(line);
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

static uint64_t fnv1a(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;
	for (size_t i = 0; i < n; i++) {
		h ^= b[i];
		h *= 1099511628211ull;
	}
	return h;
}

/* Structure only (ops, names, wiring, attributes, shapes): a checkpoint fits a net iff equal. */
uint64_t dnn_graph_fingerprint(const dnn_graph *g)
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

int dnn_fuse_level(void)
{
	const char *e = getenv("DNN_FUSE");
	if (!e || !*e)
		return 1;
	if ((e[0] == '0' || e[0] == '1' || e[0] == '2') && e[1] == '\0')
		return e[0] - '0';
	/* Like DNN_CONV_ALGO: an experiment knob, so warn once and keep the default. */
	static int warned;
	if (!warned) {
		fprintf(stderr, "DNN_FUSE=%s is not 0, 1 or 2; using 1\n", e);
		warned = 1;
	}
	return 1;
}

int dnn_graph_bn_relu(const dnn_graph *g, int i)
{
	if (i <= 0 || i >= g->nnodes || g->nodes[i].op != DNN_OP_BATCHNORM || g->nodes[i].nconsumers != 1)
		return -1;
	for (int j = i + 1; j < g->nnodes; j++)
		for (int k = 0; k < g->nodes[j].ninputs; k++)
			if (g->nodes[j].inputs[k] == i)
				return g->nodes[j].op == DNN_OP_RELU ? j : -1;
	return -1;
}

void dnn_graph_print_summary(const dnn_graph *g, FILE *out)
{
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
	/* Execution, not shape: the layers above are all computed, some in a shared task. */
	const int level = dnn_fuse_level();
	int bn_relu = 0, conv_bias = 0;
	for (int i = 0; level >= 1 && i < g->nnodes; i++)
		bn_relu += dnn_graph_bn_relu(g, i) >= 0;
	for (int i = 0; level >= 2 && i < g->nnodes; i++)
		conv_bias += g->nodes[i].op == DNN_OP_CONV && g->nodes[i].bias;
	fprintf(out, "fused tasks (DNN_FUSE=%d): %d batchnorm+relu (the batchnorm's output is not stored), %d conv+bias\n",
		level, bn_relu, conv_bias);
}
