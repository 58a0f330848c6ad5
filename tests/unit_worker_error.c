/* unit_worker_error — the worker-error record (codelets/dnn_codelet.h) that CUDA/cuBLAS/cuDNN
 * failures and CPU scratch failures go through: the first error wins, nothing is printed when it
 * is recorded (the run's end prints it once), dnn_worker_error_unreported hands it out once (what
 * dnn_runtime_shutdown prints when no step reported it), dnn_worker_error_get always. Also
 * dnn_knobs_parse (runtime/knobs.h), which checks DNN_CUDA_MATH and DNN_CUDA_WORKSPACE_MB (and
 * the other DNN_* knobs) in every build, and reads the ANP_* ones into the execution config. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dnn_codelet.h"
#include "knobs.h"
#include "test_util.h"

static void env_case(const char *math, const char *ws, int want_rc, int want_fp32, long want_mb, const char *want_err)
{
	if (math)
		setenv("DNN_CUDA_MATH", math, 1);
	else
		unsetenv("DNN_CUDA_MATH");
	if (ws)
		setenv("DNN_CUDA_WORKSPACE_MB", ws, 1);
	else
		unsetenv("DNN_CUDA_WORKSPACE_MB");
	dnn_exec_config k;
	char err[256] = "";
	int rc = dnn_knobs_parse(&k, err, sizeof err);
	const dnn_cuda_env e = k.cuda;
	TEST_CHECK(rc == want_rc, "DNN_CUDA_MATH=%s DNN_CUDA_WORKSPACE_MB=%s: rc %d, want %d (%s)", math ? math : "(unset)",
		   ws ? ws : "(unset)", rc, want_rc, err);
	if (rc == 0 && want_rc == 0)
		TEST_CHECK(e.fp32 == want_fp32 && e.workspace_mb == want_mb, "%s/%s: fp32 %d mb %ld, want %d %ld",
			   math ? math : "-", ws ? ws : "-", e.fp32, e.workspace_mb, want_fp32, want_mb);
	if (want_err)
		TEST_CHECK(strstr(err, want_err) != NULL && !strchr(err, '\n'), "error '%s' lacks '%s'", err, want_err);
}

/* DNN_FUSE, DNN_CONV_ALGO, DNN_BREAKDOWN, DNN_ALLREDUCE_PRIO, DNN_ALLREDUCE_ON: the values, the defaults, and one
 * line naming what is accepted. */
