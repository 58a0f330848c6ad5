/* opts.c — option defaults (see opts.h). */
#include "opts.h"

#include <starpu.h>
#include <string.h>

void dnn_train_opts_default(dnn_train_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->cmd = "train";
	o->net = "lenet5";
	o->data_dir = "fashion-mnist";
	o->epochs = 1;
	o->batch = 64;
	o->window = 2;
	o->sgd.lr = 0.05f;
	o->sgd.momentum = 0.9f;
	o->sgd.weight_decay = 5e-4f;
	o->sgd.optimizer = DNN_OPT_SGD;
	o->sgd.beta1 = 0.9f, o->sgd.beta2 = 0.999f, o->sgd.eps = 1e-8f; /* PyTorch's AdamW defaults */
	o->sgd.trust = 0.001f;                                           /* LARS's eta (You et al. 2017) */
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
}

int dnn_opts_chunks(const dnn_train_opts *o, const dnn_graph *g)
{
	if (o->chunks > 0)
		return o->chunks > o->batch ? o->batch : o->chunks;
	int w = (int)starpu_worker_get_count(), per_worker = 2;
	if (g && starpu_cuda_worker_get_count() == 0) {
		int bn = 0;
		for (int i = 0; i < g->nnodes; i++)
			bn |= g->nodes[i].op == DNN_OP_BATCHNORM;
		per_worker = bn ? 2 : 1;
	}
	int k = per_worker * (w > 0 ? w : 1);
	return k > o->batch ? o->batch : k;
}
