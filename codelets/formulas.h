/* formulas.h — what the per-element formula headers share (act_formulas.h, bn_formulas.h,
 * optim_formulas.h): each formula is written once, as a small function that the CPU kernels
 * (<op>.c) and the CUDA kernels (<op>.cu) both call.
 *
 * DNN_FORMULA marks them: `static inline __host__ __device__` under nvcc (__CUDACC__), so the
 * same text compiles into the device kernels, and `static inline` in C, where the compiler
 * inlines it into the loops it vectorises. A formula keeps the float evaluation order of the
 * kernels that called it (the CPU tests compare some results bit for bit): change the order
 * in a formula and every path that calls it changes with it.
 *
 * What the formulas do not cover: the order of sums (LARS's and LAMB's norms, batch norm's
 * statistics: each path sums in its own fixed order) and hand-vectorised copies of a formula,
 * which each formula header names with the test that compares them bit for bit.
 */
#ifndef DNN_FORMULAS_H
#define DNN_FORMULAS_H

#include <math.h>

#ifdef __CUDACC__
#define DNN_FORMULA static inline __host__ __device__
#else
#define DNN_FORMULA static inline
#endif

#endif
