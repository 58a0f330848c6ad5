/* attention.cu — CUDA side of causal multi-head attention (attention.h).
 *
 * Per sample, for a group of G heads at a time (as many as the worker's workspace holds: G T x T
 * floats forward, 2 G T x T backward), cuBLAS strided-batched SGEMMs over the heads (a head's q, k,
 * v and y start D floats after the previous head's) and one kernel per softmax step:
 *   forward:  S = q k^T / sqrt(D); P = causal softmax of S's rows (and lse); y = P v
 *   backward: S = q k^T / sqrt(D); P = exp(S - lse) (causal); dv = P^T dy; dP = dy v^T;
 *             dS = P (dP - rowsum(dy .* y)) / sqrt(D); dq = dS k; dk = dS^T q
 * (dq, dk, dv with beta = accumulate_dx: 0 overwrites, cuBLAS then never reads dqkv.)
 * cuBLAS is column-major: a row-major [T][D] block with row stride L is its column-major D x T
 * transpose with leading dimension L, so each product is written for the transposes. */
#include <math.h>
#include <starpu.h>

#include "dnn_cuda.h"

extern "C" {
#include "attention.h"
}

#define ATT_THREADS 128

/* The block's max (op 0) or sum (op 1) of v; every thread gets it. Uses red[32]. */
static __device__ float block_reduce(float v, int op, float *red)
{
	for (int o = 16; o > 0; o >>= 1) {
		const float w = __shfl_xor_sync(0xffffffffu, v, o);
		v = op ? v + w : fmaxf(v, w);
	}
	const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
	__syncthreads(); /* red is free (an earlier call's readers are done) */
	if (lane == 0)
		red[warp] = v;
	__syncthreads();
	v = lane < nw ? red[lane] : (op ? 0.0f : -INFINITY);
	for (int o = 16; o > 0; o >>= 1) {
		const float w = __shfl_xor_sync(0xffffffffu, v, o);
		v = op ? v + w : fmaxf(v, w);
	}
	return v;
}

// S (G,T,T) row i of head g: P = softmax over j <= i, 0 past i; lse (G,T) or NULL. grid (T, G)
static __global__ void softmax_fwd_kernel(float *S, float *lse, int T)
{
	__shared__ float red[32];
	const int i = blockIdx.x, g = blockIdx.y;
	float *s = S + ((size_t)g * T + i) * T;
	float m = -INFINITY;
	for (int j = threadIdx.x; j <= i; j += blockDim.x)
		m = fmaxf(m, s[j]);
	m = block_reduce(m, 0, red);
	float sum = 0.0f;
	for (int j = threadIdx.x; j <= i; j += blockDim.x)
		sum += expf(s[j] - m);
	sum = block_reduce(sum, 1, red);
	const float inv = 1.0f / sum;
	for (int j = threadIdx.x; j < T; j += blockDim.x)
		s[j] = j <= i ? expf(s[j] - m) * inv : 0.0f;
	if (lse && threadIdx.x == 0)
		lse[(size_t)g * T + i] = m + logf(sum);
}

// S (G,T,T) row i of head g: P = exp(S - lse) for j <= i, 0 past i. grid (T, G)
static __global__ void softmax_recompute_kernel(float *S, const float *lse, int T)
{
	const int i = blockIdx.x, g = blockIdx.y;
	float *s = S + ((size_t)g * T + i) * T;
	const float l = lse[(size_t)g * T + i];
	for (int j = threadIdx.x; j < T; j += blockDim.x)
		s[j] = j <= i ? expf(s[j] - l) : 0.0f;
}

// dP (G,T,T) row i of head g becomes dS = P (dP - dy[i].y[i]) scale; y, dy rows of stride ldy,
// head g at g*D. grid (T, G)
static __global__ void dsoft_kernel(float *dP, const float *P, const float *y, const float *dy, int T, int D, int ldy,
				    float scale)
{
	__shared__ float red[32];
	const int i = blockIdx.x, g = blockIdx.y;
	const float *yr = y + (size_t)i * ldy + (size_t)g * D, *dyr = dy + (size_t)i * ldy + (size_t)g * D;
	float dt = 0.0f;
	for (int d = threadIdx.x; d < D; d += blockDim.x)
		dt += dyr[d] * yr[d];
	dt = block_reduce(dt, 1, red);
	float *r = dP + ((size_t)g * T + i) * T;
	const float *p = P + ((size_t)g * T + i) * T;
	for (int j = threadIdx.x; j < T; j += blockDim.x)
		r[j] = j <= i ? p[j] * (r[j] - dt) * scale : 0.0f;
}

