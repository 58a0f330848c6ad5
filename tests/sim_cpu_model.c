/* sim_cpu_model — the simulation's CPU node model (codelets/dnn_sim_model.h) against its formulas:
 * the split of a calibrated task time into compute and memory, the scaling to another machine's
 * cores, the bandwidth share of n streams on a socket (a 2-worker memory-bound case worked by
 * hand), the count of streams a task shares with, and the spec's parser. No timing: the model's
 * check against real 1- and 2-worker runs is bench/membw_share.c
 * (docs/studies/2026-12-07-seed-reproduction.md). */
#include <math.h>
#include <string.h>

#include "dnn_sim_model.h"
#include "test_util.h"

static int near(double a, double b) { return fabs(a - b) <= 1e-9 * fmax(1, fabs(b)); }

static void test_parse(void)
{
	dnn_sim_cpu c;
	char err[256];
	TEST_CHECK(dnn_sim_cpu_parse(&c, "ANP_SIM_CPU", "e5-2667v2:52.8:9:43:8:25", err, sizeof(err)) == 0, "%s", err);
	TEST_CHECK(!strcmp(c.name, "e5-2667v2") && c.peak_gflops == 52.8 && c.core_gbs == 9 && c.socket_gbs == 43 &&
			   c.cores_per_socket == 8 && c.llc_mb == 25,
		   "parsed %s %g %g %g %d %g", c.name, c.peak_gflops, c.core_gbs, c.socket_gbs, c.cores_per_socket,
		   c.llc_mb);
	static const char *const bad[] = {"x:1:2:3:4",     "x:1:2:3:4:5:6", "x:1:2:1:4:5", "x:0:2:3:4:5",
					  "x:1:2:3:0:5",   "x:1:2:3:4:-1",  "x:1:2:3:4:5z", ""};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = 0;
		TEST_CHECK(dnn_sim_cpu_parse(&c, "ANP_SIM_CPU_HERE", bad[i], err, sizeof(err)) != 0 &&
				   strstr(err, "ANP_SIM_CPU_HERE='") && !strchr(err, '\n'),
			   "'%s' accepted or message '%s'", bad[i], err);
	}
}

