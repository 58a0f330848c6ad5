/* nets_cmd.c — the commands that only read nets, before (or without) StarPU: `starpu_anp nets`
 * and the net check (and --summary) that runs before StarPU starts. Declared in starpu_anp.h. */
#include <stdio.h>
#include <string.h>

#include "data.h"
#include "graph.h"
#include "knobs.h"
#include "model_ckpt.h"
#include "optim.h"
#include "opts.h"
#include "starpu_anp.h"

int dnn_cmd_nets(void)
{
	for (int i = 0; i < dnn_builtin_net_count(); i++) {
		dnn_graph g;
		char err[512];
		if (dnn_graph_load(&g, dnn_builtin_net_name(i), err, sizeof(err)) != 0) {
			fprintf(stderr, "error: %s\n", err);
			return 1;
		}
		printf("%-10s input %dx%dx%d  %10lld params  %8.3f GFLOPs fwd/sample  %d classes\n",
		       dnn_builtin_net_name(i), g.nodes[0].C, g.nodes[0].H, g.nodes[0].W, dnn_graph_params(&g),
		       dnn_graph_flops_fwd(&g) / 1e9, g.classes);
		dnn_graph_free(&g);
	}
	return 0;
}

/* train --resume: g, the net train builds (--net at --input, an image folder's class count), must
 * be the checkpoint's (dnn_ckpt_check_net: exit 2 as eval, predict and export). A checkpoint that
 * cannot be read is left to dnn_model_load, which says precisely what is wrong with it. */
static int resume_same_net(dnn_graph *g, const dnn_train_opts *o)
{
	char err[2600];
	dnn_ckpt_meta info;
	if (dnn_checkpoint_read_info(o->resume_path, &info, 0, err, sizeof(err)) != 0)
		return 0;
	int rc = dnn_data_prepare_graph(g, 0, o->data_dir, err, sizeof(err)) != 0
			 ? 1
			 : dnn_ckpt_check_net(g, o->net, o->resume_path, &info, NULL, err, sizeof(err));
	dnn_ckpt_free_names(&info);
	if (rc != 0)
		fprintf(stderr, "error: %s\n", err);
	return rc;
}

/* --summary's memory line: what training at the command's --batch, --chunks, --window and
 * --optimizer keeps (dnn_graph_train_memory). */
static void print_train_memory(const dnn_graph *g, const dnn_train_opts *o)
{
	int bn = 0; /* without --chunks: dnn_opts_chunks' default on 2 CPU workers (2 per worker with batch norm where
		     * chunks keep DNN_CHUNK_MIN_IMAGES, else 1) */
	for (int i = 0; i < g->nnodes; i++)
		bn |= g->nodes[i].op == DNN_OP_BATCHNORM;
	int K = o->chunks > 0 ? o->chunks : bn && o->batch >= 4 * DNN_CHUNK_MIN_IMAGES ? 4 : 2;
	K = K < o->batch ? K : o->batch;
	dnn_mem_estimate e = dnn_graph_train_memory(g, o->batch, K, o->window, (int)dnn_optimizer_state_mult(o->optim.optimizer));
	const double MB = 1e6;
	printf("training memory at --batch %d, --chunks %d%s, --window %d, --optimizer %s: %.1f MB = parameters %.1f + "
	       "gradients %.1f (one partial per chunk) + optimiser state %.1f + activations %.1f (outputs, their "
	       "gradients, saved buffers) + inputs %.1f; the process adds its libraries, StarPU, OpenBLAS and the data\n",
	       o->batch, K, o->chunks > 0 ? "" : " (2 workers' default)", o->window, dnn_optimizer_name(o->optim.optimizer),
	       e.total / MB, e.params / MB, e.grads / MB, e.state / MB, e.activations / MB, e.inputs / MB);
}

int dnn_cmd_check_net(dnn_train_opts *o, int print_summary)
{
	dnn_graph g;
	char err[512];
	if (o->checkpoint_in) { /* eval, predict, export */
		static char name[256];
		char cerr[2600];
		int rc = dnn_ckpt_open_net(&g, o, name, sizeof(name), cerr, sizeof(cerr));
		if (rc != 0) {
			fprintf(stderr, "error: %s\n", cerr);
			return rc;
		}
		o->net = name;
		rc = dnn_data_check_lm(o, &g); /* a language model's data options */
		dnn_graph_free(&g);
		return rc;
	}
	if (dnn_graph_load(&g, o->net, err, sizeof(err)) != 0) {
		fprintf(stderr, "error: %s\n", err);
		return 1;
	}
	int rc = 0;
	if (o->input && dnn_graph_set_input_hw(&g, o->input, o->input, err, sizeof(err)) != 0) {
		fprintf(stderr, "error: --input %d: %s\n", o->input, err);
		rc = 1;
	} else {
		if (!print_summary) /* a language model's data options, its default corpus (--summary reads none) */
			rc = dnn_data_check_lm(o, &g);
		if (rc == 0 && o->resume_path && !strcmp(o->cmd, "train"))
			rc = resume_same_net(&g, o);
		if (rc == 0 && print_summary) {
			dnn_graph_print_summary(&g, dnn_knobs_get()->fuse, stdout);
			print_train_memory(&g, o);
		}
	}
	dnn_graph_free(&g);
	return rc;
}
