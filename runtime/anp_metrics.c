/* anp_metrics.c — top-1/top-5, adjective/noun accuracy and confusions (see anp_metrics.h). */
#include "anp_metrics.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void dnn_anp_split(const char *name, char *adj, size_t adjlen, char *noun, size_t nounlen)
{
	const char *us = strchr(name, '_');
	size_t la = us ? (size_t)(us - name) : strlen(name);
	const char *n = us ? us + 1 : name;
	if (adjlen) {
		size_t k = la < adjlen - 1 ? la : adjlen - 1;
		memcpy(adj, name, k);
		adj[k] = '\0';
	}
	if (nounlen) {
		size_t ln = strlen(n), k = ln < nounlen - 1 ? ln : nounlen - 1;
		memcpy(noun, n, k);
		noun[k] = '\0';
	}
}

/* ids[c] = index of the first class whose word (part 0: adjective, 1: noun) equals class c's. */
static int word_ids(int *ids, int classes, const char *const *names, int part)
{
	char **w = calloc((size_t)classes, sizeof(char *));
	if (!w)
		return -1;
	int rc = 0;
	for (int c = 0; c < classes && rc == 0; c++) {
		size_t len = strlen(names[c]) + 1;
		char *adj = malloc(len), *noun = malloc(len);
		if (!adj || !noun) {
			free(adj), free(noun);
			rc = -1;
			break;
		}
		dnn_anp_split(names[c], adj, len, noun, len);
		if (part == 0)
			w[c] = adj, free(noun);
		else
			w[c] = noun, free(adj);
		ids[c] = c;
		for (int d = 0; d < c; d++)
			if (strcmp(w[d], w[c]) == 0) {
				ids[c] = ids[d];
				break;
			}
	}
	for (int c = 0; c < classes; c++)
		free(w[c]);
	free(w);
	return rc;
}

int dnn_anp_acc_init(dnn_anp_acc *a, int classes, const char *const *class_names)
{
	memset(a, 0, sizeof(*a));
	a->classes = classes;
	a->adj = malloc(sizeof(int) * (size_t)classes);
	a->noun = malloc(sizeof(int) * (size_t)classes);
	a->class_n = calloc((size_t)classes, sizeof(long));
	a->class_top1 = calloc((size_t)classes, sizeof(long));
	if (!a->adj || !a->noun || !a->class_n || !a->class_top1) {
		dnn_anp_acc_free(a);
		return -1;
	}
	if (class_names) {
		if (word_ids(a->adj, classes, class_names, 0) != 0 || word_ids(a->noun, classes, class_names, 1) != 0) {
			dnn_anp_acc_free(a);
			return -1;
		}
	} else {
		for (int c = 0; c < classes; c++)
			a->adj[c] = a->noun[c] = c;
	}
	return 0;
}

void dnn_anp_acc_add(dnn_anp_acc *a, const float *logits, const int32_t *labels, int n)
{
	const int K = a->classes;
	for (int i = 0; i < n; i++) {
		const float *l = logits + (size_t)i * K;
		const int y = labels[i];
		if (y < 0 || y >= K)
			continue;
		/* rank of the true class: classes that beat it (greater, or equal with a lower index) */
		int rank = 0, pred = 0;
		float mx = l[0];
		for (int c = 0; c < K; c++) {
			if (l[c] > l[y] || (l[c] == l[y] && c < y))
				rank++;
			if (l[c] > mx)
				mx = l[c], pred = c;
		}
		double se = 0;
		for (int c = 0; c < K; c++)
			se += exp((double)l[c] - mx);
		a->loss_sum += log(se) - ((double)l[y] - mx);
		a->n++;
		a->class_n[y]++;
		a->top5 += rank < 5;
		if (pred == y) {
			a->top1++;
			a->class_top1[y]++;
		} else {
			if (a->nerr == a->cap) {
				long cap = a->cap ? 2 * a->cap : 1024;
				int32_t *e = realloc(a->err, sizeof(int32_t) * 2 * (size_t)cap);
				if (e) /* else out of memory: the confusion summary stops growing, the rates do not */
					a->err = e, a->cap = cap;
			}
			if (a->nerr < a->cap) {
				a->err[2 * a->nerr] = y, a->err[2 * a->nerr + 1] = pred;
				a->nerr++;
			}
		}
		a->adj_ok += a->adj[pred] == a->adj[y];
		a->noun_ok += a->noun[pred] == a->noun[y];
	}
}

static int cmp_pair_code(const void *x, const void *y)
{
	int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
	return a < b ? -1 : a > b;
}

/* better = larger count, then smaller truth, then smaller pred */
static int pair_better(const dnn_anp_pair *p, const dnn_anp_pair *q)
{
	if (p->count != q->count)
		return p->count > q->count;
	if (p->truth != q->truth)
		return p->truth < q->truth;
	return p->pred < q->pred;
}

void dnn_anp_acc_finish(const dnn_anp_acc *a, dnn_anp_metrics *m)
{
	memset(m, 0, sizeof(*m));
	m->n = a->n;
	if (a->n > 0) {
		m->loss = a->loss_sum / a->n;
		m->top1 = (double)a->top1 / a->n;
		m->top5 = (double)a->top5 / a->n;
		m->adjective = (double)a->adj_ok / a->n;
		m->noun = (double)a->noun_ok / a->n;
	}
	if (a->nerr == 0)
		return;
	int64_t *codes = malloc(sizeof(int64_t) * (size_t)a->nerr);
	if (!codes)
		return;
	for (long i = 0; i < a->nerr; i++)
		codes[i] = (int64_t)a->err[2 * i] * a->classes + a->err[2 * i + 1];
	qsort(codes, (size_t)a->nerr, sizeof(int64_t), cmp_pair_code);
	for (long i = 0; i < a->nerr;) {
		long j = i;
		while (j < a->nerr && codes[j] == codes[i])
			j++;
		dnn_anp_pair p = {(int)(codes[i] / a->classes), (int)(codes[i] % a->classes), j - i};
		/* insert into the sorted top list */
		int pos = m->nconfused;
		while (pos > 0 && pair_better(&p, &m->confused[pos - 1]))
			pos--;
		if (pos < DNN_ANP_CONFUSED) {
			int last = m->nconfused < DNN_ANP_CONFUSED ? m->nconfused : DNN_ANP_CONFUSED - 1;
			for (int k = last; k > pos; k--)
				m->confused[k] = m->confused[k - 1];
			m->confused[pos] = p;
			if (m->nconfused < DNN_ANP_CONFUSED)
				m->nconfused++;
		}
		i = j;
	}
	free(codes);
}

void dnn_anp_acc_free(dnn_anp_acc *a)
{
	free(a->adj), free(a->noun), free(a->class_n), free(a->class_top1), free(a->err);
	memset(a, 0, sizeof(*a));
}
