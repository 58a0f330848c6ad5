/* knobs.c — the project's environment variables (DNN_*, ANP_*), parsed once (knobs.h): the one
 * getenv of a project variable (scripts/check_getenv.sh, the CTest arch_getenv, enforces it). */
#include "knobs.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gemm_bf16.h"
#include "starpu_anp.h"

static dnn_exec_config g_knobs = DNN_EXEC_CONFIG_DEFAULTS;
static int g_loaded;

/* The variable's value, or NULL when unset or empty (both mean: the default). */
static const char *knob(const char *name)
{
	const char *v = getenv(name);
	return v && *v ? v : NULL;
}

/* The index of v in the NULL-terminated words, or -1 with the one line in err. */
static int one_of(const char *name, const char *v, const char *const *words, char *err, size_t errlen)
{
	for (int i = 0; words[i]; i++)
		if (strcmp(v, words[i]) == 0)
			return i;
	int n = 0;
	while (words[n])
		n++;
	int len = snprintf(err, errlen, "%s=%s: expected ", name, v);
	for (int i = 0; i < n && len >= 0 && (size_t)len < errlen; i++)
		len += snprintf(err + len, errlen - (size_t)len, "%s%s", i == 0 ? "" : i == n - 1 ? " or " : ", ",
				words[i]);
	return -1;
}

static int parse_workspace(const char *v, long *mb, char *err, size_t errlen)
{
	char *end;
	errno = 0;
	long x = strtol(v, &end, 10);
	if (errno != 0 || end == v || *end != '\0' || x < 0 || x > DNN_CUDA_WORKSPACE_MAX_MB) {
		snprintf(err, errlen, "DNN_CUDA_WORKSPACE_MB=%s: expected an integer from 0 to %ld (MiB)", v,
			 DNN_CUDA_WORKSPACE_MAX_MB);
		return -1;
	}
	*mb = x;
	return 0;
}

