/* maxpool.cu — CUDA side of max pooling: cuDNN pooling forward/backward on the worker's stream.
 * cuDNN's max pooling never selects padding cells (same as our -inf padding), and its backward
 * recomputes the argmax from x and y, as the CPU kernel does. */
#include <starpu.h>

#include "dnn_cuda.h"

extern "C" {
#include "maxpool.h"
}

struct maxpool_desc {
	cudnnTensorDescriptor_t x, y;
	cudnnPoolingDescriptor_t pool;
};

static void maxpool_desc_create(maxpool_desc *d, const dnn_maxpool_args *a)
{
	DNN_CUDNN_CHECK(cudnnCreateTensorDescriptor(&d->x));
	DNN_CUDNN_CHECK(cudnnCreateTensorDescriptor(&d->y));
	DNN_CUDNN_CHECK(cudnnCreatePoolingDescriptor(&d->pool));
	DNN_CUDNN_CHECK(cudnnSetTensor4dDescriptor(d->x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, a->N, a->C,
						   a->H, a->W));
	DNN_CUDNN_CHECK(cudnnSetTensor4dDescriptor(d->y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, a->N, a->C,
						   a->P, a->Q));
	DNN_CUDNN_CHECK(cudnnSetPooling2dDescriptor(d->pool, CUDNN_POOLING_MAX, CUDNN_NOT_PROPAGATE_NAN,
						    a->k, a->k, a->pad, a->pad, a->stride, a->stride));
	int n, c, p, q;
	DNN_CUDNN_CHECK(cudnnGetPooling2dForwardOutputDim(d->pool, d->x, &n, &c, &p, &q));
	STARPU_ASSERT_MSG(n == a->N && c == a->C && p == a->P && q == a->Q,
			  "cuDNN pooling output %dx%dx%dx%d != args %dx%dx%dx%d", n, c, p, q, a->N, a->C,
			  a->P, a->Q);
}

static void maxpool_desc_destroy(maxpool_desc *d)
{
	DNN_CUDNN_CHECK(cudnnDestroyPoolingDescriptor(d->pool));
	DNN_CUDNN_CHECK(cudnnDestroyTensorDescriptor(d->y));
	DNN_CUDNN_CHECK(cudnnDestroyTensorDescriptor(d->x));
}

// (R x (N,C,H,W), W y (N,C,P,Q))
extern "C" void dnn_maxpool_fwd_cuda(void *buffers[], void *cl_arg)
{
	const dnn_maxpool_args *a = (const dnn_maxpool_args *)cl_arg;
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[0]) == (size_t)a->N * a->C * a->H * a->W);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[1]) == (size_t)a->N * a->C * a->P * a->Q);
	const float *x = (const float *)STARPU_VECTOR_GET_PTR(buffers[0]);
	float *y = (float *)STARPU_VECTOR_GET_PTR(buffers[1]);
	maxpool_desc d;
	maxpool_desc_create(&d, a);
	const float one = 1.0f, zero = 0.0f;
	DNN_CUDNN_CHECK(cudnnPoolingForward(dnn_cudnn_handle(), d.pool, &one, d.x, x, &zero, d.y, y));
	maxpool_desc_destroy(&d);
}

// (R x, R y, R dy, W|RW dx): dx = dpool + (accumulate_dx ? dx : 0)
extern "C" void dnn_maxpool_bwd_cuda(void *buffers[], void *cl_arg)
{
	const dnn_maxpool_args *a = (const dnn_maxpool_args *)cl_arg;
	size_t nx = (size_t)a->N * a->C * a->H * a->W, ny = (size_t)a->N * a->C * a->P * a->Q;
	STARPU_ASSERT(STARPU_TASK_GET_NBUFFERS(starpu_task_get_current()) == 4);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[0]) == nx);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[1]) == ny);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[2]) == ny);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[3]) == nx);
	const float *x = (const float *)STARPU_VECTOR_GET_PTR(buffers[0]);
	const float *y = (const float *)STARPU_VECTOR_GET_PTR(buffers[1]);
	const float *dy = (const float *)STARPU_VECTOR_GET_PTR(buffers[2]);
	float *dx = (float *)STARPU_VECTOR_GET_PTR(buffers[3]);
	maxpool_desc d;
	maxpool_desc_create(&d, a);
	const float one = 1.0f, beta = a->accumulate_dx ? 1.0f : 0.0f;
	DNN_CUDNN_CHECK(cudnnPoolingBackward(dnn_cudnn_handle(), d.pool, &one, d.y, y, d.y, dy, d.x, x,
					     &beta, d.x, dx));
	maxpool_desc_destroy(&d);
}
