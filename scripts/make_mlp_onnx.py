"""Writes the main job's model: a small MLP as ONNX, with a symbolic batch dimension.

    /usr/bin/python3 scripts/make_mlp_onnx.py OUT.onnx

x[batch, 64] -> Gemm(128) -> Relu -> MatMul(10) + bias -> Softmax. Weights are random with a
fixed seed, so the file is the same on every machine. Uses Debian's python3-onnx and numpy.
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def main(path):
    rng = np.random.default_rng(7)
    w1 = numpy_helper.from_array(rng.normal(0, 0.2, (64, 128)).astype(np.float32), "fc1.w")
    b1 = numpy_helper.from_array(rng.normal(0, 0.2, (128,)).astype(np.float32), "fc1.b")
    w2 = numpy_helper.from_array(rng.normal(0, 0.2, (128, 10)).astype(np.float32), "fc2.w")
    b2 = numpy_helper.from_array(rng.normal(0, 0.2, (10,)).astype(np.float32), "fc2.b")
    nodes = [
        helper.make_node("Gemm", ["x", "fc1.w", "fc1.b"], ["h"], name="fc1"),
        helper.make_node("Relu", ["h"], ["a"], name="act1"),
        helper.make_node("MatMul", ["a", "fc2.w"], ["m"], name="fc2"),
        helper.make_node("Add", ["m", "fc2.b"], ["logits"], name="fc2.bias"),
        helper.make_node("Softmax", ["logits"], ["probs"], name="probs", axis=-1),
    ]
    graph = helper.make_graph(
        nodes,
        "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 64])],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["batch", 10])],
        [w1, b1, w2, b2],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                              producer_name="kiln scripts/make_mlp_onnx.py")
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, path)


if __name__ == "__main__":
    main(sys.argv[1])
