/* anp_metrics.h — classification metrics for Adjective-Noun-Pair classes (no StarPU inside).
 *
 * A class name is `adjective_noun` ("cute_dog"), split at its first '_' (a name without '_' is its
 * own adjective and noun). From per-sample logits and true labels:
 *   top1, top5          the true class is the best / among the 5 best logits (ties: lower index first)
 *   adjective, noun     the predicted (top-1) class has the true class's adjective / noun
 *   loss                mean cross-entropy of the softmax
 *   confused            the most frequent (true, predicted) pairs with true != predicted, by count,
 *                       then by true and predicted class index
 *   per class           samples and top-1 hits
 */
#ifndef DNN_ANP_METRICS_H
#define DNN_ANP_METRICS_H
#include <stddef.h>
#include <stdint.h>

#define DNN_ANP_CONFUSED 10

typedef struct {
	int truth, pred;
	long count;
} dnn_anp_pair;

typedef struct {
	long n;
	double loss, top1, top5, adjective, noun;
	int nconfused;
	dnn_anp_pair confused[DNN_ANP_CONFUSED];
} dnn_anp_metrics;

typedef struct {
	int classes;
	int *adj, *noun;       // (classes) id of the class's adjective / noun: equal words, equal ids
	long n, top1, top5, adj_ok, noun_ok;
	double loss_sum;
	long *class_n, *class_top1; // (classes)
	long nerr, cap;
	int32_t *err;          // (nerr, 2) true and predicted class of each top-1 miss
} dnn_anp_acc;

/* Split name at its first '_' into adjective and noun (truncated to the buffers). */
void dnn_anp_split(const char *name, char *adj, size_t adjlen, char *noun, size_t nounlen);

/* class_names: `classes` names, or NULL (then every class is its own adjective and noun).
 * Returns 0, or -1 when out of memory. */
int dnn_anp_acc_init(dnn_anp_acc *a, int classes, const char *const *class_names);
/* Add n samples: logits (n, classes), labels (n) in [0, classes). */
void dnn_anp_acc_add(dnn_anp_acc *a, const float *logits, const int32_t *labels, int n);
void dnn_anp_acc_finish(const dnn_anp_acc *a, dnn_anp_metrics *m);
void dnn_anp_acc_free(dnn_anp_acc *a);
#endif
