"""Writes kiln's side-by-side model set (issue 13) as ONNX files into a folder.

    /usr/bin/python3 bench/vs_ort/make_models.py OUT_DIR

Every model has symbolic batch (and sequence or image) dims, random weights fixed by a seed,
and opset 17. The set: an MLP, a transformer encoder layer (attention + erf-GELU feed-forward,
LayerNormalization), an elementwise chain with transcendentals (x * sigmoid(x) + residual,
then LayerNormalization), a small CNN, a MobileNet-style net (depthwise convs, hard-swish,
squeeze-excite), a conv net with symbolic height and width, and a segmentation head like a text
detector's (strided convs down, 2x2 stride-2 ConvTransposes back up to a sigmoid map), and a
ResNet-18-style backbone over images of any size. Needs Debian's python3-onnx and numpy
(/usr/bin/python3).
"""
import os
import sys

import numpy as np
import onnx

from ocr_models import MODELS as OCR_MODELS
from onnx_graph import Graph


def Mlp():
    g = Graph(1)
    h = "x"
    for i, (a, b) in enumerate([(784, 512), (512, 512), (512, 10)]):
        h = g.op("Gemm", [h, g.weight([a, b]), g.weight([b], 0.1)])
        if i < 2:
            h = g.op("Relu", [h])
    return g.model("mlp", [("x", ["batch", 784])], g.op("Softmax", [h], axis=-1), ["batch", 10])


def Dense(g, x, a, b):
    return g.op("Add", [g.op("MatMul", [x, g.weight([a, b])]), g.weight([b], 0.1)])


def LayerNorm(g, x, d):
    return g.op("LayerNormalization", [x, g.weight([d], 1.0), g.weight([d], 0.1)], axis=-1)


def Encoder():
    d, heads, dh, ff = 256, 4, 64, 1024
    g = Graph(2)

    def split(t, perm):
        r = g.op("Reshape", [t, g.const([0, 0, heads, dh])])
        return g.op("Transpose", [r], perm=perm)

    q = split(Dense(g, "x", d, d), [0, 2, 1, 3])
    k = split(Dense(g, "x", d, d), [0, 2, 3, 1])
    v = split(Dense(g, "x", d, d), [0, 2, 1, 3])
    s = g.op("Mul", [g.op("MatMul", [q, k]), g.const(1.0 / np.sqrt(dh), np.float32)])
    a = g.op("MatMul", [g.op("Softmax", [s], axis=-1), v])
    a = g.op("Reshape", [g.op("Transpose", [a], perm=[0, 2, 1, 3]), g.const([0, 0, d])])
    h = LayerNorm(g, g.op("Add", ["x", Dense(g, a, d, d)]), d)
    f = Dense(g, h, d, ff)
    # GELU with erf: 0.5 * f * (1 + erf(f / sqrt(2)))
    e = g.op("Erf", [g.op("Mul", [f, g.const(1 / np.sqrt(2), np.float32)])])
    f = g.op("Mul", [g.op("Mul", [f, g.op("Add", [e, g.const(1.0, np.float32)])]),
                     g.const(0.5, np.float32)])
    out = LayerNorm(g, g.op("Add", [h, Dense(g, f, ff, d)]), d)
    return g.model("encoder", [("x", ["batch", "seq", d])], out, ["batch", "seq", d])


def Chain():
    d = 768
    g = Graph(3)
    s = g.op("Mul", ["x", g.op("Sigmoid", ["x"])])  # SiLU
    s = g.op("Add", [g.op("Mul", [s, g.weight([d], 1.0)]), "r"])
    out = LayerNorm(g, s, d)
    return g.model("chain", [("x", ["batch", "seq", d]), ("r", ["batch", "seq", d])], out,
                   ["batch", "seq", d])


