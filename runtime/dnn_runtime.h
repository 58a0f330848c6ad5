/* dnn_runtime.h — StarPU (+ optional MPI) start-up and shutdown for apps and tests. */
#ifndef DNN_RUNTIME_H
#define DNN_RUNTIME_H

/* Start StarPU with our settings: OpenBLAS at one thread per worker, cuBLAS/cuDNN handles on
 * every CUDA worker. With use_mpi, StarPU-MPI is started too (it initialises MPI).
 * Returns 0, or -ENODEV when StarPU finds no worker at all (tests map that to exit 77);
 * any other failure prints one line and exits 1. */
int dnn_runtime_init(int *argc, char ***argv, int use_mpi);
void dnn_runtime_shutdown(void);

int dnn_runtime_rank(void);   /* 0 without MPI */
int dnn_runtime_nranks(void); /* 1 without MPI */
int dnn_runtime_uses_mpi(void);
#endif
