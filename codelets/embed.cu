/* embed.cu — CUDA side of the token + position embedding (embed.h).
 *
 * Forward: one thread per output element. A bad id (embed.h) writes NaN into its row and the
 * lowest such row into this worker's slot of a device array, which the task copies back and
 * waits for (one stream synchronisation per forward task) to record the worker error: the run
 * must stop with a message, not train on NaN, and the only way to learn of it is to look.
 *
 * Backward, deterministic without atomics and without a sort, the CPU's order bit for bit:
 * - dwpe: one thread per (t, c) adds dy[s,t,c] for s = 0, 1, ... in order.
 * - dwte: per-vocabulary-row ownership. One block per token row r; the block whose r is the
 *   first row of the chunk with its id (it scans rows [0, r) for an earlier one) owns that id's
 *   row of dwte and walks rows r, r+1, ... in order, adding dy of each row with the same id,
 *   its threads over the channels. Every row of dwte has one writer, which adds in token
 *   order: the same sums, in the same order, as dnn_embed_backward_cpu. The cost is the scans,
 *   shared by the block's threads: at most rows^2 / 2 id compares for the owners' search and
 *   (distinct ids) x rows for their walks, per chunk (rows = N*T; 65536 rows of GPT-2 text:
 *   about 2 G + 1.3 G compares; tests/gpu_embed.c times an 8192-row chunk of GPT-2's size, never
 *   yet run on a GPU).
 */
#include <starpu.h>
#include <stdint.h>

#include "dnn_cuda.h"

extern "C" {
#include "embed.h"
}

#define EMBED_THREADS 128
#define EMBED_TILE 1024 /* rows per step of the owner's walk (a multiple of EMBED_THREADS) */

/* Per CUDA worker: the lowest bad row of its last forward (a worker runs one task at a time,
 * so its slot has one writer; each device has its own copy of the array). */
static __device__ unsigned long long embed_bad_row[STARPU_NMAXWORKERS];

// y (rows,C) = wte[id] + wpe[r % T]; bad ids: NaN row, lowest bad row in *bad
static __global__ void embed_fwd_kernel(float *y, unsigned long long *bad, const float *ids, const float *wte,
					const float *wpe, size_t n, int T, int V, int C)
{
	size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
	if (i >= n)
		return;
	const size_t r = i / (size_t)C, c = i % (size_t)C;
	const float id = ids[r];
	if (!dnn_embed_id_ok(id, V)) {
		y[i] = nanf("");
		if (c == 0)
			atomicMin(bad, (unsigned long long)r);
		return;
	}
	y[i] = wte[(size_t)id * C + c] + wpe[(r % (size_t)T) * C + c];
}

// dwpe (T,C) += sum over s in order of dy (N,T,C); one thread per (t, c)
static __global__ void embed_bwd_wpe_kernel(float *dwpe, const float *dy, int N, int T, int C)
{
	size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
	if (i >= (size_t)T * C)
		return;
	float acc = dwpe[i];
	for (int s = 0; s < N; s++)
		acc += dy[(size_t)s * T * C + i];
	dwpe[i] = acc;
}

// dwte (V,C) += dy rows by id, in row order; one block of EMBED_THREADS per row, the id's first
// row owns it
static __global__ void embed_bwd_wte_kernel(float *dwte, const float *ids, const float *dy, size_t rows, int V, int C)
{
	__shared__ int s_row[EMBED_TILE];        // the tile's rows with this id, in order (offsets in the tile)
	__shared__ int s_at[EMBED_THREADS + 1];  // where each thread's matches go; [EMBED_THREADS]: their count
	const int per = EMBED_TILE / EMBED_THREADS, tid = threadIdx.x;
	const size_t r = blockIdx.x;
	const float id = ids[r];
	if (!dnn_embed_id_ok(id, V))
		return; /* the whole block: id is the block's */
	// 1. an earlier row with this id owns it: the block's threads look at rows [0, r) side by side
	for (size_t base = 0; base < r; base += EMBED_THREADS) {
		const size_t j = base + tid;
		if (__syncthreads_or(j < r && ids[j] == id))
			return; /* the same answer in every thread */
	}
	// 2. the owner walks rows r, r+1, ... tile by tile: each thread finds the matches among its
	//    `per` consecutive rows, a scan of their counts places them in row order, then all threads
	//    add those rows of dy in that order, one channel each
	float *e = dwte + (size_t)id * C;
	for (size_t base = r; base < rows; base += EMBED_TILE) {
		const size_t lo = base + (size_t)tid * per;
		int n = 0;
		for (int k = 0; k < per; k++)
			n += lo + k < rows && ids[lo + k] == id;
		s_at[tid] = n;
		__syncthreads();
		if (tid == 0) /* exclusive scan of EMBED_THREADS counts: small beside the tile's work */
			for (int t = 0, acc = 0; t <= EMBED_THREADS; t++) {
				const int c = t < EMBED_THREADS ? s_at[t] : 0;
				s_at[t] = acc, acc += c;
			}
		__syncthreads();
		for (int k = 0, o = s_at[tid]; k < per; k++)
			if (lo + k < rows && ids[lo + k] == id)
				s_row[o++] = (int)(lo + k - base);
		__syncthreads();
		for (int k = 0; k < s_at[EMBED_THREADS]; k++) {
			const float *g = dy + (base + s_row[k]) * (size_t)C;
			for (int c = tid; c < C; c += EMBED_THREADS)
				e[c] += g[c];
		}
		__syncthreads(); /* s_row and s_at are the next tile's */
	}
}

