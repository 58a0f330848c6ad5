/* unit_anp_metrics.c — top-1/top-5, adjective and noun accuracy and the most-confused pairs on a
 * hand-made confusion case; name splitting; dnn_graph_set_classes. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "anp_metrics.h"
#include "checkpoint.h"
#include "graph.h"
#include "test_util.h"

/* Logits of one sample whose ranking is order[0] > order[1] > ... (the rest lower still). */
static void logits_ranked(float *l, int classes, const int *order, int k)
{
	for (int c = 0; c < classes; c++)
		l[c] = -10.0f;
	for (int i = 0; i < k; i++)
		l[order[i]] = (float)(k - i);
}

static void test_split(void)
{
	char a[32], n[32];
	dnn_anp_split("cute_dog", a, sizeof(a), n, sizeof(n));
	TEST_CHECK(!strcmp(a, "cute") && !strcmp(n, "dog"), "cute_dog -> '%s' '%s'", a, n);
	dnn_anp_split("happy_new_year", a, sizeof(a), n, sizeof(n));
	TEST_CHECK(!strcmp(a, "happy") && !strcmp(n, "new_year"), "happy_new_year -> '%s' '%s'", a, n);
	dnn_anp_split("sky", a, sizeof(a), n, sizeof(n));
	TEST_CHECK(!strcmp(a, "sky") && !strcmp(n, "sky"), "sky -> '%s' '%s'", a, n);
	dnn_anp_split("verylongadjective_x", a, 5, n, sizeof(n));
	TEST_CHECK(!strcmp(a, "very") && !strcmp(n, "x"), "truncated -> '%s' '%s'", a, n);
}

/* Six classes: {cute, stormy, old} x {dog, sky}, with 10 samples whose predictions are chosen by
 * hand, so every rate is known exactly. */
static void test_confusion_case(void)
{
	const char *names[] = {"cute_dog", "cute_sky", "old_dog", "old_sky", "stormy_dog", "stormy_sky"};
	enum { CUTE_DOG, CUTE_SKY, OLD_DOG, OLD_SKY, STORMY_DOG, STORMY_SKY, K };
	struct {
		int label, k;
		int order[6]; // predicted ranking of the k highest logits, best first
	} s[] = {
		{CUTE_DOG, 1, {CUTE_DOG}},                                   // right
		{CUTE_DOG, 2, {CUTE_SKY, CUTE_DOG}},                         // adjective right, noun wrong
		{CUTE_DOG, 2, {OLD_DOG, CUTE_DOG}},                          // noun right, adjective wrong
		{STORMY_SKY, 1, {STORMY_SKY}},                               // right
		{STORMY_SKY, 2, {OLD_SKY, STORMY_SKY}},                      // noun right
		{STORMY_SKY, 3, {OLD_SKY, STORMY_DOG, STORMY_SKY}},          // noun right (old_sky again)
		{OLD_DOG, 6, {CUTE_SKY, STORMY_SKY, OLD_SKY, STORMY_DOG, CUTE_DOG, OLD_DOG}}, // both wrong, rank 6
		{OLD_SKY, 1, {OLD_SKY}},                                     // right
		{CUTE_SKY, 2, {STORMY_DOG, CUTE_SKY}},                       // both wrong, top-5
		{STORMY_DOG, 2, {STORMY_SKY, STORMY_DOG}},                   // adjective right
	};
	const int n = (int)(sizeof(s) / sizeof(s[0]));
	dnn_anp_acc a;
	TEST_CHECK(dnn_anp_acc_init(&a, K, names) == 0, "init");
	TEST_CHECK(a.adj[CUTE_DOG] == a.adj[CUTE_SKY] && a.adj[CUTE_DOG] != a.adj[OLD_DOG], "adjective ids");
	TEST_CHECK(a.noun[CUTE_DOG] == a.noun[STORMY_DOG] && a.noun[CUTE_DOG] != a.noun[CUTE_SKY], "noun ids");
	float l[10][K];
	int32_t y[10];
	for (int i = 0; i < n; i++) {
		logits_ranked(l[i], K, s[i].order, s[i].k);
		y[i] = s[i].label;
	}
	/* in two calls, to check accumulation */
	dnn_anp_acc_add(&a, &l[0][0], y, 4);
	dnn_anp_acc_add(&a, &l[4][0], y + 4, n - 4);
	dnn_anp_metrics m;
	dnn_anp_acc_finish(&a, &m);
	TEST_CHECK(m.n == 10, "n = %ld", m.n);
	TEST_CHECK(fabs(m.top1 - 0.3) < 1e-12, "top1 %g, want 0.3", m.top1);
	TEST_CHECK(fabs(m.top5 - 0.9) < 1e-12, "top5 %g, want 0.9", m.top5);
	/* adjective right, by hand: 0 yes, 1 yes, 2 no, 3 yes, 4 no, 5 no, 6 no, 7 yes, 8 no, 9 yes -> 5/10 */
	TEST_CHECK(fabs(m.adjective - 0.5) < 1e-12, "adjective %g, want 0.5", m.adjective);
	/* noun right: 0 yes, 1 no, 2 yes, 3 yes, 4 yes, 5 yes, 6 no, 7 yes, 8 no, 9 no -> 6/10 */
	TEST_CHECK(fabs(m.noun - 0.6) < 1e-12, "noun %g, want 0.6", m.noun);
	/* confusions: stormy_sky>old_sky x2 first, then the single ones by (true, predicted) index */
	TEST_CHECK(m.nconfused == 6, "%d confused pairs, want 6", m.nconfused);
	int want[6][3] = {{STORMY_SKY, OLD_SKY, 2}, {CUTE_DOG, CUTE_SKY, 1}, {CUTE_DOG, OLD_DOG, 1},
			  {CUTE_SKY, STORMY_DOG, 1}, {OLD_DOG, CUTE_SKY, 1}, {STORMY_DOG, STORMY_SKY, 1}};
	for (int i = 0; i < 6 && i < m.nconfused; i++)
		TEST_CHECK(m.confused[i].truth == want[i][0] && m.confused[i].pred == want[i][1] &&
				   m.confused[i].count == want[i][2],
			   "pair %d: %s>%s:%ld, want %s>%s:%d", i, names[m.confused[i].truth], names[m.confused[i].pred],
			   m.confused[i].count, names[want[i][0]], names[want[i][1]], want[i][2]);
	/* loss: mean cross-entropy, checked against a direct computation */
	double ref = 0;
	for (int i = 0; i < n; i++) {
		double se = 0;
		for (int c = 0; c < K; c++)
			se += exp(l[i][c]);
		ref += log(se) - l[i][y[i]];
	}
	TEST_CHECK(fabs(m.loss - ref / n) < 1e-9, "loss %g, want %g", m.loss, ref / n);
	TEST_CHECK(a.class_n[CUTE_DOG] == 3 && a.class_top1[CUTE_DOG] == 1, "per-class counts");
	dnn_anp_acc_free(&a);
}

