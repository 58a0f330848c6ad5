#!/usr/bin/env python3
"""The built-in starpu-anp nets written in TensorFlow/Keras, and a training-throughput benchmark.

The definitions mirror graph/nets/*.net (docs/net-format.md) and bench/pytorch_nets.py layer for
layer, as Keras functional models in channels-last layout (TensorFlow's native one on CPU):
  - lenet5: conv 1->6 k5 pad2 (bias), relu, maxpool 2, conv 6->16 k5 (bias), relu, maxpool 2,
    dense 400->120, relu, dense 120->84, relu, dense 84->10;
  - resnet8 / resnet20: CIFAR-style ResNet (6n+2, n = 1 / 3), 16-channel 3x3 stem, basic blocks
    of 16/32/64 channels, projection shortcuts (1x1 conv + batch norm) where the shape changes,
    convolutions without bias, global average pool, dense 64->10;
  - padding exactly as the .net files: symmetric 1 for the 3x3 convs (Keras "same" for stride 1;
    an explicit ZeroPadding2D(1) + "valid" for stride 2, where "same" would pad bottom/right
    only), 2 for lenet5's c1;
  - batch norm with PyTorch's constants (momentum 0.1, i.e. Keras momentum 0.9; eps 1e-5);
  - SGD with momentum 0.9, lr 0.05, and weight decay 5e-4 on conv/dense kernels only, added to
    the gradient (PyTorch's coupled form, as starpu-anp's sgd rule in codelets/optim.h), not
    Keras's decoupled one;
  - loss: softmax cross-entropy on logits averaged over the batch.
Keras's default initialisers (Glorot uniform) are kept: they do not change the work per step.

The training step is a tf.function (graph mode, XLA off: Keras 3 also leaves XLA off by default
on a CPU-only machine) doing forward, loss, backward and the SGD update.

Run:  python bench/tf_nets.py --net resnet20 --batch 64 --threads 2 --steps 10
--threads N sets tf.config.threading intra-op threads to N and inter-op threads to --inter-op
(default: N as well). It prints one line like starpu_anp bench's:
  result: framework=tensorflow tf=2.x net=resnet20 batch=64 threads=2 params=272474 ... images_per_s=...
--mixed-precision bf16 sets Keras's global policy "mixed_bfloat16" before the model is built:
layers compute in bf16 on fp32 variables (the optimiser and its state stay fp32), and the logits
are cast to fp32 for the loss, the counterpart of starpu_anp --precision bf16
(bench/compare_frameworks.sh --precision bf16); seen working on CPU with TensorFlow 2.21.
`--params` prints only "NAME PARAMS" (trainable parameters) for every net.
Data are synthetic (random pixels and labels), generated once before timing, as in
starpu_anp bench; no data loading is timed.
"""
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402
import keras  # noqa: E402
from keras import layers  # noqa: E402

from bench_timing import common_parser, time_steps  # noqa: E402  (bench/bench_timing.py, beside this file)

BN = dict(momentum=0.9, epsilon=1e-5)


def conv(x, out, k, stride=1, pad=0, bias=False, name=None):
    """A conv with symmetric zero padding `pad`, as the .net files and PyTorch."""
    if pad and (stride == 1 and 2 * pad == k - 1):
        return layers.Conv2D(out, k, strides=stride, padding="same", use_bias=bias, name=name)(x)
    if pad:
        x = layers.ZeroPadding2D(pad)(x)
    return layers.Conv2D(out, k, strides=stride, padding="valid", use_bias=bias, name=name)(x)


def lenet5():
    """graph/nets/lenet5.net: 28x28x1 -> 10, 61,706 parameters."""
    x = inp = keras.Input((28, 28, 1))
    x = layers.ReLU()(conv(x, 6, 5, pad=2, bias=True, name="c1"))
    x = layers.MaxPooling2D(2, 2)(x)
    x = layers.ReLU()(conv(x, 16, 5, bias=True, name="c2"))
    x = layers.MaxPooling2D(2, 2)(x)
    x = layers.Flatten()(x)
    x = layers.Dense(120, activation="relu", name="f1")(x)
    x = layers.Dense(84, activation="relu", name="f2")(x)
    return keras.Model(inp, layers.Dense(10, name="f3")(x), name="lenet5")


