"""Models shaped like the third-party vision models issue 13 was measured on: a text detector
(MobileNetV3 backbone, FPN neck, DB head; 320x320 and larger), a text recognizer (a MobileNetV1-
style backbone with (2, 1) strides, an SVTR attention neck and a CTC head over 48 x W strips) and
a text-direction classifier (a small MobileNetV3 at 48 x 192). They keep what exporters write and
what make_models.py's hand-made models do not: BatchNormalization beside bias-free convs, Resize
for upsampling, HardSwish/HardSigmoid, Swish as x * Sigmoid(x), 5x5 depthwise convs, non-square
strides and pools, LayerNorm + attention over the image's columns, a 6625-class head. Weights
are random (seeded): the figures are latency, not accuracy.
"""
import numpy as np

from onnx_graph import Graph


def MakeDivisible(v, divisor=8):
    return max(divisor, int(v + divisor / 2) // divisor * divisor)


def BatchNorm(g, x, c):
    scale = g.weight([c], 1.0)
    bias = g.weight([c], 0.1)
    mean = g.weight([c], 0.1)
    var = g.const(np.abs(g.rng.normal(1.0, 0.1, size=[c])).astype(np.float32) + 0.1, np.float32)
    return g.op("BatchNormalization", [x, scale, bias, mean, var], epsilon=1e-5)


def Act(g, x, act):
    if act == "swish":
        return g.op("Mul", [x, g.op("Sigmoid", [x])])
    if act == "hardswish":
        return g.op("HardSwish", [x])
    if act == "relu":
        return g.op("Relu", [x])
    return x


def ConvBn(g, x, cin, cout, k=3, stride=1, group=1, act="relu"):
    """A bias-free Conv, then BatchNormalization and the activation, as exporters write it."""
    strides = list(stride) if isinstance(stride, (tuple, list)) else [stride, stride]
    y = g.op("Conv", [x, g.weight([cout, cin // group, k, k])], kernel_shape=[k, k],
             pads=[k // 2] * 4, strides=strides, group=group)
    return Act(g, BatchNorm(g, y, cout), act)


def SqueezeExcite(g, x, c, reduction=4):
    s = g.op("GlobalAveragePool", [x])
    s = g.op("Relu", [g.op("Conv", [s, g.weight([c // reduction, c, 1, 1]),
                                    g.weight([c // reduction], 0.1)])])
    s = g.op("Conv", [s, g.weight([c, c // reduction, 1, 1]), g.weight([c], 0.1)])
    return g.op("Mul", [x, g.op("HardSigmoid", [s], alpha=0.2, beta=0.5)])


def MobileNetV3(g, x, cfg, scale, stem_stride=2):
    """Inverted residual blocks (k, expand, out, se, act, stride); returns every block's output
    with its channel count, so a neck can take the stride-4..32 features."""
    cin = MakeDivisible(16 * scale)
    h = ConvBn(g, x, 3, cin, stride=stem_stride, act="hardswish")
    outs = []
    for k, exp, c, se, act, stride in cfg:
        exp, c = MakeDivisible(scale * exp), MakeDivisible(scale * c)
        y = ConvBn(g, h, cin, exp, k=1, act=act)
        y = ConvBn(g, y, exp, exp, k=k, stride=stride, group=exp, act=act)
        if se:
            y = SqueezeExcite(g, y, exp)
        y = ConvBn(g, y, exp, c, k=1, act=None)
        if stride == 1 and cin == c:
            y = g.op("Add", [h, y])
        h, cin = y, c
        outs.append((h, c))
    return outs


MV3_LARGE = [(3, 16, 16, False, "relu", 1), (3, 64, 24, False, "relu", 2),
             (3, 72, 24, False, "relu", 1), (5, 72, 40, True, "relu", 2),
             (5, 120, 40, True, "relu", 1), (5, 120, 40, True, "relu", 1),
             (3, 240, 80, False, "hardswish", 2), (3, 200, 80, False, "hardswish", 1),
             (3, 184, 80, False, "hardswish", 1), (3, 184, 80, False, "hardswish", 1),
             (3, 480, 112, True, "hardswish", 1), (3, 672, 112, True, "hardswish", 1),
             (5, 672, 160, True, "hardswish", 2), (5, 960, 160, True, "hardswish", 1),
             (5, 960, 160, True, "hardswish", 1)]


def Upsample(g, x, factor):
    return g.op("Resize", [x, "", g.const([1, 1, factor, factor], np.float32)], mode="nearest")


def OcrDet():
    g = Graph(11)
    blocks = MobileNetV3(g, "x", MV3_LARGE, 0.5)
    # The last block of each stride (4, 8, 16, 32); stride 32 ends with a 1x1 conv to 480.
    feats = [blocks[i] for i in (2, 5, 11)]
    last, c = blocks[-1]
    feats.append((ConvBn(g, last, c, MakeDivisible(0.5 * 960), k=1, act="hardswish"),
                  MakeDivisible(0.5 * 960)))
    d = 96
    lat = [g.op("Conv", [f, g.weight([d, c, 1, 1])], kernel_shape=[1, 1]) for f, c in feats]
    for i in (2, 1, 0):  # top-down: upsample the coarser level and add
        lat[i] = g.op("Add", [lat[i], Upsample(g, lat[i + 1], 2)])
    outs = []
    for i, t in enumerate(lat):
        p = g.op("Conv", [t, g.weight([d // 4, d, 3, 3])], kernel_shape=[3, 3], pads=[1] * 4)
        outs.append(Upsample(g, p, 2 ** i) if i else p)
    h = g.op("Concat", outs[::-1], axis=1)
    h = ConvBn(g, h, d, d // 4)
    h = g.op("ConvTranspose", [h, g.weight([d // 4, d // 4, 2, 2]), g.weight([d // 4], 0.1)],
             kernel_shape=[2, 2], strides=[2, 2])
    h = g.op("Relu", [BatchNorm(g, h, d // 4)])
    h = g.op("ConvTranspose", [h, g.weight([d // 4, 1, 2, 2]), g.weight([1], 0.1)],
             kernel_shape=[2, 2], strides=[2, 2])
    out = g.op("Sigmoid", [h])
    return g.model("ocr_det", [("x", ["batch", 3, "height", "width"])], out,
                   ["batch", 1, "height", "width"])


def DepthwiseSeparable(g, x, cin, cout, stride, k=3, se=False):
    h = ConvBn(g, x, cin, cin, k=k, stride=stride, group=cin, act="hardswish")
    if se:
        h = SqueezeExcite(g, h, cin)
    return ConvBn(g, h, cin, cout, k=1, act="hardswish")


def Linear(g, x, a, b):
    return g.op("Add", [g.op("MatMul", [x, g.weight([a, b])]), g.weight([b], 0.1)])


def LayerNorm(g, x, d):
    return g.op("LayerNormalization", [x, g.weight([d], 1.0), g.weight([d], 0.1)], axis=-1,
                epsilon=1e-5)


def SvtrBlock(g, x, d, heads):
    # x: [N, L, d]. Attention as exported: one qkv product, reshaped and transposed per head.
    dh = d // heads
    qkv = g.op("Reshape", [Linear(g, LayerNorm(g, x, d), d, 3 * d), g.const([0, -1, 3, heads, dh])])
    qkv = g.op("Transpose", [qkv], perm=[2, 0, 3, 1, 4])
    q, k, v = [g.op("Squeeze", [g.op("Slice", [qkv, g.const([i]), g.const([i + 1]),
                                                g.const([0])]), g.const([0])])
               for i in range(3)]
    s = g.op("MatMul", [g.op("Mul", [q, g.const(dh ** -0.5, np.float32)]),
                        g.op("Transpose", [k], perm=[0, 1, 3, 2])])
    a = g.op("MatMul", [g.op("Softmax", [s], axis=-1), v])
    a = g.op("Reshape", [g.op("Transpose", [a], perm=[0, 2, 1, 3]), g.const([0, -1, d])])
    x = g.op("Add", [x, Linear(g, a, d, d)])
    m = Act(g, Linear(g, LayerNorm(g, x, d), d, 2 * d), "swish")
    return g.op("Add", [x, Linear(g, m, 2 * d, d)])


def OcrRec():
    g = Graph(12)
    s = 0.5
    c = lambda n: int(n * s)  # noqa: E731
    h = ConvBn(g, "x", 3, c(32), stride=2, act="hardswish")
    for cin, cout, stride in [(32, 64, 1), (64, 128, 1), (128, 128, 1), (128, 256, (2, 1)),
                              (256, 256, 1), (256, 512, (2, 1))]:
        h = DepthwiseSeparable(g, h, c(cin), c(cout), stride)
    for _ in range(5):
        h = DepthwiseSeparable(g, h, c(512), c(512), 1, k=5)
    h = DepthwiseSeparable(g, h, c(512), c(1024), (2, 1), k=5, se=True)
    h = DepthwiseSeparable(g, h, c(1024), c(1024), (1, 2), k=5, se=True)
    h = g.op("MaxPool", [h], kernel_shape=[2, 2], strides=[2, 2])  # [N, 512, 1, W/8]
    cin, hidden, dims = c(1024), 120, 64
    short = h
    z = ConvBn(g, h, cin, cin // 8, act="swish")
    z = ConvBn(g, z, cin // 8, hidden, k=1, act="swish")
    z = g.op("Transpose", [g.op("Squeeze", [z, g.const([2])])], perm=[0, 2, 1])  # [N, W, C]
    for _ in range(2):
        z = SvtrBlock(g, z, hidden, 8)
    z = LayerNorm(g, z, hidden)
    z = g.op("Unsqueeze", [g.op("Transpose", [z], perm=[0, 2, 1]), g.const([2])])
    z = ConvBn(g, z, hidden, cin, k=1, act="swish")
    z = ConvBn(g, g.op("Concat", [short, z], axis=1), 2 * cin, cin // 8, act="swish")
    z = ConvBn(g, z, cin // 8, dims, k=1, act="swish")
    seq = g.op("Transpose", [g.op("Squeeze", [z, g.const([2])])], perm=[0, 2, 1])
    out = g.op("Softmax", [Linear(g, seq, dims, 6625)], axis=-1)
    return g.model("ocr_rec", [("x", ["batch", 3, 48, "width"])], out,
                   ["batch", "steps", 6625])


MV3_SMALL = [(3, 16, 16, True, "relu", 2), (3, 72, 24, False, "relu", 2),
             (3, 88, 24, False, "relu", 1), (5, 96, 40, True, "hardswish", 2),
             (5, 240, 40, True, "hardswish", 1), (5, 240, 40, True, "hardswish", 1),
             (5, 120, 48, True, "hardswish", 1), (5, 144, 48, True, "hardswish", 1),
             (5, 288, 96, True, "hardswish", 2), (5, 576, 96, True, "hardswish", 1),
             (5, 576, 96, True, "hardswish", 1)]


def OcrCls():
    g = Graph(13)
    last, c = MobileNetV3(g, "x", MV3_SMALL, 0.35)[-1]
    h = ConvBn(g, last, c, MakeDivisible(0.35 * 576), k=1, act="hardswish")
    h = g.op("Flatten", [g.op("GlobalAveragePool", [h])])
    out = g.op("Softmax", [g.op("Gemm", [h, g.weight([MakeDivisible(0.35 * 576), 2]),
                                         g.weight([2], 0.1)])], axis=-1)
    return g.model("ocr_cls", [("x", ["batch", 3, 48, 192])], out, ["batch", 2])


MODELS = {"ocr_det": OcrDet, "ocr_rec": OcrRec, "ocr_cls": OcrCls}