/* More than 10 distinct confusions: the 10 most frequent, ties by class index; labels out of
 * range are ignored; ties in the logits go to the lower class index. */
static void test_top10_and_ties(void)
{
	enum { K = 12 };
	dnn_anp_acc a;
	TEST_CHECK(dnn_anp_acc_init(&a, K, NULL) == 0, "init");
	float l[K];
	for (int t = 0; t < K; t++) { /* true t predicted (t+1)%K, t+1 times */
		for (int c = 0; c < K; c++)
			l[c] = 0;
		l[(t + 1) % K] = 1;
		l[t] = 0.5f; /* second best */
		for (int r = 0; r <= t; r++) {
			int32_t y = t;
			dnn_anp_acc_add(&a, l, &y, 1);
		}
	}
	int32_t bad = K + 3;
	dnn_anp_acc_add(&a, l, &bad, 1);
	for (int c = 0; c < K; c++)
		l[c] = 0.5f; /* all equal: class 0 wins, so label 0 is right and label 3 has rank 3 */
	int32_t y0 = 0, y3 = 3, y7 = 7;
	dnn_anp_acc_add(&a, l, &y0, 1);
	dnn_anp_acc_add(&a, l, &y3, 1);
	dnn_anp_acc_add(&a, l, &y7, 1);
	dnn_anp_metrics m;
	dnn_anp_acc_finish(&a, &m);
	long total = K * (K + 1) / 2 + 3;
	TEST_CHECK(m.n == total, "n %ld, want %ld", m.n, total);
	TEST_CHECK(fabs(m.top1 - 1.0 / total) < 1e-12, "top1 %g", m.top1);
	TEST_CHECK(fabs(m.top5 - (double)(K * (K + 1) / 2 + 2) / total) < 1e-12, "top5 %g", m.top5);
	TEST_CHECK(m.nconfused == DNN_ANP_CONFUSED, "%d pairs", m.nconfused);
	/* first: 11>0 (12 times) ... then 3>0 and 7>0 once each (from the ties) tie with 0>1 */
	TEST_CHECK(m.confused[0].truth == 11 && m.confused[0].pred == 0 && m.confused[0].count == 12, "first pair");
	TEST_CHECK(m.confused[9].truth == 2 && m.confused[9].count == 3, "last pair %d>%d:%ld", m.confused[9].truth,
		   m.confused[9].pred, m.confused[9].count);
	/* without names, adjective = noun = class: both equal top-1 */
	TEST_CHECK(m.adjective == m.top1 && m.noun == m.top1, "nameless classes");
	dnn_anp_acc_free(&a);
}

