/* cpu_kernels.c — the CPU's ISA, the BLAS's kernel set, and the start-up fix (cpu_kernels.h). */
#include "cpu_kernels.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* OpenBLAS's introspection (cblas.h declares them only in some versions). */
char *openblas_get_corename(void);
char *openblas_get_config(void);

/* Set in the re-executed process: the core type OpenBLAS had chosen before the fix. */
#define REEXEC_ENV "DNN_BLAS_REEXEC_FROM"

static char g_fixed_from[64]; /* non-empty: this process was re-executed with OPENBLAS_CORETYPE set */
static char g_warning[256];   /* the warning printed at start-up, if any */

const char *dnn_isa_name(dnn_isa isa)
{
	static const char *names[] = {"unknown", "sse", "avx", "avx2", "avx512"};
	return isa >= DNN_ISA_UNKNOWN && isa <= DNN_ISA_AVX512 ? names[isa] : "unknown";
}

dnn_isa dnn_cpu_isa(void)
{
	__builtin_cpu_init();
	/* AVX-512 as OpenBLAS's SkylakeX kernels need it: F, BW, DQ and VL (not Xeon Phi's F+ER). */
	if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
	    __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
		return DNN_ISA_AVX512;
	if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
		return DNN_ISA_AVX2;
	if (__builtin_cpu_supports("avx"))
		return DNN_ISA_AVX;
	if (__builtin_cpu_supports("sse3"))
		return DNN_ISA_SSE;
	return DNN_ISA_UNKNOWN;
}

/* OpenBLAS's DYNAMIC_ARCH x86-64 core names (driver/others/dynamic.c) and their kernels' ISA. */
static const struct {
	const char *core;
	dnn_isa isa;
} core_isa[] = {
	{"Katmai", DNN_ISA_SSE},      {"Coppermine", DNN_ISA_SSE},   {"Northwood", DNN_ISA_SSE},
	{"Prescott", DNN_ISA_SSE},    {"Banias", DNN_ISA_SSE},       {"Atom", DNN_ISA_SSE},
	{"Core2", DNN_ISA_SSE},       {"Penryn", DNN_ISA_SSE},       {"Dunnington", DNN_ISA_SSE},
	{"Nehalem", DNN_ISA_SSE},     {"Athlon", DNN_ISA_SSE},       {"Opteron", DNN_ISA_SSE},
	{"Opteron_SSE3", DNN_ISA_SSE}, {"Barcelona", DNN_ISA_SSE},   {"Nano", DNN_ISA_SSE},
	{"Bobcat", DNN_ISA_SSE},      {"Sandybridge", DNN_ISA_AVX},  {"Bulldozer", DNN_ISA_AVX},
	{"Piledriver", DNN_ISA_AVX},  {"Steamroller", DNN_ISA_AVX},  {"Excavator", DNN_ISA_AVX2},
	{"Haswell", DNN_ISA_AVX2},    {"Zen", DNN_ISA_AVX2},         {"SkylakeX", DNN_ISA_AVX512},
	{"Cooperlake", DNN_ISA_AVX512}, {"SapphireRapids", DNN_ISA_AVX512},
};

dnn_isa dnn_blas_core_isa(const char *corename)
{
	if (!corename)
		return DNN_ISA_UNKNOWN;
	for (size_t i = 0; i < sizeof(core_isa) / sizeof(core_isa[0]); i++)
		if (strcasecmp(corename, core_isa[i].core) == 0)
			return core_isa[i].isa;
	return DNN_ISA_UNKNOWN;
}

const char *dnn_blas_coretype_for(dnn_isa isa, int amd)
{
	switch (isa) {
	case DNN_ISA_AVX512:
		return "SkylakeX"; /* also Zen 4/5: OpenBLAS >= 0.3.22 runs them on these kernels too */
	case DNN_ISA_AVX2:
		return amd ? "Zen" : "Haswell";
	case DNN_ISA_AVX:
		return "Sandybridge";
	default:
		return NULL;
	}
}