def ConvBnRelu(g, x, cin, cout, k=3, stride=1, group=1, act="Relu"):
    y = g.op("Conv", [x, g.weight([cout, cin // group, k, k]), g.weight([cout], 0.1)],
             kernel_shape=[k, k], pads=[k // 2] * 4, strides=[stride, stride], group=group)
    return g.op(act, [y]) if act else y


def SmallCnn():
    g = Graph(4)
    h = ConvBnRelu(g, "x", 3, 32)
    h = g.op("MaxPool", [h], kernel_shape=[2, 2], strides=[2, 2])
    h = ConvBnRelu(g, h, 32, 64)
    h = g.op("MaxPool", [h], kernel_shape=[2, 2], strides=[2, 2])
    h = ConvBnRelu(g, h, 64, 128)
    h = g.op("Flatten", [g.op("GlobalAveragePool", [h])])
    out = g.op("Gemm", [h, g.weight([128, 10]), g.weight([10], 0.1)])
    return g.model("small_cnn", [("x", ["batch", 3, 32, 32])], out, ["batch", 10])


def PoolCnn():
    # The small CNN over images of any size, with overlapping padded pools as well.
    g = Graph(8)
    h = ConvBnRelu(g, "x", 3, 32)
    h = g.op("MaxPool", [h], kernel_shape=[2, 2], strides=[2, 2])
    h = ConvBnRelu(g, h, 32, 64)
    h = g.op("MaxPool", [h], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    h = ConvBnRelu(g, h, 64, 64)
    h = g.op("AveragePool", [h], kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1])
    h = ConvBnRelu(g, h, 64, 128)
    h = g.op("Flatten", [g.op("GlobalAveragePool", [h])])
    out = g.op("Gemm", [h, g.weight([128, 10]), g.weight([10], 0.1)])
    return g.model("pool_cnn", [("x", ["batch", 3, "height", "width"])], out, ["batch", 10])


def MobileNetLike():
    g = Graph(5)
    h = ConvBnRelu(g, "x", 3, 16, stride=2, act="HardSwish")
    # (in, expand, out, stride, squeeze-excite)
    for cin, exp, cout, stride, se in [(16, 64, 24, 2, False), (24, 72, 24, 1, False),
                                       (24, 96, 40, 2, True), (40, 240, 40, 1, True),
                                       (40, 240, 80, 2, False), (80, 480, 112, 1, True),
                                       (112, 672, 160, 2, True)]:
        x = h
        h = ConvBnRelu(g, h, cin, exp, k=1, act="HardSwish")
        h = ConvBnRelu(g, h, exp, exp, k=3, stride=stride, group=exp, act="HardSwish")
        if se:
            s = g.op("GlobalAveragePool", [h])
            s = g.op("Relu", [g.op("Conv", [s, g.weight([exp // 4, exp, 1, 1]),
                                            g.weight([exp // 4], 0.1)])])
            s = g.op("HardSigmoid", [g.op("Conv", [s, g.weight([exp, exp // 4, 1, 1]),
                                                   g.weight([exp], 0.1)])])
            h = g.op("Mul", [h, s])
        h = ConvBnRelu(g, h, exp, cout, k=1, act=None)
        if stride == 1 and cin == cout:
            h = g.op("Add", [h, x])
    h = ConvBnRelu(g, h, 160, 960, k=1, act="HardSwish")
    h = g.op("Flatten", [g.op("GlobalAveragePool", [h])])
    out = g.op("Gemm", [h, g.weight([960, 1000]), g.weight([1000], 0.1)])
    return g.model("mobilenet_like", [("x", ["batch", 3, 224, 224])], out, ["batch", 1000])


def DynamicConv():
    g = Graph(6)
    h = ConvBnRelu(g, "x", 3, 16, stride=2)
    h = ConvBnRelu(g, h, 16, 32)
    h = ConvBnRelu(g, h, 32, 32, stride=2)
    h = ConvBnRelu(g, h, 32, 64)
    out = g.op("Conv", [h, g.weight([8, 64, 1, 1]), g.weight([8], 0.1)], kernel_shape=[1, 1])
    return g.model("dynamic_conv", [("x", ["batch", 3, "height", "width"])], out,
                   ["batch", 8, "h4", "w4"])


def SegHead():
    g = Graph(7)
    h = ConvBnRelu(g, "x", 3, 16, stride=2)
    h = ConvBnRelu(g, h, 16, 32, stride=2)
    h = ConvBnRelu(g, h, 32, 64)
    h = g.op("Relu", [g.op("ConvTranspose", [h, g.weight([64, 16, 2, 2]), g.weight([16], 0.1)],
                           kernel_shape=[2, 2], strides=[2, 2])])
    out = g.op("Sigmoid", [g.op("ConvTranspose", [h, g.weight([16, 1, 2, 2]), g.weight([1], 0.1)],
                                kernel_shape=[2, 2], strides=[2, 2])])
    return g.model("seg_head", [("x", ["batch", 3, "height", "width"])], out,
                   ["batch", 1, "height", "width"])


def ResNetLike():
    # ResNet-18's layout (a 7x7 stride-2 stem, a 3x3 max pool, four stages of two basic blocks of
    # 64, 128, 256 and 512 channels, 1x1 stride-2 shortcuts), BatchNorm folded into the convs:
    # its 3x3 convs of 128 to 512 channels are the bulk of a classifier or detector backbone.
    g = Graph(9)
    h = ConvBnRelu(g, "x", 3, 64, k=7, stride=2)
    h = g.op("MaxPool", [h], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    cin = 64
    for cout, stride in [(64, 1), (128, 2), (256, 2), (512, 2)]:
        for block in range(2):
            s = stride if block == 0 else 1
            y = ConvBnRelu(g, h, cin, cout, stride=s)
            y = ConvBnRelu(g, y, cout, cout, act=None)
            short = h if s == 1 and cin == cout else ConvBnRelu(g, h, cin, cout, k=1, stride=s,
                                                                 act=None)
            h = g.op("Relu", [g.op("Add", [y, short])])
            cin = cout
    h = g.op("Flatten", [g.op("GlobalAveragePool", [h])])
    out = g.op("Gemm", [h, g.weight([512, 1000]), g.weight([1000], 0.1)])
    return g.model("resnet_like", [("x", ["batch", 3, "height", "width"])], out, ["batch", 1000])


MODELS = {"mlp": Mlp, "encoder": Encoder, "chain": Chain, "small_cnn": SmallCnn,
          "pool_cnn": PoolCnn, "mobilenet_like": MobileNetLike, "dynamic_conv": DynamicConv,
          "seg_head": SegHead, "resnet_like": ResNetLike, **OCR_MODELS}


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: make_models.py OUT_DIR")
    os.makedirs(sys.argv[1], exist_ok=True)
    for name, make in MODELS.items():
        path = os.path.join(sys.argv[1], name + ".onnx")
        onnx.save(make(), path)
        print(path)


if __name__ == "__main__":
    main()
