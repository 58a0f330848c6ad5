/* anp.c — ANP evaluation and reports (see anp.h); `starpu_anp predict` is predict.c. */
#include "anp.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "eval.h"
#include "imagefolder.h"

/* ---------------------------------------------------------------- evaluation */
typedef struct {
	dnn_anp_acc acc;
	const dnn_dataset *ds;
} eval_ctx;

static void eval_sink(void *ctx, const float *logits, int classes, const int *idx, int n)
{
	eval_ctx *e = ctx;
	for (int i = 0; i < n; i++)
		if (!dnn_imagefolder_is_bad(e->ds->folder, idx[i]))
			dnn_anp_acc_add(&e->acc, logits + (size_t)i * classes, &e->ds->labels[idx[i]], 1);
}

int dnn_anp_evaluate(dnn_model *m, const dnn_dataset *ds, int batch, int chunks, dnn_anp_metrics *mt,
		     double *loss, double *acc)
{
	eval_ctx e = {.ds = ds};
	if (dnn_anp_acc_init(&e.acc, m->g->classes, (const char *const *)ds->class_names) != 0) {
		fprintf(stderr, "error: out of memory for the evaluation metrics\n");
		return -1;
	}
	int rc = dnn_evaluate(m, ds, batch, chunks, eval_sink, &e, NULL, NULL);
	dnn_anp_acc_finish(&e.acc, mt);
	dnn_anp_acc_free(&e.acc);
	/* Loss and accuracy over the decoded samples only (the step statistics count substitutes). */
	*loss = mt->loss;
	*acc = mt->top1;
	return rc;
}

/* ---------------------------------------------------------------- result line and report */
void dnn_anp_print_name(FILE *out, const char *s)
{
	for (; *s; s++)
		fputc(*s == ' ' || *s == '\t' || *s == ',' || *s == '>' || *s == ':' || *s == '=' || *s == '\n' ? '?' : *s,
		      out);
}

static int skipped(const dnn_dataset *train, const dnn_dataset *test)
{
	return (train ? dnn_imagefolder_skipped(train->folder) : 0) + (test ? dnn_imagefolder_skipped(test->folder) : 0);
}

void dnn_anp_print_fields(FILE *out, const dnn_dataset *train, const dnn_dataset *test, const dnn_anp_metrics *mt)
{
	const dnn_dataset *named = test && test->class_names ? test : train;
	if (mt) {
		fprintf(out, " top5_accuracy=%.4f adjective_accuracy=%.4f noun_accuracy=%.4f confused=", mt->top5,
			mt->adjective, mt->noun);
		for (int i = 0; i < mt->nconfused; i++) {
			if (i)
				fputc(',', out);
			dnn_anp_print_name(out, named->class_names[mt->confused[i].truth]);
			fputc('>', out);
			dnn_anp_print_name(out, named->class_names[mt->confused[i].pred]);
			fprintf(out, ":%ld", mt->confused[i].count);
		}
		if (mt->nconfused == 0)
			fputs("none", out);
	}
	fprintf(out, " skipped_images=%d", skipped(train, test));
}

static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; s && *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

int dnn_anp_write_report(const char *path, const dnn_train_opts *o, const dnn_graph *g, const dnn_dataset *train,
			 const dnn_dataset *test, const dnn_anp_metrics *mt, double images_per_s, double wall_s,
			 char *err, size_t errlen)
{
	char tmp[4096];
	snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid());
	FILE *f = fopen(tmp, "w");
	if (!f) {
		snprintf(err, errlen, "--report %s: %s", path, strerror(errno));
		return -1;
	}
	const dnn_dataset *named = test && test->class_names ? test : train;
	const dnn_node *in = &g->nodes[0];
	fprintf(f, "{\n  \"cmd\": ");
	json_str(f, o->cmd);
	fprintf(f, ",\n  \"net\": ");
	json_str(f, o->net);
	fprintf(f, ",\n  \"data\": ");
	json_str(f, o->data_dir);
	fprintf(f, ",\n  \"input\": [%d, %d, %d],\n  \"classes\": %d,\n  \"class_names\": [", in->C, in->H, in->W,
		g->classes);
	for (int i = 0; named && named->class_names && i < named->classes; i++) {
		fprintf(f, i ? ", " : "");
		json_str(f, named->class_names[i]);
	}
	fprintf(f, "],\n  \"train_images\": %d,\n  \"val_images\": %d,\n  \"skipped_images\": %d,\n  \"skipped_files\": [",
		train ? train->n : 0, test ? test->n : 0, skipped(train, test));
	int k = 0;
	for (int side = 0; side < 2; side++) {
		const dnn_dataset *d = side == 0 ? train : test;
		const char *list[100];
		int nl = d ? dnn_imagefolder_skipped_list(d->folder, list, 100) : 0;
		for (int i = 0; i < nl; i++, k++) {
			fprintf(f, k ? ", " : "");
			json_str(f, list[i]);
		}
	}
	fprintf(f, "]");
	if (mt) {
		fprintf(f, ",\n  \"evaluated\": %ld,\n  \"loss\": %.6f,\n  \"top1_accuracy\": %.6f,\n  \"top5_accuracy\": %.6f,\n"
			   "  \"adjective_accuracy\": %.6f,\n  \"noun_accuracy\": %.6f,\n  \"most_confused\": [",
			mt->n, mt->loss, mt->top1, mt->top5, mt->adjective, mt->noun);
		for (int i = 0; i < mt->nconfused; i++) {
			fprintf(f, "%s\n    {\"true\": ", i ? "," : "");
			json_str(f, named->class_names[mt->confused[i].truth]);
			fprintf(f, ", \"predicted\": ");
			json_str(f, named->class_names[mt->confused[i].pred]);
			fprintf(f, ", \"count\": %ld}", mt->confused[i].count);
		}
		fprintf(f, "%s]", mt->nconfused ? "\n  " : "");
	}
	fprintf(f, ",\n  \"images_per_s\": %.1f,\n  \"wall_s\": %.2f\n}\n", images_per_s, wall_s);
	int bad = ferror(f);
	bad |= fflush(f) != 0;
	bad |= fclose(f) != 0;
	if (bad || rename(tmp, path) != 0) {
		snprintf(err, errlen, "--report %s: %s", path, strerror(errno));
		unlink(tmp);
		return -1;
	}
	return 0;
}
