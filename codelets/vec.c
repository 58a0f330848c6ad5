/* vec.c — element-wise operations on float vector handles (see vec.h).
 *
 * Every weight-gradient handle (and every other summed handle) is registered with cl_vec_zero as
 * its init method and cl_vec_redux_add as its reduction method (docs/ARCHITECTURE.md, "The
 * training DAG"). Backward tasks += into a per-worker zeroed copy; StarPU then reduces the
 * copies, CPU or GPU, with these codelets. The same kernels, inserted as tasks, copy, add and
 * slice vectors for graph/dist.c and the add op.
 */
#include "vec.h"
#include "dnn_codelet.h"
#include "gemm_bf16.h"

#include <stdlib.h>
#include <string.h>

void dnn_vec_zero_cpu(float *dst, size_t n)
{
	memset(dst, 0, n * sizeof(float));
}

void dnn_vec_add_cpu(float *dst, const float *src, size_t n)
{
	for (size_t i = 0; i < n; i++)
		dst[i] += src[i];
}

void dnn_vec_add_clear_cpu(float *dst, float *src, size_t n)
{
	for (size_t i = 0; i < n; i++)
		dst[i] += src[i], src[i] = 0.0f;
}

void dnn_vec_add_clear_cpu_d(double *dst, double *src, size_t n)
{
	for (size_t i = 0; i < n; i++)
		dst[i] += src[i], src[i] = 0.0;
}

void dnn_vec_axpy_cpu(float *dst, float alpha, const float *src, size_t n)
{
	for (size_t i = 0; i < n; i++)
		dst[i] += alpha * src[i];
}

static void vec_zero_cpu_task(void *buffers[], void *cl_arg)
{
	(void)cl_arg;
	dnn_vec_zero_cpu((float *)STARPU_VECTOR_GET_PTR(buffers[0]), STARPU_VECTOR_GET_NX(buffers[0]));
}

static void vec_add_cpu_task(void *buffers[], void *cl_arg)
{
	(void)cl_arg;
	size_t n = STARPU_VECTOR_GET_NX(buffers[0]);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[1]) == n);
	dnn_vec_add_cpu((float *)STARPU_VECTOR_GET_PTR(buffers[0]),
			   (const float *)STARPU_VECTOR_GET_PTR(buffers[1]), n);
}

static void vec_add_clear_cpu_task(void *buffers[], void *cl_arg)
{
	(void)cl_arg;
	size_t n = STARPU_VECTOR_GET_NX(buffers[0]), es = STARPU_VECTOR_GET_ELEMSIZE(buffers[0]);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[1]) == n && STARPU_VECTOR_GET_ELEMSIZE(buffers[1]) == es);
	if (es == sizeof(double))
		dnn_vec_add_clear_cpu_d((double *)STARPU_VECTOR_GET_PTR(buffers[0]),
					(double *)STARPU_VECTOR_GET_PTR(buffers[1]), n);
	else
		dnn_vec_add_clear_cpu((float *)STARPU_VECTOR_GET_PTR(buffers[0]), (float *)STARPU_VECTOR_GET_PTR(buffers[1]),
				      n);
}

static void vec_axpy_cpu_task(void *buffers[], void *cl_arg)
{
	const float alpha = *(const float *)cl_arg;
	size_t n = STARPU_VECTOR_GET_NX(buffers[0]);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[1]) == n);
	dnn_vec_axpy_cpu((float *)STARPU_VECTOR_GET_PTR(buffers[0]), alpha,
			  (const float *)STARPU_VECTOR_GET_PTR(buffers[1]), n);
}

static struct starpu_perfmodel vec_zero_model = {
	.type = STARPU_HISTORY_BASED,
	.symbol = "dnn_cl_vec_zero",
};
static struct starpu_perfmodel vec_add_model = {
	.type = STARPU_HISTORY_BASED,
	.symbol = "dnn_cl_vec_add",
};

