/* train_gpt_reference — the whole GPT model against PyTorch, as llm.c checks its model against a
 * PyTorch dump: gpt-tiny (graph/nets/gpt-tiny.net: byte vocabulary, context 32, 2 layers, d 64,
 * 4 heads) with the weights and the batch of tests/data/gpt_tiny_ref.bin, which
 * bench/gpt_reference.py wrote from a float64 PyTorch model (nanoGPT's layout). One training step
 * through the real plan (load task, every node's forward and backward, the fixed-order sums over
 * chunks, the update) with 1 chunk and with 3 (4 samples: 2, 1, 1) must give:
 *   - the loss (the step's loss sum / B: the mean per-token cross-entropy) within 1e-5 relative;
 *   - every parameter's gradient of that mean loss within 1e-5 relative, per tensor
 *     max|got - ref| / max|ref| (the worst tensor and its error are printed).
 * The gradient is read from the update: SGD with lr 0, momentum 0, weight decay 0 leaves
 * v = grad * (1/B) (optim.h), the summed per-sample gradients (each of the sample's mean token
 * loss: softmax_xent divides by T) scaled to the mean over the B*T tokens, and w unchanged.
 * PyTorch's own float32 model reaches 7.6e-7 against the float64 reference (the script prints it),
 * so 1e-5 leaves room for a float32 implementation's rounding and none for a wrong formula.
 * Also: the 3-chunk gradients equal the 1-chunk ones within 1e-6 relative per tensor (only the
 * order of float sums differs; no batch norm); a negative control: one weight moved by 1e-3
 * (h0_qkv.weight[0], a query weight of layer 0: 1.4e-4 in float64 PyTorch) must fail the check;
 * and the file reader refuses truncated copies of the file.
 * Measured (main with the ops, an AMD EPYC Zen 5 VM): 1 chunk worst 6.8e-7 (h0_qkv.bias), loss
 * 3.1e-9; 3 chunks 6.4e-7 (h1_ln2.weight); 3 chunks against 1: 4.8e-7 (h0_qkv.bias: its gradient
 * sums 128 rows of dqkv that largely cancel, so another grouping of the rows moves it most); the
 * negative control 1.4e-4. The same figures under STARPU_NCPU=1 and 2, eager, random, DNN_FUSE=0,
 * and 7.1e-7 with OpenBLAS's SkylakeX kernels.
 *
 * The file (little-endian; bench/gpt_reference.py's docstring is the authority):
 *   "GPTREF1\0"; uint32 version 1; int32 B, T, V, C, L, H, ntensors;
 *   ntensors x {uint32 namelen, name ("<node>.<slot>"), int64 n, float value[n], float grad[n]};
 *   int32 ids[B*T]; int32 targets[B*T]; float64 loss; "GPTREND\0". */
#include <errno.h>
#include <math.h>
#include <starpu.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph.h"
#include "knobs.h"
#include "model.h"
#include "test_util.h"

#define TOL 1e-5       /* against PyTorch, relative per tensor and for the loss */
#define CHUNK_TOL 1e-6 /* 3 chunks against 1 */
#define MAXT 256       /* tensors in a reference file (gpt-tiny has 28) */
#define PERTURB_NAME "h0_qkv.weight"

typedef struct {
	char name[DNN_NAME_MAX + 16];
	long n;
	float *w, *g; /* value, d loss / d value */
} ref_tensor;

typedef struct {
	int B, T, V, C, L, H, nt;
	ref_tensor t[MAXT];
	int32_t *ids, *targets; /* [B*T] */
	double loss;
} gpt_ref;

/* ------------------------------------------------------------------ the reference file */

typedef struct {
	const unsigned char *p;
	size_t len, off;
} reader;

static int take(reader *r, void *dst, size_t n)
{
	if (n > r->len - r->off)
		return -1;
	memcpy(dst, r->p + r->off, n);
	r->off += n;
	return 0;
}

static void ref_free(gpt_ref *r)
{
	for (int i = 0; i < r->nt; i++)
		free(r->t[i].w), free(r->t[i].g);
	free(r->ids), free(r->targets);
	memset(r, 0, sizeof(*r));
}

/* Parses len bytes at p into r: 0, or -1 with a line in err (r then holds nothing). The host is
 * little-endian (x86-64, arm64), as the file. */