/* Heads per group for `mats` T x T float matrices per head in the workspace; 0 after recording
 * a worker error when not even one head fits. */
static int heads_per_group(const dnn_attention_args *a, int mats, const char *what)
{
	const size_t per = (size_t)mats * a->T * a->T * sizeof(float), ws = dnn_cuda_workspace_size();
	const size_t g = per ? ws / per : (size_t)a->H;
	if (g == 0) {
		dnn_worker_error("attention %s: T=%d needs %zu bytes of CUDA workspace per head, the worker has %zu "
				 "(DNN_CUDA_WORKSPACE_MB)", what, a->T, per, ws);
		return 0;
	}
	return g < (size_t)a->H ? (int)g : a->H;
}

extern "C" void dnn_attention_fwd_cuda(void *buffers[], void *cl_arg)
{
	const dnn_attention_args *a = (const dnn_attention_args *)cl_arg;
	const int T = a->T, C = a->C, H = a->H, D = C / H, L = 3 * C;
	const size_t tok = (size_t)a->N * T;
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[0]) == tok * L);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[1]) == tok * C);
	STARPU_ASSERT(!a->save_lse || STARPU_VECTOR_GET_NX(buffers[2]) >= tok * H);
	if (a->y_bf16 || a->x_bf16) { /* the plan stores no bf16 activation with CUDA workers (graph/model.c): a bug */
		dnn_worker_error("attention forward: a bf16-stored activation reached a CUDA worker");
		return;
	}
	if (tok == 0)
		return;
	const float *qkv = (const float *)STARPU_VECTOR_GET_PTR(buffers[0]);
	float *y = (float *)STARPU_VECTOR_GET_PTR(buffers[1]);
	float *lse = a->save_lse ? (float *)STARPU_VECTOR_GET_PTR(buffers[2]) : NULL;
	const int G = heads_per_group(a, 1, "forward");
	if (G == 0)
		return;
	float *S = (float *)dnn_cuda_workspace((size_t)G * T * T * sizeof(float));
	if (!S)
		return;
	cublasHandle_t hb = dnn_cublas_handle();
	cudaStream_t st = starpu_cuda_get_local_stream();
	const float scale = 1.0f / sqrtf((float)D), one = 1.0f, zero = 0.0f;
	const long long TT = (long long)T * T;
	for (int n = 0; n < a->N; n++)
		for (int h0 = 0; h0 < H; h0 += G) {
			const int g = H - h0 < G ? H - h0 : G;
			const float *q = qkv + (size_t)n * T * L + (size_t)h0 * D, *k = q + C, *v = q + 2 * C;
			float *yo = y + (size_t)n * T * C + (size_t)h0 * D;
			// S^T (T x T, col-major) = k (T x D) q^T: S[i][j] = q_i . k_j, row-major
			DNN_CUBLAS_CHECK(dnn_cublas_gemm_strided(a->bf16, hb, CUBLAS_OP_T, CUBLAS_OP_N, T, T, D, &scale, k, L, D, q,
								   L, D, &zero, S, T, TT, g));
			softmax_fwd_kernel<<<dim3((unsigned)T, (unsigned)g), ATT_THREADS, 0, st>>>(
				S, lse ? lse + ((size_t)n * H + h0) * T : NULL, T);
			DNN_CUDA_CHECK(cudaGetLastError());
			// y^T (D x T) = v^T (D x T) P^T (T x T)
			DNN_CUBLAS_CHECK(dnn_cublas_gemm_strided(a->bf16, hb, CUBLAS_OP_N, CUBLAS_OP_N, D, T, T, &one, v, L, D, S, T,
								   TT, &zero, yo, C, D, g));
		}
}