/* Reduction methods are called by StarPU itself, so their modes are fixed here (cl_vec_zero is
 * also inserted as a plain task: dnn_insert_vec_zero). */
struct starpu_codelet cl_vec_zero = {
	.name = "cl_vec_zero",
	.cpu_funcs = {vec_zero_cpu_task},
	.cpu_funcs_name = {"vec_zero_cpu_task"},
	.cuda_funcs = {DNN_CUDA_FN(dnn_vec_zero_cuda)},
	.cuda_flags = {STARPU_CUDA_ASYNC},
	.nbuffers = 1,
	.modes = {STARPU_W},
	.model = &vec_zero_model,
	.color = DNN_COLOR_REDUX,
};
DNN_CUDA_DECLARED(cl_vec_zero);

/* The reduction method is asynchronous on CUDA workers, in the simulation build too: StarPU runs
 * it as an internal task (datawizard/reduction.c: redux_task_*), which StarPU 1.4.10's SimGrid mode
 * skipped without marking the CUDA pipeline slot finished (an asynchronous one then left the worker
 * asleep: "Deadlock detected"), so the simulation build declared it synchronous until
 * third_party/starpu-simgrid-time-redux.patch made SimGrid time internal jobs that have a model,
 * through the same pipeline as every other task. */
#define DNN_REDUX_CUDA_FLAGS STARPU_CUDA_ASYNC

struct starpu_codelet cl_vec_redux_add = {
	.name = "cl_vec_redux_add",
	.cpu_funcs = {vec_add_cpu_task},
	.cpu_funcs_name = {"vec_add_cpu_task"},
	.cuda_funcs = {DNN_CUDA_FN(dnn_vec_add_cuda)},
	.cuda_flags = {DNN_REDUX_CUDA_FLAGS},
	.nbuffers = 2,
	.modes = {STARPU_RW | STARPU_COMMUTE, STARPU_R},
	.model = &vec_add_model,
	.color = DNN_COLOR_REDUX,
};
DNN_CUDA_DECLARED(cl_vec_redux_add);

/* Same kernel as cl_vec_redux_add but with modes chosen at insert time, for tasks that contribute
 * to a REDUX handle (STARPU_REDUX, STARPU_MPI_REDUX) or add into a vector (STARPU_RW, with or
 * without STARPU_COMMUTE). StarPU rejects a
 * REDUX access through a codelet whose static mode is RW|COMMUTE, hence the twin. */
struct starpu_codelet cl_vec_add = {
	.name = "cl_vec_add",
	.cpu_funcs = {vec_add_cpu_task},
	.cpu_funcs_name = {"vec_add_cpu_task"},
	.cuda_funcs = {DNN_CUDA_FN(dnn_vec_add_cuda)},
	.cuda_flags = {STARPU_CUDA_ASYNC},
	.nbuffers = STARPU_VARIABLE_NBUFFERS, /* 2 buffers; see dnn_codelet.h */
	.model = &vec_add_model,
	.color = DNN_COLOR_REDUX,
};
DNN_CUDA_DECLARED(cl_vec_add);

static struct starpu_perfmodel vec_add_clear_model = {
	.type = STARPU_HISTORY_BASED,
	.symbol = "dnn_cl_vec_add_clear",
};

/* One add of the fixed-order tree over chunks (graph/chunksum.c): the sum moves into dst and src
 * is zeroed for the next step's backward, which accumulates into it (+=) again. */
struct starpu_codelet cl_vec_add_clear = {
	.name = "cl_vec_add_clear",
	.cpu_funcs = {vec_add_clear_cpu_task},
	.cpu_funcs_name = {"vec_add_clear_cpu_task"},
	.cuda_funcs = {DNN_CUDA_FN(dnn_vec_add_clear_cuda)},
	.cuda_flags = {STARPU_CUDA_ASYNC},
	.nbuffers = 2,
	.modes = {STARPU_RW, STARPU_RW},
	.model = &vec_add_clear_model,
	.color = DNN_COLOR_REDUX,
};
DNN_CUDA_DECLARED(cl_vec_add_clear);