static int ref_parse(gpt_ref *r, const unsigned char *p, size_t len, char *err, size_t errlen)
{
	reader rd = {p, len, 0};
	memset(r, 0, sizeof(*r));
	char magic[8];
	uint32_t version;
	int32_t hdr[7];
	if (take(&rd, magic, 8) || memcmp(magic, "GPTREF1", 8) || take(&rd, &version, 4) || version != 1 ||
	    take(&rd, hdr, sizeof(hdr))) {
		snprintf(err, errlen, "not a version-1 GPT reference file (header)");
		return -1;
	}
	r->B = hdr[0], r->T = hdr[1], r->V = hdr[2], r->C = hdr[3], r->L = hdr[4], r->H = hdr[5];
	if (r->B < 1 || r->B > 1024 || r->T < 1 || r->T > 4096 || hdr[6] < 1 || hdr[6] > MAXT) {
		snprintf(err, errlen, "header out of range: B %d T %d ntensors %d", r->B, r->T, hdr[6]);
		return -1;
	}
	for (int i = 0; i < hdr[6]; i++) {
		ref_tensor *t = &r->t[i];
		uint32_t nl;
		int64_t n;
		if (take(&rd, &nl, 4) || nl == 0 || nl >= sizeof(t->name) || take(&rd, t->name, nl) ||
		    take(&rd, &n, 8) || n < 1 || n > (1 << 26) || (size_t)n * 8 > rd.len - rd.off) {
			snprintf(err, errlen, "tensor %d: truncated or out of range at byte %zu", i, rd.off);
			ref_free(r);
			return -1;
		}
		t->name[nl] = '\0';
		t->n = (long)n;
		r->nt = i + 1;
		t->w = alloc_f((size_t)n), t->g = alloc_f((size_t)n);
		take(&rd, t->w, (size_t)n * 4), take(&rd, t->g, (size_t)n * 4);
	}
	const size_t bt = (size_t)r->B * r->T;
	r->ids = malloc(bt * 4), r->targets = malloc(bt * 4);
	char end[8];
	if (!r->ids || !r->targets || take(&rd, r->ids, bt * 4) || take(&rd, r->targets, bt * 4) ||
	    take(&rd, &r->loss, 8) || take(&rd, end, 8) || memcmp(end, "GPTREND", 8) || rd.off != rd.len) {
		snprintf(err, errlen, "batch, loss or end mark truncated or missing (byte %zu of %zu)", rd.off, rd.len);
		ref_free(r);
		return -1;
	}
	for (size_t i = 0; i < bt; i++)
		if (r->ids[i] < 0 || r->ids[i] >= r->V || r->targets[i] < 0 || r->targets[i] >= r->V) {
			snprintf(err, errlen, "token %zu: id %d or target %d outside [0, %d)", i, r->ids[i],
				 r->targets[i], r->V);
			ref_free(r);
			return -1;
		}
	return 0;
}

static unsigned char *read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	unsigned char *buf = NULL;
	long sz = -1;
	if (fseek(f, 0, SEEK_END) == 0 && (sz = ftell(f)) > 0 && fseek(f, 0, SEEK_SET) == 0 &&
	    (buf = malloc((size_t)sz)) && fread(buf, 1, (size_t)sz, f) != (size_t)sz) {
		free(buf);
		buf = NULL;
	}
	fclose(f);
	*len = (size_t)sz;
	return buf;
}

/* ------------------------------------------------------------------ the token source */

/* The batch's ids (as floats, the tokens input's form) and targets, for samples idx[0..n). A
 * CPU-only codelet of the test's own: the reference batch is not a data set. */
typedef struct {
	const int32_t *ids, *targets;
	int T, n;
	int idx[];
} tok_load_args;

static void tok_load_cpu(void *buffers[], void *cl_arg)
{
	const tok_load_args *a = cl_arg;
	float *x = (float *)STARPU_VECTOR_GET_PTR(buffers[0]);        /* (n, T) */
	int32_t *y = (int32_t *)STARPU_VECTOR_GET_PTR(buffers[1]);    /* (n, T) */
	for (int s = 0; s < a->n; s++)
		for (int t = 0; t < a->T; t++) {
			const size_t from = (size_t)a->idx[s] * a->T + t, to = (size_t)s * a->T + t;
			x[to] = (float)a->ids[from];
			y[to] = a->targets[from];
		}
}

static struct starpu_codelet cl_tok_load = {
	.cpu_funcs = {tok_load_cpu}, .nbuffers = 2, .modes = {STARPU_W, STARPU_W}, .name = "test_tok_load"};

static int tok_insert_load(const dnn_data_source *src, const dnn_task_opts *o, const int *idx, int n, int train,
			   long step, const float *mean, const float *std, starpu_data_handle_t x,
			   starpu_data_handle_t labels)
{
	(void)o, (void)train, (void)step, (void)mean, (void)std;
	const gpt_ref *r = src->ctx;
	size_t sz = sizeof(tok_load_args) + sizeof(int) * (size_t)n;
	tok_load_args *a = malloc(sz); /* StarPU's from here on (STARPU_CL_ARGS) */
	if (!a)
		return -ENOMEM;
	a->ids = r->ids, a->targets = r->targets, a->T = r->T, a->n = n;
	memcpy(a->idx, idx, sizeof(int) * (size_t)n);
	return starpu_task_insert(&cl_tok_load, STARPU_CL_ARGS, a, sz, STARPU_W, x, STARPU_W, labels, STARPU_NAME,
				  "test_tok_load", 0);
}

