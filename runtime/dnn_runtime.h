/* dnn_runtime.h — StarPU (+ optional MPI) start-up and shutdown for apps and tests. */
#ifndef DNN_RUNTIME_H
#define DNN_RUNTIME_H

#include "starpu_anp.h" /* dnn_runtime_init, dnn_runtime_shutdown */

int dnn_runtime_rank(void);   /* 0 without MPI */
int dnn_runtime_nranks(void); /* 1 without MPI */
#endif