static struct starpu_perfmodel vec_axpy_model = {
	.type = STARPU_HISTORY_BASED,
	.symbol = "dnn_cl_vec_axpy",
};

/* Scaled add, for the async mode's staleness compensation (graph/dist.c). */
struct starpu_codelet cl_vec_axpy = {
	.name = "cl_vec_axpy",
	.cpu_funcs = {vec_axpy_cpu_task},
	.cpu_funcs_name = {"vec_axpy_cpu_task"},
	.cuda_funcs = {DNN_CUDA_FN(dnn_vec_axpy_cuda)},
	.cuda_flags = {STARPU_CUDA_ASYNC},
	.nbuffers = 2,
	.modes = {STARPU_RW, STARPU_R},
	.model = &vec_axpy_model,
	.color = DNN_COLOR_UPDATE,
};
DNN_CUDA_DECLARED(cl_vec_axpy);

static void vec_slice_get_cpu_task(void *buffers[], void *cl_arg)
{
	const size_t off = *(const size_t *)cl_arg, n = STARPU_VECTOR_GET_NX(buffers[0]);
	STARPU_ASSERT(off + n <= STARPU_VECTOR_GET_NX(buffers[1]));
	memcpy((float *)STARPU_VECTOR_GET_PTR(buffers[0]), (const float *)STARPU_VECTOR_GET_PTR(buffers[1]) + off,
	       n * sizeof(float));
}

static void vec_slice_put_cpu_task(void *buffers[], void *cl_arg)
{
	const size_t off = *(const size_t *)cl_arg, n = STARPU_VECTOR_GET_NX(buffers[1]);
	STARPU_ASSERT(off + n <= STARPU_VECTOR_GET_NX(buffers[0]));
	memcpy((float *)STARPU_VECTOR_GET_PTR(buffers[0]) + off, (const float *)STARPU_VECTOR_GET_PTR(buffers[1]),
	       n * sizeof(float));
}

static struct starpu_perfmodel vec_slice_get_model = {
	.type = STARPU_HISTORY_BASED,
	.symbol = "dnn_cl_vec_slice_get",
};
static struct starpu_perfmodel vec_slice_put_model = {
	.type = STARPU_HISTORY_BASED,
	.symbol = "dnn_cl_vec_slice_put",
};

/* Ring all-reduce: a rank's chunk of its local gradient, a chunk forwarded along the ring
 * (offset 0, same length), and the reduced chunks written back into the full gradient. */
struct starpu_codelet cl_vec_slice_get = {
	.name = "cl_vec_slice_get",
	.cpu_funcs = {vec_slice_get_cpu_task},
	.cpu_funcs_name = {"vec_slice_get_cpu_task"},
	.cuda_funcs = {DNN_CUDA_FN(dnn_vec_slice_get_cuda)},
	.cuda_flags = {STARPU_CUDA_ASYNC},
	.nbuffers = 2,
	.modes = {STARPU_W, STARPU_R},
	.model = &vec_slice_get_model,
	.color = DNN_COLOR_REDUX,
};
DNN_CUDA_DECLARED(cl_vec_slice_get);

/* A slice_put writes only its slice of `full`, and every caller puts disjoint slices (a bucket's
 * members, the ring's and rhd's chunks), so the puts into one vector commute: RW|COMMUTE leaves
 * them unordered. Plain RW chained them in submission order, and since StarPU starts the
 * reduction of a STARPU_REDUX source (the gradient's per-worker copies) only when its next
 * reader acquires it, each member's reduction waited for the previous member's put: a bucket's
 * pack was a serial chain of reduction trees (16% of a 4-node H200 step's critical path,
 * docs/SIMULATION.md study 5 (j)). Now each member's reduction starts when its backward ends. */
