/* predict.c — `starpu_anp predict`: the top-5 classes of image files by a checkpoint (see
 * predict.h), through the evaluation loop (eval.h) with a logits sink. */
#include "predict.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "anp.h"
#include "eval.h"
#include "imagefolder.h"
#include "model_ckpt.h"
#include "progress.h"

#define TOPK 5

typedef struct {
	int k;
	int *cls;    // (n, k)
	float *prob; // (n, k)
} predict_ctx;

static void predict_sink(void *ctx, const float *logits, int classes, const int *idx, int n)
{
	predict_ctx *pc = ctx;
	for (int i = 0; i < n; i++) {
		const float *l = logits + (size_t)i * classes;
		float mx = l[0];
		for (int c = 1; c < classes; c++)
			mx = l[c] > mx ? l[c] : mx;
		double se = 0;
		for (int c = 0; c < classes; c++)
			se += exp((double)l[c] - mx);
		int *cls = pc->cls + (size_t)idx[i] * pc->k;
		float *pr = pc->prob + (size_t)idx[i] * pc->k;
		for (int t = 0; t < pc->k; t++) { /* selection of the k best, lower index first on ties */
			int best = -1;
			for (int c = 0; c < classes; c++) {
				int taken = 0;
				for (int u = 0; u < t; u++)
					taken |= cls[u] == c;
				if (!taken && (best < 0 || l[c] > l[best]))
					best = c;
			}
			cls[t] = best;
			pr[t] = (float)(exp((double)l[best] - mx) / se);
		}
	}
}

int dnn_cmd_predict(const dnn_train_opts *o, const char *const *images, int nimages)
{
	char err[1024];
	dnn_graph g;
	dnn_ckpt_meta meta; /* the checkpoint's net (or --net for an old one) and its classes */
	int orc = dnn_ckpt_open_graph_classes(&g, o, &meta);
	if (orc != 0)
		return orc;
	dnn_dataset ds;
	if (dnn_imagefolder_from_files(&ds, images, nimages, g.nodes[0].C, g.nodes[0].H, g.nodes[0].W, err,
				       sizeof(err)) != 0) {
		fprintf(stderr, "error: %s\n", err);
		dnn_ckpt_free_names(&meta);
		dnn_graph_free(&g);
		return 1;
	}
	dnn_model m;
	if (dnn_model_create(&m, &g, o->seed, err, sizeof(err)) != 0) {
		fprintf(stderr, "error: %s\n", err);
		dnn_dataset_free(&ds), dnn_ckpt_free_names(&meta), dnn_graph_free(&g);
		return 1;
	}
	m.class_names = meta.class_names;
	if (dnn_model_load(&m, o->checkpoint_in, NULL, NULL, NULL, err, sizeof(err)) != 0) {
		/* Only a version-1 checkpoint takes its net from --net; a later one carries it. */
		fprintf(stderr, "error: %s%s\n", err,
			meta.version == 1 ? " (a version-1 checkpoint: predict needs the --net and --input it was "
					    "trained with)"
					  : "");
		dnn_model_destroy(&m), dnn_dataset_free(&ds), dnn_ckpt_free_names(&meta), dnn_graph_free(&g);
		return 1;
	}
	predict_ctx pc = {.k = g.classes < TOPK ? g.classes : TOPK};
	pc.cls = malloc(sizeof(int) * (size_t)nimages * pc.k);
	pc.prob = malloc(sizeof(float) * (size_t)nimages * pc.k);
	int chunks = dnn_opts_chunks(o, &g);
	double t0 = dnn_now();
	if (!pc.cls || !pc.prob) {
		fprintf(stderr, "error: out of memory for the predictions of %d images\n", nimages);
		free(pc.cls), free(pc.prob);
		dnn_model_destroy(&m), dnn_dataset_free(&ds), dnn_ckpt_free_names(&meta), dnn_graph_free(&g);
		return 1;
	}
	if (dnn_evaluate(&m, &ds, o->batch, chunks, predict_sink, &pc, NULL, NULL) != 0) {
		free(pc.cls), free(pc.prob);
		dnn_model_destroy(&m), dnn_dataset_free(&ds), dnn_ckpt_free_names(&meta), dnn_graph_free(&g);
		return 1;
	}
	double wall = dnn_now() - t0;
	int nbad = 0;
	for (int i = 0; i < nimages; i++) {
		if (dnn_imagefolder_is_bad(ds.folder, i)) {
			nbad++;
			continue;
		}
		printf("%s:", images[i]);
		for (int t = 0; t < pc.k; t++) {
			int c = pc.cls[(size_t)i * pc.k + t];
			putchar(' ');
			if (meta.class_names)
				dnn_anp_print_name(stdout, meta.class_names[c]);
			else
				printf("class%d", c);
			printf("=%.4f", pc.prob[(size_t)i * pc.k + t]);
		}
		putchar('\n');
	}
	printf("result: cmd=predict net=%s checkpoint=%s images=%d predicted=%d skipped_images=%d images_per_s=%.1f "
	       "wall_s=%.2f\n",
	       o->net, o->checkpoint_in, nimages, nimages - nbad, nbad, wall > 0 ? nimages / wall : 0, wall);
	fflush(stdout);
	free(pc.cls), free(pc.prob);
	dnn_model_destroy(&m);
	dnn_dataset_free(&ds);
	dnn_ckpt_free_names(&meta);
	dnn_graph_free(&g);
	return nbad ? 1 : 0;
}
