/* unit_cpu_kernels.c — runtime/cpu_kernels.c: the table from OpenBLAS core types to the ISA of their
 * kernels, the core type chosen for each CPU, and the start-up decision (fix by re-executing with
 * OPENBLAS_CORETYPE, warn, or nothing) for every case of cpu_kernels.h's DNN_BLAS_CORETYPE rules.
 * The real re-execution and the result line's fields are checked by tests/scripts/unit_blas_isa.sh. */
#include <stdio.h>
#include <string.h>

#include "cpu_kernels.h"
#include "test_util.h"

static void test_core_table(void)
{
	TEST_CHECK(dnn_blas_core_isa("Prescott") == DNN_ISA_SSE, "Prescott is SSE3");
	TEST_CHECK(dnn_blas_core_isa("prescott") == DNN_ISA_SSE, "names are case-insensitive");
	TEST_CHECK(dnn_blas_core_isa("Nehalem") == DNN_ISA_SSE, "Nehalem is SSE4.2");
	TEST_CHECK(dnn_blas_core_isa("Sandybridge") == DNN_ISA_AVX, "Sandybridge is AVX");
	TEST_CHECK(dnn_blas_core_isa("Haswell") == DNN_ISA_AVX2, "Haswell is AVX2");
	TEST_CHECK(dnn_blas_core_isa("Zen") == DNN_ISA_AVX2, "Zen is AVX2");
	TEST_CHECK(dnn_blas_core_isa("SkylakeX") == DNN_ISA_AVX512, "SkylakeX is AVX-512");
	TEST_CHECK(dnn_blas_core_isa("Cooperlake") == DNN_ISA_AVX512, "Cooperlake is AVX-512");
	TEST_CHECK(dnn_blas_core_isa("SapphireRapids") == DNN_ISA_AVX512, "SapphireRapids is AVX-512");
	TEST_CHECK(dnn_blas_core_isa("Zen5") == DNN_ISA_UNKNOWN, "an unknown name is unknown, not a guess");
	TEST_CHECK(dnn_blas_core_isa(NULL) == DNN_ISA_UNKNOWN, "NULL");
	TEST_CHECK(strcmp(dnn_blas_coretype_for(DNN_ISA_AVX512, 0), "SkylakeX") == 0, "AVX-512 Intel");
	TEST_CHECK(strcmp(dnn_blas_coretype_for(DNN_ISA_AVX512, 1), "SkylakeX") == 0, "AVX-512 AMD (Zen 4/5)");
	TEST_CHECK(strcmp(dnn_blas_coretype_for(DNN_ISA_AVX2, 0), "Haswell") == 0, "AVX2 Intel");
	TEST_CHECK(strcmp(dnn_blas_coretype_for(DNN_ISA_AVX2, 1), "Zen") == 0, "AVX2 AMD");
	TEST_CHECK(dnn_blas_coretype_for(DNN_ISA_SSE, 0) == NULL, "nothing to set below AVX");
	/* Every core type we would set maps back to the ISA it was chosen for. */
	for (int isa = DNN_ISA_AVX; isa <= DNN_ISA_AVX512; isa++)
		for (int amd = 0; amd < 2; amd++)
			TEST_CHECK(dnn_blas_core_isa(dnn_blas_coretype_for((dnn_isa)isa, amd)) == (dnn_isa)isa,
			      "round trip isa %d amd %d", isa, amd);
	TEST_CHECK(strcmp(dnn_isa_name(DNN_ISA_AVX512), "avx512") == 0 && strcmp(dnn_isa_name(DNN_ISA_SSE), "sse") == 0,
	      "ISA names");
}