struct starpu_codelet cl_vec_slice_put = {
	.name = "cl_vec_slice_put",
	.cpu_funcs = {vec_slice_put_cpu_task},
	.cpu_funcs_name = {"vec_slice_put_cpu_task"},
	.cuda_funcs = {DNN_CUDA_FN(dnn_vec_slice_put_cuda)},
	.cuda_flags = {STARPU_CUDA_ASYNC},
	.nbuffers = 2,
	.modes = {STARPU_RW | STARPU_COMMUTE, STARPU_R},
	.model = &vec_slice_put_model,
	.color = DNN_COLOR_REDUX,
};
DNN_CUDA_DECLARED(cl_vec_slice_put);

void dnn_vec_set_sum_redux(starpu_data_handle_t h)
{
	starpu_data_set_reduction_methods(h, &cl_vec_redux_add, &cl_vec_zero);
}

int dnn_insert_vec_zero(const dnn_task_opts *o, starpu_data_handle_t dst)
{
	return DNN_TASK_INSERT(o, &cl_vec_zero, "vec_zero", STARPU_W, dst);
}

int dnn_insert_vec_axpy(const dnn_task_opts *o, starpu_data_handle_t dst, float alpha, starpu_data_handle_t src)
{
	return DNN_TASK_INSERT_ARGS(o, &cl_vec_axpy, "vec_axpy", &alpha, STARPU_RW, dst, STARPU_R, src);
}

int dnn_insert_vec_add(const dnn_task_opts *o, starpu_data_handle_t dst, int dst_mode, starpu_data_handle_t src)
{
	if (o && o->color)
		return DNN_TASK_INSERT(o, &cl_vec_add, "vec_add", dst_mode, dst, STARPU_R, src, STARPU_TASK_COLOR, o->color);
	return DNN_TASK_INSERT(o, &cl_vec_add, "vec_add", dst_mode, dst, STARPU_R, src);
}

int dnn_insert_vec_add_clear(const dnn_task_opts *o, starpu_data_handle_t dst, starpu_data_handle_t src)
{
	if (o && o->color)
		return DNN_TASK_INSERT(o, &cl_vec_add_clear, "vec_add_clear", STARPU_RW, dst, STARPU_RW, src,
				       STARPU_TASK_COLOR, o->color);
	return DNN_TASK_INSERT(o, &cl_vec_add_clear, "vec_add_clear", STARPU_RW, dst, STARPU_RW, src);
}

/* The slice codelets read their offset from a size_t cl_arg; each task gets its own copy. */
static int insert_slice(const dnn_task_opts *o, struct starpu_codelet *cl, const char *name, int dst_mode,
			starpu_data_handle_t dst, starpu_data_handle_t src, size_t off)
{
	return DNN_TASK_INSERT_ARGS(o, cl, name, &off, dst_mode, dst, STARPU_R, src);
}

int dnn_insert_vec_slice_get(const dnn_task_opts *o, starpu_data_handle_t dst, starpu_data_handle_t src, size_t off)
{
	return insert_slice(o, &cl_vec_slice_get, "vec_slice_get", STARPU_W, dst, src, off);
}

int dnn_insert_vec_slice_put(const dnn_task_opts *o, starpu_data_handle_t dst, starpu_data_handle_t src, size_t off)
{
	return insert_slice(o, &cl_vec_slice_put, "vec_slice_put", STARPU_RW | STARPU_COMMUTE, dst, src, off);
}

/* ---- gradients on the wire in bf16 (--grad-precision bf16, graph/allreduce/)
 *
 * The pack is the only rounding: dnn_f32_to_bf16's round to nearest even (codelets/gemm_bf16.h,
 * rounding 1 of its three). Its AVX-512F loop is dnn_f32_to_bf16_avx512, the same integer
 * arithmetic on 16 lanes, so it gives the same bits as the scalar loop on every input. Not vcvtneps2bf16
 * (AVX512_BF16): it treats fp32 denormal inputs as zero whatever MXCSR says (seen here, Zen 5:
 * 0x00012345 -> 0x0000, where round to nearest even gives 0x0001), and small gradients can be
 * denormal. Widening (bf16 << 16) is exact, and the add after it is one fp32 add per element in
 * the loop's order, which the compiler vectorises without reassociating. */