int dnn_blas_plan_make(dnn_isa cpu, int amd, const char *corename, const char *knob, const char *user_coretype,
		       int reexeced, dnn_blas_plan *out)
{
	const int knob_auto = knob && strcmp(knob, "auto") == 0, knob_keep = knob && strcmp(knob, "keep") == 0;
	if (knob && *knob && !knob_auto && !knob_keep)
		return -1;
	out->action = DNN_BLAS_OK;
	out->coretype = dnn_blas_coretype_for(cpu, amd);
	const dnn_isa have = dnn_blas_core_isa(corename);
	const int user_chose = user_coretype && *user_coretype;
	/* AVX-512 kernels other than SkylakeX's (0.3.21 picks Cooperlake on Zen 4 and Cooper Lake,
	 * SapphireRapids on Sapphire Rapids): the same sgemm speed (docs/benchmarks.md, "One BLAS
	 * kernel set on every AVX-512 CPU") but another blocking, hence other float sums for a given
	 * shape, and the chunk- and rank-invariance of training (mpi_bn_global's 1e-5 bound) moved
	 * with them: on Zen 4 resnet8's 20 steps under global batch norm differed from one process
	 * by 1.8e-5 on Cooperlake and passed on SkylakeX. So every AVX-512 CPU runs the one set
	 * dnn_blas_coretype_for names (SkylakeX): the same numbers on Intel and AMD. A core type of
	 * the user's own is left alone, silently. */
	if (cpu == DNN_ISA_AVX512 && have == DNN_ISA_AVX512 && strcasecmp(corename, out->coretype) != 0) {
		if (!reexeced && !knob_keep && (!user_chose || knob_auto))
			out->action = DNN_BLAS_REEXEC;
		return 0;
	}
	/* An unknown core name (a newer OpenBLAS's) or CPU: nothing to compare, nothing to say. */
	if (have == DNN_ISA_UNKNOWN || cpu == DNN_ISA_UNKNOWN || have >= cpu || !out->coretype)
		return 0;
	if (reexeced || knob_keep || (user_chose && !knob_auto))
		out->action = DNN_BLAS_WARN;
	else
		out->action = DNN_BLAS_REEXEC;
	return 0;
}

#ifndef DNN_SIMGRID /* the simulation build chooses no BLAS kernels */
static int cpu_is_amd(void)
{
	__builtin_cpu_init();
	return __builtin_cpu_is("amd");
}
#endif

int dnn_cpu_kernels_init(char **argv, const char *knob, const char *reexec_from, char *err, size_t errlen)
{
	const char *from = reexec_from; /* REEXEC_ENV, read by runtime/knobs.c */
	if (from) {
		snprintf(g_fixed_from, sizeof(g_fixed_from), "%s", from);
		unsetenv(REEXEC_ENV); /* not inherited by anything this process starts */
	}
#ifdef DNN_SIMGRID
	(void)argv;
	(void)knob;
	(void)err;
	(void)errlen;
	return 0;
#else
	const dnn_isa cpu = dnn_cpu_isa();
	const char *core = openblas_get_corename();
	dnn_blas_plan plan;
	if (dnn_blas_plan_make(cpu, cpu_is_amd(), core, knob, getenv("OPENBLAS_CORETYPE"), from != NULL, &plan) != 0) {
		snprintf(err, errlen, "DNN_BLAS_CORETYPE='%s': expected auto or keep", knob);
		return -1;
	}
	if (plan.action == DNN_BLAS_REEXEC && argv && argv[0]) {
		/* OpenBLAS chose its kernels when it was loaded: only a fresh image picks the new ones. */
		fflush(NULL);
		setenv("OPENBLAS_CORETYPE", plan.coretype, 1);
		setenv(REEXEC_ENV, core, 1);
		/* By the binary's own path: exec'ing "/proc/self/exe" names the process "exe"
		 * (/proc/PID/comm is the exec'd file's basename), which ps, top and tools that find
		 * the ranks by name (bench/thread_cpu.sh) then show instead of starpu_anp. */
		char self[4096];
		const ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);
		if (len > 0) {
			self[len] = 0;
			execv(self, argv);
		}
		execv("/proc/self/exe", argv); /* the path did not resolve (or was replaced): the link itself */
		/* Cannot re-execute (no /proc?): carry on with the slow kernels and say so. */
		unsetenv(REEXEC_ENV);
		plan.action = DNN_BLAS_WARN;
	}
	if (plan.action != DNN_BLAS_OK)
		snprintf(g_warning, sizeof(g_warning),
			 "warning: OpenBLAS runs %s (%s) kernels on this %s CPU, %s; set OPENBLAS_CORETYPE=%s for %s kernels",
			 core, dnn_isa_name(dnn_blas_core_isa(core)), dnn_isa_name(cpu),
			 from ? "even after setting OPENBLAS_CORETYPE" : "several times slower", plan.coretype,
			 dnn_isa_name(cpu));
	return 0;