static void test_plan(void)
{
	dnn_blas_plan p;
	/* The Xeon (family 6 model 207): OpenBLAS 0.3.21 picks Prescott on an AVX-512 CPU. */
	TEST_CHECK(dnn_blas_plan_make(DNN_ISA_AVX512, 0, "Prescott", NULL, NULL, 0, &p) == 0, "plan");
	TEST_CHECK(p.action == DNN_BLAS_REEXEC && strcmp(p.coretype, "SkylakeX") == 0, "Prescott on AVX-512: re-exec as SkylakeX");
	/* Zen 4 with 0.3.21: Zen (AVX2) kernels on an AVX-512 CPU. */
	dnn_blas_plan_make(DNN_ISA_AVX512, 1, "Zen", NULL, NULL, 0, &p);
	TEST_CHECK(p.action == DNN_BLAS_REEXEC && strcmp(p.coretype, "SkylakeX") == 0, "Zen on Zen 4: SkylakeX");
	dnn_blas_plan_make(DNN_ISA_AVX2, 1, "Prescott", NULL, NULL, 0, &p);
	TEST_CHECK(p.action == DNN_BLAS_REEXEC && strcmp(p.coretype, "Zen") == 0, "Prescott on an AVX2 AMD: Zen");
	/* Kernels at the CPU's ISA, or above it (a user's choice we cannot judge): nothing to do. */
	dnn_blas_plan_make(DNN_ISA_AVX512, 0, "SkylakeX", NULL, NULL, 0, &p);
	TEST_CHECK(p.action == DNN_BLAS_OK, "SkylakeX on AVX-512: ok");
	dnn_blas_plan_make(DNN_ISA_AVX2, 0, "Haswell", "keep", NULL, 0, &p);
	TEST_CHECK(p.action == DNN_BLAS_OK, "Haswell on AVX2: ok");
	/* The user set OPENBLAS_CORETYPE: honoured, with a warning naming the fix... */
	dnn_blas_plan_make(DNN_ISA_AVX512, 0, "Prescott", NULL, "Prescott", 0, &p);
	TEST_CHECK(p.action == DNN_BLAS_WARN && strcmp(p.coretype, "SkylakeX") == 0, "user's OPENBLAS_CORETYPE: warn");
	/* ...unless DNN_BLAS_CORETYPE=auto overrides it. */
	dnn_blas_plan_make(DNN_ISA_AVX512, 0, "Prescott", "auto", "Prescott", 0, &p);
	TEST_CHECK(p.action == DNN_BLAS_REEXEC, "auto overrides the user's OPENBLAS_CORETYPE");
	dnn_blas_plan_make(DNN_ISA_AVX512, 0, "Prescott", "keep", NULL, 0, &p);
	TEST_CHECK(p.action == DNN_BLAS_WARN, "keep: warn, never re-exec");
	/* Already re-executed and still short (OpenBLAS ignored the core type): warn, never loop. */
	dnn_blas_plan_make(DNN_ISA_AVX512, 0, "Prescott", "auto", NULL, 1, &p);
	TEST_CHECK(p.action == DNN_BLAS_WARN, "no second re-exec");
	/* Other AVX-512 kernel sets (Cooperlake on Zen 4 with 0.3.21): SkylakeX, for one set of float
	 * sums on every AVX-512 CPU; a user's own core type, keep, or a second exec: left alone. */
	dnn_blas_plan_make(DNN_ISA_AVX512, 1, "Cooperlake", NULL, NULL, 0, &p);
	TEST_CHECK(p.action == DNN_BLAS_REEXEC && strcmp(p.coretype, "SkylakeX") == 0, "Cooperlake on Zen 4: SkylakeX");
	dnn_blas_plan_make(DNN_ISA_AVX512, 0, "SapphireRapids", NULL, NULL, 0, &p);
	TEST_CHECK(p.action == DNN_BLAS_REEXEC && strcmp(p.coretype, "SkylakeX") == 0, "SapphireRapids: SkylakeX");
	dnn_blas_plan_make(DNN_ISA_AVX512, 1, "Cooperlake", NULL, "Cooperlake", 0, &p);
	TEST_CHECK(p.action == DNN_BLAS_OK, "the user's Cooperlake: honoured without a warning");
	dnn_blas_plan_make(DNN_ISA_AVX512, 1, "Cooperlake", "auto", "Cooperlake", 0, &p);
	TEST_CHECK(p.action == DNN_BLAS_REEXEC, "auto overrides the user's Cooperlake");
	dnn_blas_plan_make(DNN_ISA_AVX512, 1, "Cooperlake", "keep", NULL, 0, &p);
	TEST_CHECK(p.action == DNN_BLAS_OK, "keep: Cooperlake stays");
	dnn_blas_plan_make(DNN_ISA_AVX512, 1, "Cooperlake", NULL, NULL, 1, &p);
	TEST_CHECK(p.action == DNN_BLAS_OK, "Cooperlake after a re-exec: no loop");
	/* Nothing to compare. */
	dnn_blas_plan_make(DNN_ISA_AVX512, 0, "Zen5", NULL, NULL, 0, &p);
	TEST_CHECK(p.action == DNN_BLAS_OK, "unknown core name: no action");
	dnn_blas_plan_make(DNN_ISA_UNKNOWN, 0, "Prescott", NULL, NULL, 0, &p);
	TEST_CHECK(p.action == DNN_BLAS_OK, "unknown CPU: no action");
	dnn_blas_plan_make(DNN_ISA_SSE, 0, "Prescott", NULL, NULL, 0, &p);
	TEST_CHECK(p.action == DNN_BLAS_OK, "SSE CPU on SSE kernels: ok");
	/* A bad knob value is refused (the caller makes it a usage error). */
	TEST_CHECK(dnn_blas_plan_make(DNN_ISA_AVX512, 0, "SkylakeX", "fast", NULL, 0, &p) == -1, "bad knob refused");
	TEST_CHECK(dnn_blas_plan_make(DNN_ISA_AVX512, 0, "SkylakeX", "", NULL, 0, &p) == 0, "empty knob = unset");
}

int main(void)
{
	test_core_table();
	test_plan();
	printf("this CPU: isa=%s; blas=%s\n", dnn_isa_name(dnn_cpu_isa()), dnn_blas_field());
	return test_report("unit_cpu_kernels");
}