static int bf16_simd = -1; // -1: not chosen yet

static void to_bf16_scalar(uint16_t *dst, float *src, size_t i, size_t n)
{
	for (; i < n; i++)
		dst[i] = dnn_f32_to_bf16(src[i]), src[i] = dnn_bf16_to_f32(dst[i]);
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

int dnn_vec_bf16_set_simd(int on)
{
	__builtin_cpu_init();
	bf16_simd = on && __builtin_cpu_supports("avx512f");
	return bf16_simd;
}

__attribute__((target("avx512f"))) static size_t to_bf16_avx512(uint16_t *dst, float *src, size_t n)
{
	size_t i = 0;
	for (; i + 16 <= n; i += 16) {
		const __m512i r = dnn_f32_to_bf16_avx512(_mm512_loadu_si512((const void *)(src + i)));
		_mm256_storeu_si256((__m256i *)(void *)(dst + i), _mm512_cvtepi32_epi16(r));
		_mm512_storeu_si512((void *)(src + i), _mm512_slli_epi32(r, 16));
	}
	return i;
}

void dnn_vec_to_bf16_cpu(uint16_t *dst, float *src, size_t n)
{
	if (bf16_simd < 0)
		dnn_vec_bf16_set_simd(1);
	to_bf16_scalar(dst, src, bf16_simd ? to_bf16_avx512(dst, src, n) : 0, n);
}
#else
int dnn_vec_bf16_set_simd(int on)
{
	(void)on;
	return bf16_simd = 0;
}

void dnn_vec_to_bf16_cpu(uint16_t *dst, float *src, size_t n) { to_bf16_scalar(dst, src, 0, n); }
#endif

void dnn_vec_from_bf16_cpu(float *dst, const uint16_t *src, size_t n)
{
	for (size_t i = 0; i < n; i++)
		dst[i] = dnn_bf16_to_f32(src[i]);
}

void dnn_vec_add_bf16_cpu(float *dst, const uint16_t *src, size_t n)
{
	for (size_t i = 0; i < n; i++)
		dst[i] += dnn_bf16_to_f32(src[i]);
}

/* Buffers: [0] the output (W, or RW for the add), [1] the input; equal lengths. */
static void vec_to_bf16_cpu_task(void *buffers[], void *cl_arg)
{
	(void)cl_arg;
	const size_t n = STARPU_VECTOR_GET_NX(buffers[0]);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[1]) == n && STARPU_VECTOR_GET_ELEMSIZE(buffers[0]) == 2);
	dnn_vec_to_bf16_cpu((uint16_t *)STARPU_VECTOR_GET_PTR(buffers[0]), (float *)STARPU_VECTOR_GET_PTR(buffers[1]),
			    n);
}

static void vec_from_bf16_cpu_task(void *buffers[], void *cl_arg)
{
	(void)cl_arg;
	const size_t n = STARPU_VECTOR_GET_NX(buffers[0]);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[1]) == n && STARPU_VECTOR_GET_ELEMSIZE(buffers[1]) == 2);
	dnn_vec_from_bf16_cpu((float *)STARPU_VECTOR_GET_PTR(buffers[0]),
			      (const uint16_t *)STARPU_VECTOR_GET_PTR(buffers[1]), n);
}

static void vec_add_bf16_cpu_task(void *buffers[], void *cl_arg)
{
	(void)cl_arg;
	const size_t n = STARPU_VECTOR_GET_NX(buffers[0]);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[1]) == n && STARPU_VECTOR_GET_ELEMSIZE(buffers[1]) == 2);
	dnn_vec_add_bf16_cpu((float *)STARPU_VECTOR_GET_PTR(buffers[0]),
			     (const uint16_t *)STARPU_VECTOR_GET_PTR(buffers[1]), n);
}