extern "C" void dnn_attention_bwd_cuda(void *buffers[], void *cl_arg)
{
	const dnn_attention_args *a = (const dnn_attention_args *)cl_arg;
	const int T = a->T, C = a->C, H = a->H, D = C / H, L = 3 * C;
	const size_t tok = (size_t)a->N * T;
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[0]) == tok * L);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[1]) == tok * C);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[2]) == tok * C);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[3]) >= tok * H);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[4]) == tok * L);
	if (a->y_bf16 || a->x_bf16) {
		dnn_worker_error("attention backward: a bf16-stored activation reached a CUDA worker");
		return;
	}
	if (tok == 0)
		return;
	const float *qkv = (const float *)STARPU_VECTOR_GET_PTR(buffers[0]);
	const float *y = (const float *)STARPU_VECTOR_GET_PTR(buffers[1]);
	const float *dy = (const float *)STARPU_VECTOR_GET_PTR(buffers[2]);
	const float *lse = (const float *)STARPU_VECTOR_GET_PTR(buffers[3]);
	float *dqkv = (float *)STARPU_VECTOR_GET_PTR(buffers[4]);
	const int G = heads_per_group(a, 2, "backward");
	if (G == 0)
		return;
	float *P = (float *)dnn_cuda_workspace(2 * (size_t)G * T * T * sizeof(float));
	if (!P)
		return;
	float *dS = P + (size_t)G * T * T;
	cublasHandle_t hb = dnn_cublas_handle();
	cudaStream_t st = starpu_cuda_get_local_stream();
	const float scale = 1.0f / sqrtf((float)D), one = 1.0f, zero = 0.0f;
	const float beta = a->accumulate_dx ? 1.0f : 0.0f;
	const long long TT = (long long)T * T;
	for (int n = 0; n < a->N; n++)
		for (int h0 = 0; h0 < H; h0 += G) {
			const int g = H - h0 < G ? H - h0 : G;
			const size_t o = (size_t)n * T * L + (size_t)h0 * D, oy = (size_t)n * T * C + (size_t)h0 * D;
			const float *q = qkv + o, *k = q + C, *v = q + 2 * C;
			float *dq = dqkv + o, *dk = dq + C, *dv = dq + 2 * C;
			const dim3 grid((unsigned)T, (unsigned)g);
			DNN_CUBLAS_CHECK(dnn_cublas_gemm_strided(a->bf16, hb, CUBLAS_OP_T, CUBLAS_OP_N, T, T, D, &scale, k, L, D, q,
								   L, D, &zero, P, T, TT, g));
			softmax_recompute_kernel<<<grid, ATT_THREADS, 0, st>>>(P, lse + ((size_t)n * H + h0) * T, T);
			DNN_CUDA_CHECK(cudaGetLastError());
			// dv^T (D x T) = dy^T (D x T) P (T x T): dv[j] = sum_i P[i][j] dy[i]
			DNN_CUBLAS_CHECK(dnn_cublas_gemm_strided(a->bf16, hb, CUBLAS_OP_N, CUBLAS_OP_T, D, T, T, &one, dy + oy, C, D,
								   P, T, TT, &beta, dv, L, D, g));
			// dP^T (T x T) = v (T x D) dy^T (D x T): dP[i][j] = dy_i . v_j
			DNN_CUBLAS_CHECK(dnn_cublas_gemm_strided(a->bf16, hb, CUBLAS_OP_T, CUBLAS_OP_N, T, T, D, &one, v, L, D,
								   dy + oy, C, D, &zero, dS, T, TT, g));
			dsoft_kernel<<<grid, ATT_THREADS, 0, st>>>(dS, P, y + oy, dy + oy, T, D, C, scale);
			DNN_CUDA_CHECK(cudaGetLastError());
			// dq^T (D x T) = k^T (D x T) dS^T (T x T): dq[i] = sum_j dS[i][j] k[j]
			DNN_CUBLAS_CHECK(dnn_cublas_gemm_strided(a->bf16, hb, CUBLAS_OP_N, CUBLAS_OP_N, D, T, T, &one, k, L, D, dS, T,
								   TT, &beta, dq, L, D, g));
			// dk^T (D x T) = q^T (D x T) dS (T x T): dk[j] = sum_i dS[i][j] q[i]
			DNN_CUBLAS_CHECK(dnn_cublas_gemm_strided(a->bf16, hb, CUBLAS_OP_N, CUBLAS_OP_T, D, T, T, &one, q, L, D, dS, T,
								   TT, &beta, dk, L, D, g));
		}
}
