/* onnx_export.h — a model in eval mode as an ONNX file (opset 17), for `starpu_anp export`.
 *
 * Ops: conv -> Conv, batchnorm -> BatchNormalization (running statistics), relu -> Relu,
 * maxpool -> MaxPool, avgpool (global) -> GlobalAveragePool, dense -> Gemm (transB, after a
 * Flatten of a 4-D input), add -> Add / Sum, dropout -> Identity, softmax_xent -> Softmax.
 * Input "pixels" (float32 N x C x H x W, values 0-255), the normalisation (Mul, Sub) inside;
 * output "probabilities" (N x classes). metadata_props: class_names (JSON list), input_mean,
 * input_std, short_side, input (how to make the pixels), net (the net text). */
#ifndef DNN_ONNX_EXPORT_H
#define DNN_ONNX_EXPORT_H
#include <stddef.h>

#include "model.h"

typedef struct {
	int nodes, initializers, opset;
	size_t bytes;
} dnn_onnx_stats;

/* Writes m (host copies of its parameters and statistics) to path atomically. class_names: NULL
 * (then class0, class1, ...) or g->classes names. A node that has no ONNX equivalent fails the
 * export with one line naming it. Returns 0, or -1 with one line in err naming path. */
int dnn_onnx_export(const dnn_model *m, const char *path, char *const *class_names, char *err, size_t errlen,
		    dnn_onnx_stats *stats);
#endif