static struct starpu_perfmodel vec_to_bf16_model = {
	.type = STARPU_HISTORY_BASED,
	.symbol = "dnn_cl_vec_to_bf16",
};
static struct starpu_perfmodel vec_from_bf16_model = {
	.type = STARPU_HISTORY_BASED,
	.symbol = "dnn_cl_vec_from_bf16",
};
static struct starpu_perfmodel vec_add_bf16_model = {
	.type = STARPU_HISTORY_BASED,
	.symbol = "dnn_cl_vec_add_bf16",
};

/* The sender's side of a bf16 message: the message, and its own fp32 copy rounded to what it sent. */
struct starpu_codelet cl_vec_to_bf16 = {
	.name = "cl_vec_to_bf16",
	.cpu_funcs = {vec_to_bf16_cpu_task},
	.cpu_funcs_name = {"vec_to_bf16_cpu_task"},
	.cuda_funcs = {DNN_CUDA_FN(dnn_vec_to_bf16_cuda)},
	.cuda_flags = {STARPU_CUDA_ASYNC},
	.nbuffers = 2,
	.modes = {STARPU_W, STARPU_RW},
	.model = &vec_to_bf16_model,
	.color = DNN_COLOR_REDUX,
};
DNN_CUDA_DECLARED(cl_vec_to_bf16);

/* A receiver's copy of a sum that it forwards or keeps (the all-gathers, the tree's and server's broadcast). */
struct starpu_codelet cl_vec_from_bf16 = {
	.name = "cl_vec_from_bf16",
	.cpu_funcs = {vec_from_bf16_cpu_task},
	.cpu_funcs_name = {"vec_from_bf16_cpu_task"},
	.cuda_funcs = {DNN_CUDA_FN(dnn_vec_from_bf16_cuda)},
	.cuda_flags = {STARPU_CUDA_ASYNC},
	.nbuffers = 2,
	.modes = {STARPU_W, STARPU_R},
	.model = &vec_from_bf16_model,
	.color = DNN_COLOR_REDUX,
};
DNN_CUDA_DECLARED(cl_vec_from_bf16);

/* A receiver's fp32 sum of a partial sum it received (the reduce-scatters, the tree's levels, the server's pushes). */
struct starpu_codelet cl_vec_add_bf16 = {
	.name = "cl_vec_add_bf16",
	.cpu_funcs = {vec_add_bf16_cpu_task},
	.cpu_funcs_name = {"vec_add_bf16_cpu_task"},
	.cuda_funcs = {DNN_CUDA_FN(dnn_vec_add_bf16_cuda)},
	.cuda_flags = {STARPU_CUDA_ASYNC},
	.nbuffers = 2,
	.modes = {STARPU_RW, STARPU_R},
	.model = &vec_add_bf16_model,
	.color = DNN_COLOR_REDUX,
};
DNN_CUDA_DECLARED(cl_vec_add_bf16);

int dnn_insert_vec_to_bf16(const dnn_task_opts *o, starpu_data_handle_t msg, starpu_data_handle_t src)
{
	return DNN_TASK_INSERT(o, &cl_vec_to_bf16, "vec_to_bf16", STARPU_W, msg, STARPU_RW, src);
}

int dnn_insert_vec_from_bf16(const dnn_task_opts *o, starpu_data_handle_t dst, starpu_data_handle_t msg)
{
	return DNN_TASK_INSERT(o, &cl_vec_from_bf16, "vec_from_bf16", STARPU_W, dst, STARPU_R, msg);
}

int dnn_insert_vec_add_bf16(const dnn_task_opts *o, starpu_data_handle_t dst, starpu_data_handle_t msg)
{
	return DNN_TASK_INSERT(o, &cl_vec_add_bf16, "vec_add_bf16", STARPU_RW, dst, STARPU_R, msg);
}