static void test_set_classes(void)
{
	char err[512];
	dnn_graph g;
	TEST_CHECK(dnn_graph_load(&g, "resnet18", err, sizeof(err)) == 0, "%s", err);
	long long p1000 = dnn_graph_params(&g);
	TEST_CHECK(dnn_graph_set_classes(&g, 42, err, sizeof(err)) == 0, "%s", err);
	TEST_CHECK(g.classes == 42, "classes %d", g.classes);
	TEST_CHECK(p1000 - dnn_graph_params(&g) == (1000 - 42) * 513LL, "params %lld -> %lld", p1000, dnn_graph_params(&g));
	TEST_CHECK(dnn_graph_set_input_hw(&g, 64, 64, err, sizeof(err)) == 0, "%s", err);
	TEST_CHECK(g.nodes[0].H == 64 && g.classes == 42, "input 64");
	TEST_CHECK(dnn_graph_set_classes(&g, 1, err, sizeof(err)) != 0 && strstr(err, "out of range"), "1 class: %s", err);
	dnn_graph_free(&g);
	/* a net whose loss does not read a dense layer cannot be resized */
	const char *txt = "input x 4 1 1\nrelu r x\nsoftmax_xent loss r\n";
	TEST_CHECK(dnn_graph_parse(&g, txt, "t.net", err, sizeof(err)) == 0, "%s", err);
	TEST_CHECK(dnn_graph_set_classes(&g, 3, err, sizeof(err)) != 0 && strstr(err, "not a dense"), "%s", err);
	dnn_graph_free(&g);
}

/* dnn_checkpoint_read_classes (predict shapes the net from it): the names come back; every
 * truncation and a corrupt count end in a clean error. */
static void test_read_classes(void)
{
	char path[4200], err[512];
	snprintf(path, sizeof(path), "%s/unit_anp_metrics.%d.ckpt", getenv("DNN_BUILD_DIR") ? getenv("DNN_BUILD_DIR") : "/tmp",
		 (int)getpid());
	char *names[3] = {"cute_dog", "old_house", "stormy_sky"};
	float w[4] = {1, 2, 3, 4};
	dnn_ckpt_tensor t = {"fc.weight", w, 4};
	dnn_ckpt_meta meta = {.net_fingerprint = 42, .step = 7, .epoch = 1, .nclasses = 3, .class_names = names};
	TEST_CHECK(dnn_checkpoint_save(path, &meta, &t, 1, err, sizeof(err)) == 0, "%s", err);
	dnn_ckpt_meta got;
	TEST_CHECK(dnn_checkpoint_read_classes(path, &got, err, sizeof(err)) == 0, "%s", err);
	TEST_CHECK(got.nclasses == 3 && got.net_fingerprint == 42 && got.step == 7 && !strcmp(got.class_names[2], "stormy_sky"),
		   "read back %u classes", got.nclasses);
	dnn_ckpt_free_names(&got);
	FILE *f = fopen(path, "rb");
	unsigned char buf[4096];
	size_t n = f ? fread(buf, 1, sizeof(buf), f) : 0;
	if (f)
		fclose(f);
	int bad = 0;
	for (size_t k = 0; k < n; k++) {
		FILE *o = fopen(path, "wb");
		fwrite(buf, 1, k, o);
		fclose(o);
		if (dnn_checkpoint_read_classes(path, &got, err, sizeof(err)) == 0)
			dnn_ckpt_free_names(&got);
		else
			bad++;
	}
	TEST_CHECK(bad > 0, "no truncation failed");
	buf[16 + 32] = 0xff, buf[16 + 33] = 0xff; /* class count 65535+: names run past the header */
	f = fopen(path, "wb");
	fwrite(buf, 1, n, f);
	fclose(f);
	TEST_CHECK(dnn_checkpoint_read_classes(path, &got, err, sizeof(err)) != 0 && strstr(err, path), "corrupt count: %s", err);
	TEST_CHECK(dnn_checkpoint_read_classes("/nonexistent.ckpt", &got, err, sizeof(err)) != 0, "missing file");
	unlink(path);
}

int main(void)
{
	test_read_classes();
	test_split();
	test_confusion_case();
	test_top10_and_ties();
	test_set_classes();
	return test_report("unit_anp_metrics");
}