def basic_block(x, cin, cout, stride, name):
    """gen_nets.py basic_block: conv3x3-bn-relu-conv3x3-bn (+ projection shortcut), add, relu."""
    h = conv(x, cout, 3, stride, 1, name=name + "_a")
    h = layers.ReLU()(layers.BatchNormalization(**BN, name=name + "_a_bn")(h))
    h = conv(h, cout, 3, 1, 1, name=name + "_b")
    h = layers.BatchNormalization(**BN, name=name + "_b_bn")(h)
    sc = x
    if stride != 1 or cin != cout:
        sc = conv(x, cout, 1, stride, 0, name=name + "_sc")
        sc = layers.BatchNormalization(**BN, name=name + "_sc_bn")(sc)
    return layers.ReLU()(layers.Add()([h, sc]))


def cifar_resnet(shape, n, classes=10, name="resnet"):
    """gen_nets.py cifar_resnet: stem conv3x3(16)-bn-relu, 3 stages x n blocks, avgpool, fc."""
    x = inp = keras.Input(shape)
    x = conv(x, 16, 3, 1, 1, name="stem")
    x = layers.ReLU()(layers.BatchNormalization(**BN, name="stem_bn")(x))
    cin = 16
    for s, width in enumerate([16, 32, 64]):
        for b in range(n):
            x = basic_block(x, cin, width, 2 if (s > 0 and b == 0) else 1, f"s{s + 1}b{b + 1}")
            cin = width
    x = layers.GlobalAveragePooling2D()(x)
    return keras.Model(inp, layers.Dense(classes, name="fc")(x), name=name)


# name -> (constructor, input shape H, W, C)
NETS = {
    "lenet5": (lenet5, (28, 28, 1)),
    "resnet8": (lambda: cifar_resnet((28, 28, 1), 1, name="resnet8"), (28, 28, 1)),
    "resnet20": (lambda: cifar_resnet((32, 32, 3), 3, name="resnet20"), (32, 32, 3)),
}


def param_count(model):
    """Trainable parameters (batch norm's moving statistics are not parameters)."""
    return sum(int(tf.size(v)) for v in model.trainable_variables)


def bench(net, batch, steps, warmup, max_seconds=0.0, seed=1, lr=0.05, momentum=0.9, wd=5e-4, mixed="off"):
    keras.utils.set_random_seed(seed)
    if mixed == "bf16":
        keras.mixed_precision.set_global_policy("mixed_bfloat16")
    ctor, shape = NETS[net]
    model = ctor()
    tvars = model.trainable_variables
    # weight decay on conv/dense kernels only (not biases, not batch norm), as starpu-anp
    decay = [("kernel" in v.path) for v in tvars]
    opt = keras.optimizers.SGD(learning_rate=lr, momentum=momentum)
    opt.build(tvars)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    xs = [tf.random.normal((batch,) + shape) for _ in range(4)]
    ys = [tf.random.uniform((batch,), 0, 10, dtype=tf.int32) for _ in range(4)]

    @tf.function(jit_compile=False)
    def step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, tf.cast(model(x, training=True), tf.float32))  # fp32 loss, also under bf16
        grads = tape.gradient(loss, tvars)
        grads = [g + wd * v if d else g for g, v, d in zip(grads, tvars, decay)]
        opt.apply_gradients(zip(grads, tvars))
        return loss

    # the first call traces the graph: never timed
    wall, loss, done = time_steps(lambda i: step(xs[i % 4], ys[i % 4]), steps, warmup, max_seconds,
                                  lambda loss: float(loss.numpy()), min_warmup=1)
    return batch * done / wall, wall, loss, done, param_count(model)


def main():
    ap = common_parser(__doc__, NETS, "intra-op threads", "untimed steps first (at least 1: tracing)")
    ap.add_argument("--inter-op", type=int, default=0, help="inter-op threads (default: --threads)")
    ap.add_argument("--mixed-precision", choices=["off", "bf16"], default="off",
                    help="bf16: Keras's 'mixed_bfloat16' policy (bf16 compute, fp32 variables) [off]")
    ap.add_argument("--params", action="store_true", help="print 'NAME PARAMS' for every net and exit")
    a = ap.parse_args()
    if a.params:
        for name in sorted(NETS):
            print(name, param_count(NETS[name][0]()))
        return 0
    if not a.net:
        ap.error("--net is required (or --params)")
    inter = a.inter_op or a.threads
    tf.config.threading.set_intra_op_parallelism_threads(a.threads)
    tf.config.threading.set_inter_op_parallelism_threads(inter)
    ips, wall, loss, done, params = bench(a.net, a.batch, a.steps, a.warmup, a.max_seconds, mixed=a.mixed_precision)
    print(f"result: framework=tensorflow tf={tf.__version__} keras={keras.__version__} net={a.net} "
          f"batch={a.batch} threads={a.threads} inter_op={inter} mixed_precision={a.mixed_precision} "
          f"params={params} steps={done} "
          f"train_loss={loss:.6f} images_per_s={ips:.1f} wall_s={wall:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