/* ------------------------------------------------------------------ one step */

static const ref_tensor *ref_find(const gpt_ref *r, const char *name)
{
	for (int i = 0; i < r->nt; i++)
		if (!strcmp(r->t[i].name, name))
			return &r->t[i];
	return NULL;
}

/* One training step of gpt-tiny with r's weights and batch in `chunks` chunks; with perturb,
 * that tensor's element 0 moved by +1e-3. *loss: the mean token loss; grads[i]: reference tensor
 * i's gradient (malloc'd). Exits 1 when the net, the model or a step fails. */
static void run_step(const gpt_ref *r, int chunks, const char *perturb, double *loss, float **grads)
{
	char err[512];
	dnn_graph g;
	dnn_model m;
	dnn_plan p;
	if (dnn_graph_load(&g, "gpt-tiny", err, sizeof(err)) != 0 ||
	    dnn_model_create(&m, &g, 1, err, sizeof(err)) != 0) {
		fprintf(stderr, "FAIL: gpt-tiny: %s\n", err);
		exit(1);
	}
	if (m.nparams != r->nt) {
		fprintf(stderr, "FAIL: gpt-tiny has %d parameter tensors, the reference %d\n", m.nparams, r->nt);
		exit(1);
	}
	const ref_tensor *order[MAXT];
	for (int i = 0; i < m.nparams; i++) {
		dnn_param *pr = &m.params[i];
		const ref_tensor *t = ref_find(r, pr->name);
		if (!t || t->n != pr->n) {
			fprintf(stderr, "FAIL: %s (%ld floats) is not in the reference or has another size\n", pr->name,
				pr->n);
			exit(1);
		}
		/* The file is in the model's order (bench/gpt_reference.py reads the .net's): say so if not. */
		TEST_CHECK(t == &r->t[i], "%s is tensor %d of the model but %ld of the reference", pr->name, i,
			   (long)(t - r->t));
		order[i] = t;
		starpu_data_acquire(pr->hw, STARPU_W);
		memcpy(pr->w, t->w, sizeof(float) * (size_t)pr->n);
		if (perturb && !strcmp(pr->name, perturb))
			pr->w[0] += 1e-3f;
		starpu_data_release(pr->hw);
	}
	if (dnn_plan_create(&p, &m, r->B, chunks, 1, 1, dnn_knobs_get(), err, sizeof(err)) != 0) {
		fprintf(stderr, "FAIL: plan of %d chunks: %s\n", chunks, err);
		exit(1);
	}
	dnn_data_source src = {.ctx = (void *)r, .insert_load = tok_insert_load};
	int idx[1024];
	for (int s = 0; s < r->B; s++)
		idx[s] = s;
	const dnn_optim_config optim = {.lr = 0.0f, .momentum = 0.0f, .weight_decay = 0.0f, .optimizer = DNN_OPT_SGD};
	double loss_sum, correct;
	if (dnn_submit_step(&p, 0, &src, idx, 0, &optim, err, sizeof(err)) != 0 ||
	    dnn_wait_step(&p, 0, &loss_sum, &correct, err, sizeof(err)) != 0) {
		fprintf(stderr, "FAIL: step with %d chunks: %s\n", chunks, err);
		exit(1);
	}
	starpu_task_wait_for_all();
	if (dnn_model_sync_to_host(&m, err, sizeof(err)) != 0) {
		fprintf(stderr, "FAIL: %s\n", err);
		exit(1);
	}
	*loss = loss_sum / r->B;
	for (int i = 0; i < m.nparams; i++) {
		const dnn_param *pr = &m.params[i];
		const long k = order[i] - r->t;
		grads[k] = alloc_f((size_t)pr->n);
		memcpy(grads[k], pr->v, sizeof(float) * (size_t)pr->n); /* v = grad / B: lr 0, momentum 0 */
		/* lr 0: the update left the weights as loaded (a NaN or inf gradient would not). */
		const int moved = perturb && !strcmp(pr->name, perturb); /* its element 0 is not the file's */
		long bad = -1;
		for (long j = moved; j < pr->n && bad < 0; j++)
			if (memcmp(&pr->w[j], &order[i]->w[j], sizeof(float)))
				bad = j;
		TEST_CHECK(bad < 0, "%d chunks: %s[%ld] changed by an update with lr 0", chunks, pr->name, bad);
	}
	dnn_plan_destroy(&p);
	dnn_model_destroy(&m);
	dnn_graph_free(&g);
}