static void other_knobs(void)
{
	dnn_exec_config k;
	char err[256] = "";
	unsetenv("DNN_FUSE"), unsetenv("DNN_CONV_ALGO"), unsetenv("DNN_TRACES_DIR");
	TEST_CHECK(dnn_knobs_parse(&k, err, sizeof err) == 0 && k.fuse == 1 && k.conv_algo == DNN_CONV_ALGO_AUTO &&
			   k.traces_dir == NULL,
		   "defaults: fuse %d algo %d (%s)", k.fuse, (int)k.conv_algo, err);
	setenv("DNN_FUSE", "2", 1), setenv("DNN_CONV_ALGO", "winograd", 1);
	TEST_CHECK(dnn_knobs_parse(&k, err, sizeof err) == 0 && k.fuse == 2 && k.conv_algo == DNN_CONV_ALGO_WINOGRAD,
		   "DNN_FUSE=2 DNN_CONV_ALGO=winograd: fuse %d algo %d", k.fuse, (int)k.conv_algo);
	setenv("DNN_FUSE", "0", 1), setenv("DNN_CONV_ALGO", "im2col", 1);
	TEST_CHECK(dnn_knobs_parse(&k, err, sizeof err) == 0 && k.fuse == 0 && k.conv_algo == DNN_CONV_ALGO_IM2COL,
		   "DNN_FUSE=0 DNN_CONV_ALGO=im2col: fuse %d algo %d", k.fuse, (int)k.conv_algo);
	setenv("DNN_CONV_ALGO", "winograd4", 1);
	TEST_CHECK(dnn_knobs_parse(&k, err, sizeof err) == 0 && k.conv_algo == DNN_CONV_ALGO_WINOGRAD4,
		   "DNN_CONV_ALGO=winograd4: algo %d", (int)k.conv_algo);
	setenv("DNN_FUSE", "3", 1);
	TEST_CHECK(dnn_knobs_parse(&k, err, sizeof err) == 0 && k.fuse == 3, "DNN_FUSE=3: fuse %d", k.fuse);
	setenv("DNN_FUSE", "4", 1);
	TEST_CHECK(dnn_knobs_parse(&k, err, sizeof err) == -1 && strcmp(err, "DNN_FUSE=4: expected 0, 1, 2 or 3") == 0,
		   "DNN_FUSE=4: '%s'", err);
	unsetenv("DNN_FUSE"), setenv("DNN_CONV_ALGO", "fast", 1);
	TEST_CHECK(dnn_knobs_parse(&k, err, sizeof err) == -1 &&
			   strcmp(err, "DNN_CONV_ALGO=fast: expected auto, im2col, winograd, winograd4 or onednn") == 0,
		   "DNN_CONV_ALGO=fast: '%s'", err);
	unsetenv("DNN_CONV_ALGO"), setenv("DNN_TRACES_DIR", "/nonexistent-traces", 1);
	TEST_CHECK(dnn_knobs_parse(&k, err, sizeof err) == -1 && strstr(err, "DNN_TRACES_DIR=/nonexistent-traces: ") == err,
		   "DNN_TRACES_DIR: '%s'", err);
	unsetenv("DNN_TRACES_DIR");
	/* DNN_BREAKDOWN [0] and DNN_ALLREDUCE_PRIO [2]. */
	unsetenv("DNN_BREAKDOWN"), unsetenv("DNN_ALLREDUCE_PRIO");
	TEST_CHECK(dnn_knobs_parse(&k, err, sizeof err) == 0 && k.breakdown == 0 && k.allreduce_prio == 2,
		   "defaults: breakdown %d allreduce_prio %d", k.breakdown, k.allreduce_prio);
	setenv("DNN_BREAKDOWN", "1", 1), setenv("DNN_ALLREDUCE_PRIO", "0", 1);
	TEST_CHECK(dnn_knobs_parse(&k, err, sizeof err) == 0 && k.breakdown == 1 && k.allreduce_prio == 0,
		   "DNN_BREAKDOWN=1 DNN_ALLREDUCE_PRIO=0: breakdown %d allreduce_prio %d", k.breakdown, k.allreduce_prio);
	setenv("DNN_ALLREDUCE_PRIO", "3", 1);
	TEST_CHECK(dnn_knobs_parse(&k, err, sizeof err) == -1 && strcmp(err, "DNN_ALLREDUCE_PRIO=3: expected 0, 1 or 2") == 0,
		   "DNN_ALLREDUCE_PRIO=3: '%s'", err);
	unsetenv("DNN_ALLREDUCE_PRIO"), setenv("DNN_BREAKDOWN", "2", 1);
	TEST_CHECK(dnn_knobs_parse(&k, err, sizeof err) == 0 && k.breakdown == 2, "DNN_BREAKDOWN=2: breakdown %d", k.breakdown);
	setenv("DNN_BREAKDOWN", "yes", 1);
	TEST_CHECK(dnn_knobs_parse(&k, err, sizeof err) == -1 && strcmp(err, "DNN_BREAKDOWN=yes: expected 0, 1 or 2") == 0,
		   "DNN_BREAKDOWN=yes: '%s'", err);
	unsetenv("DNN_BREAKDOWN");
	/* DNN_PIN_MODE [mask]: pinned tasks by worker mask; queue: the worker's local queue. */
	unsetenv("DNN_PIN_MODE");
	TEST_CHECK(dnn_knobs_parse(&k, err, sizeof err) == 0 && k.pin_by_mask == 1, "default pin_by_mask %d", k.pin_by_mask);
	setenv("DNN_PIN_MODE", "queue", 1);
	TEST_CHECK(dnn_knobs_parse(&k, err, sizeof err) == 0 && k.pin_by_mask == 0, "DNN_PIN_MODE=queue: %d", k.pin_by_mask);
	setenv("DNN_PIN_MODE", "local", 1);
	TEST_CHECK(dnn_knobs_parse(&k, err, sizeof err) == -1 && strcmp(err, "DNN_PIN_MODE=local: expected queue or mask") == 0,
		   "DNN_PIN_MODE=local: '%s'", err);
	unsetenv("DNN_PIN_MODE");
	/* DNN_ALLREDUCE_ON [device]: device, host, host-update as 0, 1, 2. */
	unsetenv("DNN_ALLREDUCE_ON");
	TEST_CHECK(dnn_knobs_parse(&k, err, sizeof err) == 0 && k.allreduce_on == 0, "default allreduce_on %d",
		   k.allreduce_on);
	setenv("DNN_ALLREDUCE_ON", "host-update", 1);
	TEST_CHECK(dnn_knobs_parse(&k, err, sizeof err) == 0 && k.allreduce_on == 2, "DNN_ALLREDUCE_ON=host-update: %d",
		   k.allreduce_on);
	setenv("DNN_ALLREDUCE_ON", "cpu", 1);
	TEST_CHECK(dnn_knobs_parse(&k, err, sizeof err) == -1 &&
			   strcmp(err, "DNN_ALLREDUCE_ON=cpu: expected device, host or host-update") == 0,
		   "DNN_ALLREDUCE_ON=cpu: '%s'", err);
	unsetenv("DNN_ALLREDUCE_ON");
	/* The ANP_* variables and STARPU_ANP are taken as they are (their users check them), NULL when unset. */
	setenv("ANP_HOST", "h7", 1), setenv("ANP_SIM_GPU", "bad", 1), setenv("ANP_SIM_PLATFORM", "p", 1);
	unsetenv("ANP_SIM_CPU_MODELS");
	TEST_CHECK(dnn_knobs_parse(&k, err, sizeof err) == 0 && k.host && !strcmp(k.host, "h7") && k.sim.gpu &&
			   !strcmp(k.sim.gpu, "bad") && k.sim.platform && !strcmp(k.sim.platform, "p") &&
			   !k.sim.cpu_models,
		   "ANP_HOST, ANP_SIM_GPU, ANP_SIM_PLATFORM, ANP_SIM_CPU_MODELS: not read as they are");
	unsetenv("ANP_HOST"), unsetenv("ANP_SIM_GPU"), unsetenv("ANP_SIM_PLATFORM");
}

