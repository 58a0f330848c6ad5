/* cpu_kernels.h — which CPU math kernels run, and making sure they match the CPU.
 *
 * The CPU's best vector ISA comes from cpuid; the BLAS's kernel set from the library itself
 * (OpenBLAS: openblas_get_corename). Debian 12's OpenBLAS 0.3.21 chooses its kernels by CPU model
 * number and falls back to Prescott (SSE3) on CPUs newer than itself (seen on an Intel Xeon,
 * family 6 model 207: 8.5 against 113 GFLOP/s). OpenBLAS reads OPENBLAS_CORETYPE once, when the
 * library is loaded, so the fix is to set it from the CPU's features and re-execute the program
 * before anything else has started (dnn_cpu_kernels_init, called first by dnn_runtime_init).
 *
 * DNN_BLAS_CORETYPE (environment, parsed with the other knobs: runtime/knobs.c):
 *   unset  fix automatically, unless the user set OPENBLAS_CORETYPE (then only warn, naming the fix)
 *   auto   fix automatically, even over a user's OPENBLAS_CORETYPE
 *   keep   never re-execute; warn when the kernels fall short of the CPU
 */
#ifndef DNN_CPU_KERNELS_H
#define DNN_CPU_KERNELS_H
#include <stddef.h>

typedef enum { DNN_ISA_UNKNOWN = 0, DNN_ISA_SSE, DNN_ISA_AVX, DNN_ISA_AVX2, DNN_ISA_AVX512 } dnn_isa;

const char *dnn_isa_name(dnn_isa isa); /* "sse", "avx", "avx2", "avx512", "unknown" */
dnn_isa dnn_cpu_isa(void);             /* this CPU's best vector ISA (cpuid) */
/* The ISA an OpenBLAS core type's kernels use ("Prescott" -> sse, "SkylakeX" -> avx512, any
 * case); DNN_ISA_UNKNOWN for a name not in the table. */
dnn_isa dnn_blas_core_isa(const char *corename);
/* The OPENBLAS_CORETYPE that runs a CPU of this ISA at its ISA (NULL below AVX). */
const char *dnn_blas_coretype_for(dnn_isa isa, int amd);

/* What to do at start-up, as a pure function of what was found (unit-tested). */
typedef enum { DNN_BLAS_OK, DNN_BLAS_REEXEC, DNN_BLAS_WARN } dnn_blas_action;
typedef struct {
	dnn_blas_action action;
	const char *coretype; /* REEXEC: the OPENBLAS_CORETYPE to set; WARN: the one to advise (may be NULL) */
} dnn_blas_plan;
/* knob: DNN_BLAS_CORETYPE's value or NULL; user_coretype: OPENBLAS_CORETYPE or NULL; reexeced:
 * this process is already the re-executed one. Returns -1 for a bad knob value. */
int dnn_blas_plan_make(dnn_isa cpu, int amd, const char *corename, const char *knob, const char *user_coretype,
		       int reexeced, dnn_blas_plan *out);

/* Checks the kernels and, when the plan says so, sets OPENBLAS_CORETYPE and re-executes argv
 * (does not return then). knob: DNN_BLAS_CORETYPE as parsed (knobs.h), NULL when unset; reexec_from:
 * DNN_BLAS_REEXEC_FROM as parsed, which this function sets for the process it re-executes (the
 * kernels OpenBLAS had chosen), NULL when unset. 0, or -1 with one line in err (a knob value
 * dnn_knobs_parse would have refused). A no-op in the simulation build (SMPI ranks are threads
 * of one process). */
int dnn_cpu_kernels_init(char **argv, const char *knob, const char *reexec_from, char *err, size_t errlen);
/* "openblas-0.3.21:skylakex" (the result line's blas=). */
const char *dnn_blas_field(void);
/* The start-up line: "cpu: <model>, isa=avx512; blas: openblas-0.3.21:skylakex (avx512 kernels...)". */
void dnn_cpu_kernels_describe(char *buf, size_t n);
/* The ISA of the kernels the BLAS runs (the result line's blas_isa=). */
dnn_isa dnn_blas_isa(void);
/* 1 when the BLAS's kernels fall short of the CPU's ISA (after any fix). */
int dnn_cpu_kernels_short(void);
#endif
