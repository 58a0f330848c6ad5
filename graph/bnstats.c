/* bnstats.c — the handles of batch norm over the global batch (bnstats.h) and their sum over
 * the ranks. */
#include "bnstats.h"

#include <starpu_mpi.h>
#include <stdlib.h>

#include "batchnorm.h"
#include "chunksum.h"
#include "dist.h"
#include "errline.h"


static size_t bn_key(const dnn_plan *p, int i, int slot, int phase)
{
	return ((size_t)i * p->nslots + slot) * 2 + phase;
}

static starpu_data_handle_t dsum_vector(size_t n)
{
	starpu_data_handle_t h;
	starpu_vector_data_register(&h, -1, 0, (uint32_t)n, sizeof(double));
	dnn_bn_set_dsum_redux(h);
	return h;
}

/* Multi-rank sync: every rank's handle of key k (owner j; ours is bn_sums[k]) and their sum
 * (owner 0), registered with StarPU-MPI under N + 1 fresh tags. */
static void register_cross_rank(dnn_plan *p, size_t k, size_t n)
{
	dnn_dist *d = p->m->dist;
	const int N = p->bn_nranks, rank = dnn_dist_rank(d);
	int64_t tag = dnn_dist_reserve_tags(d, N + 1);
	for (int j = 0; j < N; j++) {
		starpu_data_handle_t h = j == rank ? p->bn_sums[k] : dsum_vector(n);
		starpu_mpi_data_register(h, tag++, j);
		p->bn_rank_sums[k * N + j] = h;
	}
	p->bn_gsums[k] = dsum_vector(n);
	starpu_mpi_data_register(p->bn_gsums[k], tag, 0);
}

int dnn_plan_set_batchnorm(dnn_plan *p, int global, char *err, size_t errlen)
{
	const dnn_graph *g = p->m->g;
	dnn_plan_bn_destroy(p);
	if (!global || !p->train)
		return 0;
	const int cross = p->distributed && dnn_dist_is_sync(p->m->dist);
	const size_t nk = (size_t)g->nnodes * p->nslots * 2;
	p->bn_nranks = cross ? dnn_dist_nranks(p->m->dist) : 1;
	p->bn_sums = calloc(nk, sizeof(starpu_data_handle_t));
	p->bn_gsums = calloc(nk, sizeof(starpu_data_handle_t));
	p->bn_rank_sums = cross ? calloc(nk * p->bn_nranks, sizeof(starpu_data_handle_t)) : NULL;
	if (!p->bn_sums || !p->bn_gsums || (cross && !p->bn_rank_sums)) {
		dnn_set_err(err, errlen, g->source, "out of memory setting up --batchnorm global");
		dnn_plan_bn_destroy(p);
		return -1;
	}
	for (int i = 1; i < g->nnodes; i++) {
		if (g->nodes[i].op != DNN_OP_BATCHNORM)
			continue;
		for (int s = 0; s < p->nslots; s++)
			for (int ph = 0; ph < 2; ph++) {
				const size_t k = bn_key(p, i, s, ph), n = 2 * (size_t)g->nodes[i].C;
				p->bn_sums[k] = dsum_vector(n);
				if (cross)
					register_cross_rank(p, k, n);
				else
					p->bn_gsums[k] = p->bn_sums[k];
			}
	}
	p->bn_global = 1;
	p->bn_global_n = cross ? p->global_batch : p->batch;
	return dnn_bn_parts_register(p, err, errlen);
}

static void bn_parts_free(dnn_plan *p)
{
	const size_t nk = p->m ? (size_t)p->m->g->nnodes * p->nslots * 2 : 0;
	const int K = p->nchunks;
	for (size_t k = 0; k < nk && p->bn_part; k++)
		for (int c = 1; c < K; c++)
			if (p->bn_part[k * K + c])
				starpu_data_unregister_no_coherency(p->bn_part[k * K + c]);
	free(p->bn_part);
	p->bn_part = NULL;
}

