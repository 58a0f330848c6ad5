/* trace.h — `--trace DIR`: record an FxT trace through StarPU and convert it at exit.
 *
 *   dnn_trace_setup(dir)     before dnn_runtime_init(): creates DIR and sets STARPU_FXT_TRACE=1,
 *                            STARPU_FXT_PREFIX=DIR/ and STARPU_FXT_SUFFIX=prof_file, so every rank
 *                            writes DIR/prof_file_<rank> when StarPU shuts down.
 *   dnn_trace_finish()       after dnn_runtime_shutdown(): on rank 0, waits for every rank's
 *                            prof file of this run and converts them, all together, into
 *                            DIR/paje.trace (ViTE), tasks.rec, trace.rec, dag.dot (starpu_fxt_tool),
 *                            DIR/trace.svg (ViTE's own SVG export) and DIR/summary.txt + gantt.png
 *                            (traces/trace_summary.py).
 *   dnn_trace_tool_main()    `starpu_anp trace-summary|sweep ...`: runs the script in traces/.
 *
 * Messages go to stderr, so the app's result line stays the last line of stdout.
 */
#ifndef DNN_TRACE_H
#define DNN_TRACE_H

#include <stddef.h>

#include "starpu_anp.h"

/* 1 when the StarPU we were built against has FxT (STARPU_USE_FXT), else 0. */
int dnn_trace_available(void);

/* dnn_trace_setup, dnn_trace_finish and dnn_trace_tool_main are public: include/starpu_anp.h. */

#endif
