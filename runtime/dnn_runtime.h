/* dnn_runtime.h — StarPU (+ optional MPI) start-up and shutdown for apps and tests. */
#ifndef DNN_RUNTIME_H
#define DNN_RUNTIME_H

#include "starpu_anp.h" /* dnn_runtime_init, dnn_runtime_shutdown */

int dnn_runtime_rank(void);   /* 0 without MPI */
int dnn_runtime_nranks(void); /* 1 without MPI */
/* 1 when every rank runs on this node, from the launcher's environment (Open MPI's
 * OMPI_COMM_WORLD_LOCAL_SIZE, else MPICH's MPI_LOCALNRANKS: the ranks on this node), so that no
 * MPI call races StarPU-MPI's progress thread; every rank reaches the same answer. 1 without
 * MPI; 0 when the launcher does not say (the simulation's ranks, each on its own host). */
int dnn_runtime_ranks_on_one_node(void);
#endif