int dnn_bn_parts_register(dnn_plan *p, char *err, size_t errlen)
{
	const dnn_graph *g = p->m->g;
	const int K = p->nchunks;
	bn_parts_free(p);
	if (!p->bn_global || p->sum_redux || K < 2)
		return 0;
	const size_t nk = (size_t)g->nnodes * p->nslots * 2;
	if (!(p->bn_part = calloc(nk * K, sizeof(starpu_data_handle_t)))) {
		dnn_set_err(err, errlen, g->source, "out of memory setting up --batchnorm global's per-chunk sums");
		return -1;
	}
	for (size_t k = 0; k < nk; k++) {
		if (!p->bn_sums[k])
			continue;
		p->bn_part[k * K] = p->bn_sums[k];
		for (int c = 1; c < K; c++) { /* zeroed when first used, as chunksum.c's partials */
			starpu_vector_data_register(&p->bn_part[k * K + c], -1, 0,
						    (uint32_t)starpu_vector_get_nx(p->bn_sums[k]), sizeof(double));
			dnn_bn_set_dsum_redux(p->bn_part[k * K + c]);
		}
	}
	return 0;
}

void dnn_plan_bn_destroy(dnn_plan *p)
{
	bn_parts_free(p);
	const size_t nk = p->m ? (size_t)p->m->g->nnodes * p->nslots * 2 : 0;
	for (size_t k = 0; k < nk && p->bn_sums; k++) {
		if (!p->bn_sums[k])
			continue;
		if (p->bn_rank_sums) {
			for (int j = 0; j < p->bn_nranks; j++) /* ours among them */
				starpu_data_unregister(p->bn_rank_sums[k * p->bn_nranks + j]);
			starpu_data_unregister(p->bn_gsums[k]);
		} else {
			starpu_data_unregister(p->bn_sums[k]);
		}
	}
	free(p->bn_sums), free(p->bn_gsums), free(p->bn_rank_sums);
	p->bn_sums = p->bn_gsums = p->bn_rank_sums = NULL;
	p->bn_global = 0, p->bn_global_n = 0, p->bn_nranks = 0;
}

starpu_data_handle_t dnn_bn_sums_local(const dnn_plan *p, int i, int slot, int phase)
{
	return p->bn_sums[bn_key(p, i, slot, phase)];
}

starpu_data_handle_t dnn_bn_sums_chunk(const dnn_plan *p, int i, int slot, int phase, int c, int *mode)
{
	const size_t k = bn_key(p, i, slot, phase);
	*mode = p->sum_redux ? STARPU_REDUX : STARPU_RW;
	return p->bn_part ? p->bn_part[k * p->nchunks + c] : p->bn_sums[k];
}

/* G <- the sum over the ranks of their handles L[j], then G to every rank (graph/dist.c's tree:
 * a STARPU_MPI_REDUX contribution executed on each rank, reduced into rank 0 flat on one node
 * and by a binary tree across nodes, dnn_dist_mpi_redux). */
int dnn_bn_sums_reduce(dnn_plan *p, int i, int slot, int phase, starpu_data_handle_t *out)
{
	const size_t k = bn_key(p, i, slot, phase);
	starpu_data_handle_t G = p->bn_gsums[k];
	*out = G;
	if (p->bn_part) {
		int n = dnn_chunksum_submit(&(dnn_task_opts){.name = "bn_sums_sum"}, &p->bn_part[k * p->nchunks], p->nchunks,
						p->cfg.test_sum_reverse);
		if (n < 0)
			return n;
		p->tasks_per_step += n;
	}
	if (!p->bn_rank_sums)
		return 0;
	const int N = p->bn_nranks;
	DNN_TRY(dnn_insert_bn_dsum_zero(&(dnn_task_opts){.mpi = 1, .node = -1, .priority = STARPU_MAX_PRIO, .name = "bn_allreduce_zero"}, G));
	for (int j = 0; j < N; j++)
		DNN_TRY(dnn_insert_bn_dsum_add(&(dnn_task_opts){.mpi = 1, .node = j, .priority = STARPU_MAX_PRIO, .name = "bn_allreduce_contrib"}, G,
					   STARPU_MPI_REDUX, p->bn_rank_sums[k * N + j]));
	DNN_TRY(dnn_dist_mpi_redux(p->m->dist, G, STARPU_MAX_PRIO));
	for (int j = 1; j < N; j++)
		DNN_TRY(starpu_mpi_get_data_on_node_detached(MPI_COMM_WORLD, G, j, NULL, NULL));
	return 0;
}
