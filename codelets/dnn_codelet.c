/* dnn_codelet.c — shared codelet helpers: perf-model footprint and CPU scratch memory. */
#include "dnn_codelet.h"

#include <string.h>

uint32_t dnn_args_footprint(struct starpu_task *task)
{
	uint32_t fp = starpu_task_data_footprint(task);
	if (task->cl_arg && task->cl_arg_size > 0)
		fp = starpu_hash_crc32c_be_n(task->cl_arg, task->cl_arg_size, fp);
	return fp;
}

static _Thread_local float *scratch;
static _Thread_local size_t scratch_len;

float *dnn_cpu_scratch(size_t nfloats)
{
	if (nfloats > scratch_len) {
		float *p = realloc(scratch, nfloats * sizeof(float));
		if (!p)
			return NULL;
		scratch = p;
		scratch_len = nfloats;
	}
	return scratch;
}

void dnn_cpu_scratch_release(void)
{
	free(scratch);
	scratch = NULL;
	scratch_len = 0;
}