int main(void)
{
	char msg[512];
	TEST_CHECK(!dnn_worker_error_get(msg, sizeof msg), "an error before any was recorded");
	TEST_CHECK(!dnn_worker_error_unreported(msg, sizeof msg), "an unreported error before any was recorded");
	dnn_worker_error("codelets/x.cu:%d: cudnnFoo failed: %s", 12, "CUDNN_STATUS_BAD_PARAM");
	dnn_worker_error("a later error");
	TEST_CHECK(dnn_worker_error_unreported(msg, sizeof msg) && strcmp(msg, "codelets/x.cu:12: cudnnFoo failed: "
										 "CUDNN_STATUS_BAD_PARAM") == 0,
		   "the first error is not the one kept: '%s'", msg);
	TEST_CHECK(!dnn_worker_error_unreported(msg, sizeof msg), "an unreported error handed out twice");
	msg[0] = '\0';
	TEST_CHECK(dnn_worker_error_get(msg, sizeof msg) && strstr(msg, "cudnnFoo") != NULL, "get lost it: '%s'", msg);

	env_case(NULL, NULL, 0, 0, -1, NULL);
	env_case("", "", 0, 0, -1, NULL);
	env_case("tf32", NULL, 0, 0, -1, NULL);
	env_case("fp32", "0", 0, 1, 0, NULL);
	env_case("tf32", "65536", 0, 0, 65536, NULL);
	env_case("FP32", NULL, -1, 0, 0, "DNN_CUDA_MATH=FP32");
	env_case("fp16", NULL, -1, 0, 0, "DNN_CUDA_MATH=fp16: expected tf32 or fp32");
	env_case(NULL, "-1", -1, 0, 0, "DNN_CUDA_WORKSPACE_MB=-1");
	env_case(NULL, "65537", -1, 0, 0, "DNN_CUDA_WORKSPACE_MB=65537");
	env_case(NULL, "12x", -1, 0, 0, "DNN_CUDA_WORKSPACE_MB=12x");
	env_case(NULL, "99999999999999999999999", -1, 0, 0, "DNN_CUDA_WORKSPACE_MB=9999");
	unsetenv("DNN_CUDA_MATH"), unsetenv("DNN_CUDA_WORKSPACE_MB");
	other_knobs();
	return test_report("unit_worker_error");
}
