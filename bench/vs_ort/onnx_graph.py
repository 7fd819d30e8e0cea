"""The ONNX graph builder bench/vs_ort's model scripts share: nodes and initializers with
generated names, random weights fixed by a seed, opset 17."""
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


class Graph:
    """A small builder: nodes and initializers with generated names."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits, self.n = [], [], 0

    def name(self, prefix):
        self.n += 1
        return "%s_%d" % (prefix, self.n)

    def weight(self, shape, scale=None):
        fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else shape[0]
        scale = scale if scale is not None else 1.0 / np.sqrt(max(1, fan_in))
        w = (self.rng.uniform(-1, 1, size=shape) * scale).astype(np.float32)
        n = self.name("w")
        self.inits.append(numpy_helper.from_array(w, n))
        return n

    def const(self, values, dtype=np.int64):
        n = self.name("c")
        self.inits.append(numpy_helper.from_array(np.array(values, dtype=dtype), n))
        return n

    def op(self, op_type, inputs, **attrs):
        out = self.name(op_type.lower())
        self.nodes.append(helper.make_node(op_type, inputs, [out], name=out, **attrs))
        return out

    def model(self, name, inputs, output, out_shape):
        graph = helper.make_graph(
            self.nodes, name,
            [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
            [helper.make_tensor_value_info(output, TensorProto.FLOAT, out_shape)], self.inits)
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        m.ir_version = 8
        onnx.checker.check_model(m)
        return m
