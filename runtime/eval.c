/* eval.c — `starpu_anp eval` (a checkpoint on the test set) and the test-set evaluation that
 * training runs after each epoch (eval.h). */
#include "eval.h"

#include <stdio.h>

#include "data.h"
#include "evaluate.h"
#include "graph.h"
#include "model_ckpt.h"
#include "opts.h"
#include "preflight.h"
#include "progress.h"

int dnn_evaluate_test(dnn_model *m, const dnn_dataset *test, int batch, int chunks, dnn_anp_metrics *anp, double *loss,
		      double *acc)
{
	if (test->folder && anp)
		return dnn_anp_evaluate(m, test, batch, chunks, anp, loss, acc);
	return dnn_evaluate(m, test, batch, chunks, NULL, NULL, loss, acc);
}

/* ---------------------------------------------------------------- starpu_anp eval */
int dnn_cmd_eval(const dnn_train_opts *o)
{
	char err[512];
	dnn_graph g;
	dnn_dataset test = {0};
	dnn_model m;
	int rc = 1, have_model = 0;
	if ((rc = dnn_ckpt_open_graph(&g, o, o->data_dir)) != 0) /* the checkpoint's net (model_ckpt.h) */
		return rc;
	rc = 1;
	if (dnn_data_load(o, &g, 0, &test) != 0)
		goto out;
	if (dnn_model_create(&m, &g, o->seed, err, sizeof(err)) != 0) {
		fprintf(stderr, "error: %s\n", err);
		goto out;
	}
	have_model = 1;
	m.class_names = test.class_names; /* image folders: must match the checkpoint's */
	uint64_t step;
	uint32_t epoch;
	if (dnn_model_load(&m, o->checkpoint_in, &step, &epoch, NULL, err, sizeof(err)) != 0) {
		fprintf(stderr, "error: %s\n", err);
		goto out;
	}
	int chunks = dnn_opts_chunks(o, m.g);
	if (dnn_preflight_memory(&m, NULL, o->batch, chunks, err, sizeof(err)) != 0) {
		fprintf(stderr, "error: %s\n", err);
		goto out;
	}
	double loss, acc, t0 = dnn_now();
	dnn_anp_metrics anp = {0};
	if (dnn_evaluate_test(&m, &test, o->batch, chunks, &anp, &loss, &acc) != 0)
		goto out;
	double wall = dnn_now() - t0;
	printf("result: cmd=eval net=%s checkpoint=%s epoch=%u step=%llu samples=%d test_accuracy=%.4f test_loss=%.6f "
	       "images_per_s=%.1f wall_s=%.2f",
	       o->net, o->checkpoint_in, epoch, (unsigned long long)step, test.n, acc, loss, wall > 0 ? test.n / wall : 0, wall);
	if (test.folder)
		dnn_anp_print_fields(stdout, NULL, &test, &anp);
	printf("\n");
	fflush(stdout);
	rc = 0;
	if (o->report_path && dnn_anp_write_report(o->report_path, o, &g, NULL, &test, test.folder ? &anp : NULL,
						   wall > 0 ? test.n / wall : 0, wall, err, sizeof(err)) != 0) {
		fprintf(stderr, "error: %s\n", err);
		rc = 1;
	}
out:
	if (have_model)
		dnn_model_destroy(&m);
	dnn_dataset_free(&test);
	dnn_graph_free(&g);
	return rc;
}