extern "C" void dnn_embed_fwd_cuda(void *buffers[], void *cl_arg)
{
	const dnn_embed_args *a = (const dnn_embed_args *)cl_arg;
	const size_t rows = (size_t)a->N * a->T, n = rows * a->C;
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[0]) == rows);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[1]) == (size_t)a->V * a->C);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[2]) == (size_t)a->T * a->C);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[3]) == n);
	if (n == 0)
		return;
	const float *ids = (const float *)STARPU_VECTOR_GET_PTR(buffers[0]); // (rows)
	cudaStream_t stream = starpu_cuda_get_local_stream();
	unsigned long long *slots, *bad;
	DNN_CUDA_CHECK(cudaGetSymbolAddress((void **)&slots, embed_bad_row));
	const int wid = starpu_worker_get_id();
	bad = slots + (wid > 0 ? wid : 0);
	DNN_CUDA_CHECK(cudaMemsetAsync(bad, 0xff, sizeof(*bad), stream)); /* no bad row */
	embed_fwd_kernel<<<DNN_CUDA_BLOCKS(n), 256, 0, stream>>>(
		(float *)STARPU_VECTOR_GET_PTR(buffers[3]), bad, ids, (const float *)STARPU_VECTOR_GET_PTR(buffers[1]),
		(const float *)STARPU_VECTOR_GET_PTR(buffers[2]), n, a->T, a->V, a->C);
	DNN_CUDA_CHECK(cudaGetLastError());
	unsigned long long row = 0;
	DNN_CUDA_CHECK(cudaMemcpyAsync(&row, bad, sizeof(row), cudaMemcpyDeviceToHost, stream));
	DNN_CUDA_CHECK(cudaStreamSynchronize(stream));
	if (row >= rows)
		return;
	float id = 0.0f;
	DNN_CUDA_CHECK(cudaMemcpyAsync(&id, ids + row, sizeof(id), cudaMemcpyDeviceToHost, stream));
	DNN_CUDA_CHECK(cudaStreamSynchronize(stream));
	dnn_worker_error("embed: token id %g of row %llu (sample %llu, token %llu) is not an integer in [0, %d)",
			 (double)id, row, row / a->T, row % a->T, a->V);
}

extern "C" void dnn_embed_bwd_cuda(void *buffers[], void *cl_arg)
{
	const dnn_embed_args *a = (const dnn_embed_args *)cl_arg;
	const size_t rows = (size_t)a->N * a->T;
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[0]) == rows);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[1]) == rows * a->C);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[2]) == (size_t)a->V * a->C);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[3]) == (size_t)a->T * a->C);
	if (rows == 0 || a->C == 0)
		return;
	const float *ids = (const float *)STARPU_VECTOR_GET_PTR(buffers[0]); // (rows)
	const float *dy = (const float *)STARPU_VECTOR_GET_PTR(buffers[1]);  // (rows,C)
	cudaStream_t stream = starpu_cuda_get_local_stream();
	const size_t tc = (size_t)a->T * a->C;
	embed_bwd_wpe_kernel<<<DNN_CUDA_BLOCKS(tc), 256, 0, stream>>>((float *)STARPU_VECTOR_GET_PTR(buffers[3]), dy,
									  a->N, a->T, a->C);
	DNN_CUDA_CHECK(cudaGetLastError());
	embed_bwd_wte_kernel<<<(unsigned)rows, EMBED_THREADS, 0, stream>>>((float *)STARPU_VECTOR_GET_PTR(buffers[2]),
									   ids, dy, rows, a->V, a->C);
	DNN_CUDA_CHECK(cudaGetLastError());
}