#endif
}

const char *dnn_blas_field(void)
{
	static char buf[96];
	if (buf[0])
		return buf;
	/* "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH ..." -> "0.3.21" */
	char ver[32] = "unknown";
	const char *cfg = openblas_get_config();
	if (cfg && strncmp(cfg, "OpenBLAS ", 9) == 0)
		sscanf(cfg + 9, "%31[^ ]", ver);
	const char *core = openblas_get_corename();
	int n = snprintf(buf, sizeof(buf), "openblas-%s:%s", ver, core ? core : "unknown");
	for (int i = 0; i < n && i < (int)sizeof(buf); i++) /* a result-line value: no blanks, lower case */
		buf[i] = buf[i] == ' ' || buf[i] == '=' ? '_' : (char)tolower((unsigned char)buf[i]);
	return buf;
}

dnn_isa dnn_blas_isa(void)
{
	return dnn_blas_core_isa(openblas_get_corename());
}

int dnn_cpu_kernels_short(void)
{
	const dnn_isa have = dnn_blas_isa(), cpu = dnn_cpu_isa();
	return have != DNN_ISA_UNKNOWN && cpu != DNN_ISA_UNKNOWN && have < cpu;
}

static void cpu_model(char *buf, size_t n)
{
	snprintf(buf, n, "unknown CPU");
	FILE *f = fopen("/proc/cpuinfo", "r");
	if (!f)
		return;
	char line[512];
	while (fgets(line, sizeof(line), f)) {
		char *colon = strchr(line, ':');
		if (strncmp(line, "model name", 10) == 0 && colon) {
			colon++;
			colon += strspn(colon, " \t");
			colon[strcspn(colon, "\n")] = 0;
			snprintf(buf, n, "%s", colon);
			break;
		}
	}
	fclose(f);
}

void dnn_cpu_kernels_describe(char *buf, size_t n)
{
	char model[160];
	cpu_model(model, sizeof(model));
	const char *core = openblas_get_corename();
	int k = snprintf(buf, n, "cpu: %s, isa=%s; blas: %s (%s kernels", model, dnn_isa_name(dnn_cpu_isa()),
			 dnn_blas_field(), dnn_isa_name(dnn_blas_core_isa(core)));
	if (k < 0 || (size_t)k >= n)
		return;
	if (g_fixed_from[0] && !dnn_cpu_kernels_short())
		k += snprintf(buf + k, n - (size_t)k, "; OPENBLAS_CORETYPE=%s set automatically: OpenBLAS had chosen %s",
			      getenv("OPENBLAS_CORETYPE") ? getenv("OPENBLAS_CORETYPE") : "?", g_fixed_from);
	if (k >= 0 && (size_t)k < n)
		snprintf(buf + k, n - (size_t)k, ")%s%s", g_warning[0] ? "\n" : "", g_warning);
}