/* max|got - ref| / max|ref| over n floats (ref in float; the reference's float32 values). */
static double rel_err(const float *got, const float *ref, long n)
{
	double d = 0, m = 0;
	for (long i = 0; i < n; i++) {
		const double e = fabs((double)got[i] - (double)ref[i]);
		if (!(e <= d)) /* a NaN counts as infinitely far */
			d = isnan(e) ? INFINITY : e;
		m = fmax(m, fabs((double)ref[i]));
	}
	return d / fmax(m, 1e-30);
}

/* Loss and every gradient of a run against the reference: 1 when all are within tol. Prints the
 * loss error and the worst tensor. */
static int compare(const gpt_ref *r, const char *what, double loss, float *const *grads, double tol)
{
	const double el = fabs(loss - r->loss) / fabs(r->loss);
	double worst = 0;
	int wi = 0, nbad = 0;
	for (int i = 0; i < r->nt; i++) {
		const double e = rel_err(grads[i], r->t[i].g, r->t[i].n);
		nbad += !(e <= tol);
		if (!(e <= worst))
			worst = e, wi = i;
	}
	printf("%s: loss %.9f (PyTorch float64 %.9f, relative %.2e); gradients: worst tensor %s %.2e "
	       "(max|got - ref| / max|ref|), %d of %d tensors above %.0e\n",
	       what, loss, r->loss, el, r->t[wi].name, worst, nbad, r->nt, tol);
	return el <= tol && nbad == 0;
}

static void free_grads(float **g, int n)
{
	for (int i = 0; i < n; i++)
		free(g[i]), g[i] = NULL;
}

int main(int argc, char **argv)
{
	const char *data = getenv("DNN_TEST_DATA");
	char path[4096], err[512];
	snprintf(path, sizeof(path), "%s/gpt_tiny_ref.bin", data ? data : "tests/data");
	size_t len = 0;
	unsigned char *buf = read_file(path, &len);
	if (!buf) {
		fprintf(stderr, "FAIL: cannot read %s (bench/gpt_reference.py writes it)\n", path);
		return 1;
	}
	static gpt_ref r;
	/* Truncated copies are refused, with a line (the reader bounds every read). */
	const size_t cuts[] = {0, 7, 40, 45, len / 2, len - 9, len - 1};
	for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
		err[0] = '\0';
		TEST_CHECK(ref_parse(&r, buf, cuts[i], err, sizeof(err)) == -1 && err[0],
			   "a copy cut at byte %zu of %zu was accepted", cuts[i], len);
	}
	if (ref_parse(&r, buf, len, err, sizeof(err)) != 0) {
		fprintf(stderr, "FAIL: %s: %s\n", path, err);
		return 1;
	}
	free(buf);
	printf("%s: B %d T %d V %d C %d L %d H %d, %d tensors, loss %.12f\n", path, r.B, r.T, r.V, r.C, r.L, r.H, r.nt,
	       r.loss);

	test_starpu_init(&argc, &argv);
	static float *g1[MAXT], *g3[MAXT], *gp[MAXT];
	double l1, l3, lp;
	run_step(&r, 1, NULL, &l1, g1);
	TEST_CHECK(compare(&r, "1 chunk", l1, g1, TOL),
		   "1 chunk: loss or a gradient differs from PyTorch's by more than %g", TOL);
	run_step(&r, 3, NULL, &l3, g3);
	TEST_CHECK(compare(&r, "3 chunks", l3, g3, TOL),
		   "3 chunks: loss or a gradient differs from PyTorch's by more than %g", TOL);
	double worst = 0;
	int wi = 0;
	for (int i = 0; i < r.nt; i++) {
		const double e = rel_err(g3[i], g1[i], r.t[i].n);
		if (!(e <= worst))
			worst = e, wi = i;
	}
	printf("3 chunks against 1: worst tensor %s %.2e, loss %.2e relative\n", r.t[wi].name, worst,
	       fabs(l3 - l1) / fabs(l1));
	TEST_CHECK(worst <= CHUNK_TOL && fabs(l3 - l1) <= CHUNK_TOL * fabs(l1),
		   "3 chunks against 1: %s differs by %.2e relative (> %g)", r.t[wi].name, worst, CHUNK_TOL);
	/* Negative control: the check sees one weight moved by 1e-3. */
	TEST_CHECK(ref_find(&r, PERTURB_NAME) != NULL, "no tensor %s in the reference", PERTURB_NAME);
	run_step(&r, 1, PERTURB_NAME, &lp, gp);
	TEST_CHECK(!compare(&r, "negative control (" PERTURB_NAME "[0] + 1e-3)", lp, gp, TOL),
		   "the check passed with " PERTURB_NAME "[0] moved by 1e-3");
	free_grads(g1, r.nt), free_grads(g3, r.nt), free_grads(gp, r.nt);
	ref_free(&r);
	test_starpu_shutdown();
	return test_report("train_gpt_reference");
}
