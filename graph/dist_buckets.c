/* dist_buckets.c — sync, --bucket-mb M: the tensors below M MiB are packed, in backward order,
 * into buckets of up to M MiB (slice_put on each rank), each bucket all-reduced as one tensor
 * (all-reduce entry P + b: with the run's algorithm when the bucket is big enough for it, e.g. the
 * ring or rhd with N * DNN_RING_MIN_CHUNK elements or more, else the tree) and unpacked
 * (slice_get) before the updates: the same sums in fewer, bigger messages (ResNet-50 at 4 MiB:
 * 161 all-reduces -> 22). A bucket's pack waits only for its members' gradients, so it runs
 * during the backward of the layers below them. */
#include <stdlib.h>

#include "dist_impl.h"
#include "optim.h"
#include "vec.h"

/* Close the open bucket b of `members` tensors: 1 when it is kept; a bucket of one tensor is no
 * bucket (that tensor, its lead, keeps its own all-reduce) and b is reused. */
static int close_bucket(dnn_dist *d, int b, int members)
{
	if (members > 1)
		return 1;
	d->bucket_of[d->bucket_lead[b]] = -1, d->bucket_off[d->bucket_lead[b]] = 0;
	d->bucket_len[b] = 0;
	return 0;
}

/* Sync, --bucket-mb: group the tensors smaller than a bucket, in backward order (the last
 * parameter's gradient is complete first), into buckets of at most bucket_elems elements; a
 * bucket is closed as soon as the next tensor would not fit. A tensor of a bucket's size or more
 * keeps its own all-reduce. Same result on every rank: it depends only on the parameter sizes
 * and the rank count. -1 when an allocation fails. */
int dnn_dist_plan_buckets(const dnn_model *m, dnn_dist *d)
{
	const int P = m->nparams;
	d->allreduces = P;
	if (d->bucket_elems == 0)
		return 0;
	d->bucket_of = malloc((size_t)P * sizeof(int));
	d->bucket_off = calloc((size_t)P, sizeof(size_t));
	d->bucket_lead = malloc((size_t)P * sizeof(int));
	d->bucket_len = calloc((size_t)P, sizeof(size_t));
	d->bucket_zeroed = calloc((size_t)P, 1);
	if (!d->bucket_of || !d->bucket_off || !d->bucket_lead || !d->bucket_len || !d->bucket_zeroed)
		return -1;
	int nb = 0, members = 0; /* the open bucket is nb, holding `members` tensors */
	for (int p = P - 1; p >= 0; p--) {
		const size_t n = (size_t)m->params[p].n;
		d->bucket_of[p] = -1;
		if (n >= d->bucket_elems)
			continue;
		if (members > 0 && d->bucket_len[nb] + n > d->bucket_elems)
			nb += close_bucket(d, nb, members), members = 0;
		d->bucket_of[p] = nb, d->bucket_off[p] = d->bucket_len[nb], d->bucket_lead[nb] = p;
		d->bucket_len[nb] += n, members++;
	}
	if (members > 0)
		nb += close_bucket(d, nb, members);
	d->nbuckets = nb;
	for (int p = 0; p < P; p++)
		d->allreduces -= d->bucket_of[p] >= 0;
	d->allreduces += nb;
	return 0;
}

int dnn_dist_in_bucket(const dnn_dist *d, int p) { return d->bucket_of && d->bucket_of[p] >= 0; }

/* The sync step of bucket b: each rank packs its members' gradients into its bucket, the buckets
 * are all-reduced as one tensor, entry P + b (by the run's algorithm when it takes the bucket's
 * size, else the tree), and every rank unpacks the sum into its members' gradients, which their
 * updates read and zero (as the ring does). */
int dnn_dist_bucket_step(dnn_plan *p, int b, const dnn_optim_config *optim, int defer)
{
	dnn_model *m = p->m;
	dnn_dist *d = m->dist;
	const int NB = d->nbuckets, P = m->nparams;
	starpu_data_handle_t mine = d->bucket_local[d->rank * NB + b];
	const dnn_task_opts o = dnn_dist_ar_opts(p, d->bucket_lead[b], 0, -1, dnn_dist_prio_of(p, d->bucket_lead[b]));
	dnn_task_opts pack = o, unpack = o;
	pack.name = "bucket_pack", unpack.name = "bucket_unpack";
	/* The members tile the bucket (dnn_dist_plan_buckets: bucket_len is the sum of their sizes, no gap),
	 * so every pack overwrites all of it: only the first needs the zero, which gives StarPU a
	 * written buffer for the slices' RW accesses. Later zeroing cost a pass over every bucket per
	 * step: 14 ms of a K80 step on rank 0's critical path, 7 ms of an H200 one (simulated,
	 * docs/SIMULATION.md study 5 (f), (i)). */
	if (!d->bucket_zeroed[b]) {
		DNN_TRY(dnn_insert_vec_zero(&pack, mine));
		d->bucket_zeroed[b] = 1;
	}
	for (int q = d->bucket_lead[b]; q < P; q++)
		if (d->bucket_of[q] == b)
			DNN_TRY(dnn_insert_vec_slice_put(&pack, mine, m->params[q].hg, d->bucket_off[q]));
	starpu_data_handle_t G;
	DNN_TRY(d->entry[P + b].algo->reduce(p, P + b, &o, &G)); /* ring, rhd: the sum back in `mine` */
	for (int q = d->bucket_lead[b]; q < P; q++) {
		if (d->bucket_of[q] != b)
			continue;
		dnn_param *pr = &m->params[q];
		DNN_TRY(dnn_insert_vec_slice_get(&unpack, pr->hg, G, d->bucket_off[q]));
		if (defer) {
			p->clip_grad[q] = pr->hg, p->clip_keep[q] = 0;
			continue;
		}
		dnn_optim_args a = dnn_param_optim_args(pr, optim, p->global_batch, 1);
		DNN_TRY(dnn_insert_optim_update(&o, &a, pr->hw, pr->hv, pr->hg));
	}
	return 0;
}