int dnn_knobs_parse(dnn_exec_config *k, char *err, size_t errlen)
{
	static const char *const levels[] = {"0", "1", "2", NULL}; /* DNN_BREAKDOWN, DNN_ALLREDUCE_PRIO */
	static const char *const fuse[] = {"0", "1", "2", "3", NULL}; /* graph/fuse.h */
	static const char *const algo[] = {"auto", "im2col", "winograd", "winograd4", "onednn", NULL}; /* dnn_conv_algo's order */
	static const char *const math[] = {"tf32", "fp32", NULL};
	static const char *const blas[] = {"auto", "keep", NULL};
	static const char *const pin[] = {"queue", "mask", NULL}; /* index = pin_by_mask */
	static const char *const on[] = {"device", "host", "host-update", NULL}; /* dist.h */
	static const char *const order[] = {"tree", "reverse", NULL}; /* graph/chunksum.h */
	const char *v;
	int i;
	*k = (dnn_exec_config)DNN_EXEC_CONFIG_DEFAULTS;
	/* Taken as they are, checked where they are used (as before they moved here): the simulation's
	 * (dnn_sim_models_install; its messages name the variable), the launcher's, our own. */
	k->sim = (dnn_sim_env){.cpu_models = getenv("ANP_SIM_CPU_MODELS"), .cpu_host = getenv("ANP_SIM_CPU_HOST"),
			       .cuda_models = getenv("ANP_SIM_CUDA_MODELS"), .cuda_host = getenv("ANP_SIM_CUDA_HOST"),
			       .gpu = getenv("ANP_SIM_GPU"), .cpu_vec_gbs = getenv("ANP_SIM_CPU_VEC_GBS"),
			       .platform = getenv("ANP_SIM_PLATFORM"), .models = getenv("ANP_SIM_MODELS"),
			       .fold_unique = getenv("ANP_SIM_FOLD_UNIQUE"), .cpu = getenv("ANP_SIM_CPU"),
			       .cpu_here = getenv("ANP_SIM_CPU_HERE"), .cpu_share = getenv("ANP_SIM_CPU_SHARE")};
	k->host = getenv("ANP_HOST");
	k->self_exe = getenv("STARPU_ANP"); /* ours despite the prefix: traces/sweep.sh's binary */
	k->blas_reexec_from = getenv("DNN_BLAS_REEXEC_FROM"); /* runtime/cpu_kernels.c sets it */
	k->cache_dir = knob("STARPU_ANP_CACHE"); /* ours too: bootstrap's cache, where the text corpus is */
	k->home = knob("HOME");
	if ((v = knob("DNN_FUSE")) && (i = one_of("DNN_FUSE", v, fuse, err, errlen)) < 0)
		return -1;
	if (v)
		k->fuse = i;
	if ((v = knob("DNN_CONV_ALGO")) && (i = one_of("DNN_CONV_ALGO", v, algo, err, errlen)) < 0)
		return -1;
	if (v)
		k->conv_algo = (dnn_conv_algo)i;
	if ((v = knob("DNN_CUDA_MATH")) && (i = one_of("DNN_CUDA_MATH", v, math, err, errlen)) < 0)
		return -1;
	if (v)
		k->cuda.fp32 = i;
	if ((v = knob("DNN_CUDA_WORKSPACE_MB")) && parse_workspace(v, &k->cuda.workspace_mb, err, errlen) != 0)
		return -1;
	k->sim.cuda_workspace_mb = k->cuda.workspace_mb;
	if ((v = knob("DNN_BLAS_CORETYPE")) && one_of("DNN_BLAS_CORETYPE", v, blas, err, errlen) < 0)
		return -1;
	k->blas_coretype = v;
	if ((v = knob("DNN_BREAKDOWN")) && (i = one_of("DNN_BREAKDOWN", v, levels, err, errlen)) < 0)
		return -1;
	if (v)
		k->breakdown = i;
	if ((v = knob("DNN_ALLREDUCE_PRIO")) && (i = one_of("DNN_ALLREDUCE_PRIO", v, levels, err, errlen)) < 0)
		return -1;
	if (v)
		k->allreduce_prio = i;
	if ((v = knob("DNN_PIN_MODE")) && (i = one_of("DNN_PIN_MODE", v, pin, err, errlen)) < 0)
		return -1;
	if (v)
		k->pin_by_mask = i;
	if ((v = knob("DNN_ALLREDUCE_ON")) && (i = one_of("DNN_ALLREDUCE_ON", v, on, err, errlen)) < 0)
		return -1;
	if (v)
		k->allreduce_on = i;
	static const char *const off_on[] = {"0", "1", NULL};
	if ((v = knob("DNN_BF16_ACTIVATIONS")) && (i = one_of("DNN_BF16_ACTIVATIONS", v, off_on, err, errlen)) < 0)
		return -1;
	if (v)
		k->bf16_act = i;
	k->test_sum_reverse = 0;
	if ((v = knob("DNN_TEST_SUM_ORDER")) && (i = one_of("DNN_TEST_SUM_ORDER", v, order, err, errlen)) < 0)
		return -1;
	if (v)
		k->test_sum_reverse = i;
	static const char *const cpu_mask[] = {"avx512_bf16", NULL};
	if ((v = knob("DNN_CPU_MASK")) && one_of("DNN_CPU_MASK", v, cpu_mask, err, errlen) < 0)
		return -1;
	k->cpu_mask_bf16 = v != NULL;
	if ((v = knob("DNN_TRACES_DIR"))) {
		char probe[PATH_MAX + 32];
		snprintf(probe, sizeof(probe), "%s/trace_summary.py", v);
		if (access(probe, R_OK) != 0) {
			snprintf(err, errlen, "DNN_TRACES_DIR=%s: expected the traces/ folder of the sources "
					      "(with trace_summary.py and sweep.sh)", v);
			return -1;
		}
		k->traces_dir = v;
	}
	return 0;
}

int dnn_knobs_load(char *err, size_t errlen)
{
	dnn_exec_config k;
	if (dnn_knobs_parse(&k, err, errlen) != 0)
		return -1;
	g_knobs = k;
	g_loaded = 1;
	dnn_cpu_mask_bf16(k.cpu_mask_bf16); /* before anything asks dnn_cpu_has_bf16 */
	return 0;
}

int dnn_knobs_loaded(void) { return g_loaded; }

const dnn_exec_config *dnn_knobs_get(void) { return &g_knobs; }

void dnn_knobs_set_bf16(int bf16) { g_knobs.bf16 = bf16 != 0; }
