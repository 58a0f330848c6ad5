/* schedule.c — learning-rate schedule and epoch permutation (see schedule.h). */
#include "schedule.h"

#include <math.h>

#include "dnn_rng.h"

float dnn_scheduled_lr(float lr, int cosine, long step, long total)
{
	if (!cosine || total <= 0)
		return lr;
	return (float)(0.5 * lr * (1.0 + cos(M_PI * (double)step / (double)total)));
}

float dnn_warm_lr(float peak, int cosine, long step, long total, long warmup)
{
	if (warmup <= 0)
		return dnn_scheduled_lr(peak, cosine, step, total);
	if (step < warmup)
		return (float)((double)peak * (double)(step + 1) / (double)warmup);
	return dnn_scheduled_lr(peak, cosine, step - warmup, total - warmup);
}

float dnn_scaled_lr(float lr, int global_batch, int ref_batch)
{
	if (ref_batch <= 0)
		return lr;
	return (float)((double)lr * (double)global_batch / (double)ref_batch);
}

void dnn_epoch_permutation(int *perm, int n, uint64_t seed, int epoch)
{
	uint64_t s = seed ^ (0xd1b54a32d192ed03ull * (uint64_t)(epoch + 1));
	for (int i = 0; i < n; i++)
		perm[i] = i;
	for (int i = n - 1; i > 0; i--) {
		int j = (int)(dnn_splitmix64(&s) % (uint64_t)(i + 1));
		int t = perm[i];
		perm[i] = perm[j];
		perm[j] = t;
	}
}
