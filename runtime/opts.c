/* opts.c — option defaults (see opts.h). */
#include "opts.h"

#include <math.h>
#include <starpu.h>
#include <string.h>

#include "graph.h"

void dnn_train_opts_default(dnn_train_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->cmd = "train";
	o->net = "lenet5";
	o->data_dir = "fashion-mnist";
	o->epochs = 1;
	o->batch = 64;
	o->window = 2;
	o->optim.lr = 0.05f;
	o->optim.momentum = 0.9f;
	o->optim.weight_decay = 5e-4f;
	o->optim.optimizer = DNN_OPT_SGD;
	o->optim.beta1 = 0.9f, o->optim.beta2 = 0.999f, o->optim.eps = 1e-8f; /* PyTorch's AdamW defaults */
	o->optim.trust = 0.001f;                                           /* LARS's eta (You et al. 2017) */
	o->seed = 1;
	o->eval = 1;
	o->cosine = 1;
	o->mode = DNN_MODE_SYNC;
	o->allreduce = DNN_ALLREDUCE_AUTO;
	o->bucket_mb = -1; /* auto: dnn_dist_choose_bucket_mb */
	o->staleness = 4;
	o->async_lookahead = 1;
	o->batchnorm_global = 0; /* local, as PyTorch DDP: README "Batch norm over the global batch" says why */
	o->deterministic = 1; /* the same bits under every scheduler and worker count (graph/chunksum.h) */
	o->step_timeout = 300;
	o->val_fraction = 0.1;
	o->val_batches = 20;
}

float dnn_train_opts_default_lr(dnn_optimizer opt, int batch)
{
	/* docs/large-batch.md, 20 epochs of lenet5: the LARS and LAMB peaks were tuned at 4,096 and
	 * carried to the other batches by the square-root rule (0.5 / 0.005 at 64, 2 / 0.02 at 1,024) */
	const double sq = sqrt((batch > 0 ? batch : 1) / 4096.0);
	switch (opt) {
	case DNN_OPT_SGD: return 0.05f;
	case DNN_OPT_LARS: return (float)(4 * sq);
	case DNN_OPT_LAMB: return (float)(0.04 * sq);
	default: return 0; /* adamw: no recipe */
	}
}

int dnn_opts_chunks(const dnn_train_opts *o, const dnn_graph *g)
{
	if (o->chunks > 0)
		return o->chunks > o->batch ? o->batch : o->chunks;
	int w = (int)starpu_worker_get_count(), per_worker = 2;
	if (w < 1)
		w = 1;
	if (g && starpu_cuda_worker_get_count() == 0) {
		int bn = 0;
		for (int i = 0; i < g->nnodes; i++)
			bn |= g->nodes[i].op == DNN_OP_BATCHNORM;
		/* A second chunk per worker pays with batch norm only while each chunk keeps DNN_CHUNK_MIN_IMAGES:
		 * on 2 CPU workers of an AMD EPYC Zen 5, --chunks 2 against 4, interleaved (load 2.4-4.7,
		 * docs/studies/2026-12-07-resnet8-fp32.md): batch 64 (chunks of 32 vs 16) +3.2-5.5% resnet8, +3.3-4.1%
		 * resnet20; batch 256 (128 vs 64) -0.9-2.9% resnet8, -1.2-3.9% resnet20. */
		per_worker = bn && o->batch >= 2 * w * DNN_CHUNK_MIN_IMAGES ? 2 : 1;
	}
	int k = per_worker * w;
	return k > o->batch ? o->batch : k;
}

int dnn_net_is_language_model(const char *name)
{
	dnn_graph g;
	char err[256];
	if (!name || dnn_graph_load(&g, name, err, sizeof(err)) != 0)
		return -1;
	const int lm = g.nodes[0].tokens;
	dnn_graph_free(&g);
	return lm;
}