static void test_task_us(void)
{
	/* a 2-core machine without cache (llc 0): 100 GFLOP/s per core, 10 GB/s for one core, 15 for both */
	const dnn_sim_cpu here = {"here", 100, 10, 15, 2, 0};
	double mem = -1, frac = -1;
	/* alone on the machine that timed it: the calibrated time, whatever the split */
	TEST_CHECK(near(dnn_sim_cpu_task_us(&here, &here, 1000, 8e6, 1, &mem, &frac), 1000), "identity");
	TEST_CHECK(near(mem, 800) && near(frac, 0.8), "8 MB at 10 GB/s: memory 800 of 1000 us, got %g (%g)", mem, frac);
	/* The 2-worker memory-bound case: memory 800 us at 10 GB/s alone; with 2 streams each gets
	 * min(10, 15 / 2) = 7.5 GB/s: 8e6 B / 7.5e3 B/us = 1066.67 us, plus the 200 us of compute. */
	const double t2 = dnn_sim_cpu_task_us(&here, &here, 1000, 8e6, 2, &mem, NULL);
	TEST_CHECK(near(t2, 200 + 8e6 / 7.5e3) && near(mem, 8e6 / 7.5e3), "2 workers: %g us (memory %g)", t2, mem);
	/* a task faster than its bytes at one core's rate is all memory: 400 us -> 400 * 10 / 7.5 */
	TEST_CHECK(near(dnn_sim_cpu_task_us(&here, &here, 400, 8e6, 2, NULL, NULL), 8e6 / 7.5e3),
		   "all memory, 2 workers");
	/* compute-bound (no bytes): no slowdown whatever n */
	TEST_CHECK(near(dnn_sim_cpu_task_us(&here, &here, 1000, 0, 16, NULL, &frac), 1000) && frac == 0, "no bytes");
	/* a socket that feeds both cores at full rate: no slowdown at 2 */
	const dnn_sim_cpu wide = {"wide", 100, 10, 20, 2, 0};
	TEST_CHECK(near(dnn_sim_cpu_task_us(&wide, &wide, 1000, 8e6, 2, NULL, NULL), 1000), "20 GB/s socket");

	/* Another machine: 4x less peak, 9 / 43 GB/s, 8 cores on 25 MB. 1000 us here of which 800
	 * memory: compute 200 * 100 / 25 = 800 us; 8e6 B > 25 MB / 8 = 3.125 MB: memory 8e6 / 9e3
	 * alone, 8e6 / (43e3 / 8) with 8 streams (43 / 8 = 5.375 < 9). */
	const dnn_sim_cpu xeon = {"xeon", 25, 9, 43, 8, 25};
	TEST_CHECK(near(dnn_sim_cpu_task_us(&here, &xeon, 1000, 8e6, 1, NULL, &frac), 800 + 8e6 / 9e3), "xeon alone");
	TEST_CHECK(near(frac, (8e6 / 9e3) / (800 + 8e6 / 9e3)), "xeon frac %g", frac);
	TEST_CHECK(near(dnn_sim_cpu_task_us(&here, &xeon, 1000, 8e6, 8, NULL, NULL), 800 + 8e6 / (43e3 / 8)),
		   "xeon, 8 streams");
	/* 4 streams: 43 / 4 = 10.75 > 9, the core's own rate limits */
	TEST_CHECK(near(dnn_sim_cpu_task_us(&here, &xeon, 1000, 8e6, 4, NULL, NULL), 800 + 8e6 / 9e3), "xeon, 4");
	/* 1 MB fits a Xeon core's cache share: compute only there (here, without cache, its memory part
	 * was 1e6 / 10e3 = 100 us of the 1000, and is dropped) */
	TEST_CHECK(near(dnn_sim_cpu_task_us(&here, &xeon, 1000, 1e6, 8, NULL, NULL), 900 * 4), "cached on the xeon");
}

static void test_streams(void)
{
	dnn_sim_cpu_core cores[3];
	memset(cores, 0, sizeof(cores));
	/* nothing ever ran: this task alone */
	TEST_CHECK(near(dnn_sim_cpu_streams(cores, 3, 0, 100, 50), 1), "idle socket");
	/* core 1 runs a task of memory share 0.8 over [90, 200): it counts 0.8 */
	dnn_sim_cpu_record(&cores[1], 90, 200, 0.8);
	TEST_CHECK(near(dnn_sim_cpu_streams(cores, 3, 0, 100, 50), 1.8), "one running neighbour");
	/* core 2 was busy with share 1 over [40, 75), idle at 100: window [50, 100) half busy */
	dnn_sim_cpu_record(&cores[2], 40, 75, 1.0);
	TEST_CHECK(near(dnn_sim_cpu_streams(cores, 3, 0, 100, 50), 2.3), "plus a recent one");
	/* the caller's own core never counts; a window of 0 counts only the running */
	TEST_CHECK(near(dnn_sim_cpu_streams(cores, 3, 1, 100, 50), 1.5), "self excluded");
	TEST_CHECK(near(dnn_sim_cpu_streams(cores, 3, 0, 100, 0), 1.8), "window 0");
	/* the ring keeps the last DNN_SIM_CPU_HIST tasks */
	for (int i = 0; i < DNN_SIM_CPU_HIST; i++)
		dnn_sim_cpu_record(&cores[2], 0, 1, 1.0);
	TEST_CHECK(near(dnn_sim_cpu_streams(cores, 3, 0, 100, 50), 1.8), "old tasks dropped");
}

int main(void)
{
	test_parse();
	test_task_us();
	test_streams();
	return test_report("sim_cpu_model");
}
