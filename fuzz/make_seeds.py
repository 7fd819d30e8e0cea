"""Writes the hand-made seeds of fuzz/corpus/ (the rest are small cases copied from Debian's
libonnx-testdata): ONNX models that import (constant shape inputs, a symbolic batch, control
flow, several outputs), a few that must fail in a known way, and text IR programs.

    /usr/bin/python3 fuzz/make_seeds.py fuzz/corpus
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def model(name, nodes, inputs, outputs, inits=(), opset=13):
    graph = helper.make_graph(nodes, name, inputs, outputs, list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def init(name, array):
    return numpy_helper.from_array(np.asarray(array), name)


def onnx_seeds():
    f = TensorProto.FLOAT
    rng = np.random.default_rng(0)
    yield "mlp_batch", model(
        "mlp",
        [helper.make_node("Gemm", ["x", "w1", "b1"], ["h"], transB=1),
         helper.make_node("Relu", ["h"], ["r"]),
         helper.make_node("MatMul", ["r", "w2"], ["z"]),
         helper.make_node("Softmax", ["z"], ["y"], axis=-1)],
        [vi("x", f, ["batch", 4])], [vi("y", f, ["batch", 3])],
        [init("w1", rng.standard_normal((5, 4)).astype(np.float32)),
         init("b1", rng.standard_normal(5).astype(np.float32)),
         init("w2", rng.standard_normal((5, 3)).astype(np.float32))])
    yield "reshape_const", model(
        "reshape",
        [helper.make_node("Reshape", ["x", "s"], ["t"]),
         helper.make_node("Transpose", ["t"], ["u"], perm=[1, 0]),
         helper.make_node("ReduceSum", ["u", "axes"], ["y"], keepdims=0)],
        [vi("x", f, ["n", 6])], [vi("y", f, None)],
        [init("s", np.array([-1, 3], np.int64)), init("axes", np.array([1], np.int64))])
    then = helper.make_graph([helper.make_node("Neg", ["x"], ["o"])], "then", [],
                             [vi("o", f, None)])
    other = helper.make_graph([helper.make_node("Abs", ["x"], ["o"])], "else", [],
                              [vi("o", f, None)])
    yield "if_const", model(
        "if", [helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)],
        [vi("x", f, [3])], [vi("y", f, None)], [init("c", np.array(True))])
    body = helper.make_graph(
        [helper.make_node("Add", ["acc", "x"], ["acc2"]),
         helper.make_node("Identity", ["cond"], ["cond2"])], "body",
        [vi("i", TensorProto.INT64, []), vi("cond", TensorProto.BOOL, []), vi("acc", f, [2])],
        [vi("cond2", TensorProto.BOOL, []), vi("acc2", f, [2])])
    yield "loop_sum", model(
        "loop", [helper.make_node("Loop", ["n", "", "a0"], ["y"], body=body)],
        [vi("x", f, [2]), vi("a0", f, [2])], [vi("y", f, [2])],
        [init("n", np.array(3, np.int64))])
    yield "two_outputs", model(
        "split",
        [helper.make_node("Split", ["x", "parts"], ["a", "b"], axis=0),
         helper.make_node("Mul", ["a", "b"], ["y"])],
        [vi("x", f, [4, 2])], [vi("y", f, [2, 2]), vi("a", f, [2, 2])],
        [init("parts", np.array([2, 2], np.int64))])
    yield "conv_pool", model(
        "cnn",
        [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
         helper.make_node("MaxPool", ["c"], ["y"], kernel_shape=[2, 2], strides=[2, 2])],
        [vi("x", f, ["n", 1, 4, 4])], [vi("y", f, None)],
        [init("w", rng.standard_normal((2, 1, 3, 3)).astype(np.float32))])
    # Must fail: declared type contradicts, duplicate outputs, external data with no folder.
    yield "bad_declared_type", model(
        "bad", [helper.make_node("Relu", ["x"], ["y"])], [vi("x", f, [2])],
        [vi("y", TensorProto.INT64, [2])])
    ext = init("w", np.zeros(2, np.float32))
    ext.ClearField("raw_data")
    ext.data_location = TensorProto.EXTERNAL
    ext.external_data.add(key="location", value="w.bin")
    yield "external_no_folder", model(
        "ext", [helper.make_node("Add", ["x", "w"], ["y"])], [vi("x", f, [2])],
        [vi("y", f, [2])], [ext])


TEXT_SEEDS = {
    "mlp": """def @main(%x: f32[batch, 4], %w: f32[4, 3]) -> f32[batch, 3] {
  %h = matmul(%x, %w)
  %r = relu(%h)
  softmax(%r, axis=-1)
}
""",
    "tuple_fn": """def @main(%x: f32[2, 3]) {
  %s = sum(%x, axes=[1])
  %t = (%x, %s)
  %f = fn(%p: f32[2]) attrs{primitive=true} {
    exp(%p)
  }
  %f(%t.1)
}
""",
    "dims": """def @main(%x: f32[n, m], %y: f32[m * 2 + 1, (n + 1) // 2]) {
  %c = const(f32[2], [1.5, -2])
  %a = add(%c, const(f32[], inf))
  concat((%a, %a), axis=0)
}
def @other(%b: bool[3]) -> bool[3] {
  logical_not(%b)
}
""",
    # The type language: type parameters of each kind, explicit and inferred instantiation,
    # a constraint, ADTs (the built-in List, a user type), match and recursion.
    "poly": """def @plus<s : Shape, d : BaseType>(%a: Tensor[s, d], %b: Tensor[s, d]) {
  add(%a, %b)
}
def @id<t : Type>(%x: t) -> t {
  %x
}
def @scale<t1 : Type, t2 : Type>(%a: t1, %b: t2) -> t1 where t1 = mul(t1, t2) {
  mul(%a, %b)
}
def @twice<n : ShapeVar>(%x: f32[n, 2]) -> f32[n * 2, 2] {
  concat(%x, %x, axis=0)
}
def @main(%x: f32[3, 2], %s: f32[]) {
  (@plus<(3, 2), f32>(%x, %x), @id((%x, %s)), @scale(%x, %s), @twice<3>(%x))
}
""",
    "adt": """type Tree[a] { Leaf, Node(a, Tree[a], Tree[a]) }
def @length<a : Type>(%l: List[a]) -> i64[] {
  match (%l) {
    Cons(_, %t) => {
      add(@length(%t), const(i64[], 1))
    }
    Nil => {
      const(i64[], 0)
    }
  }
}
def @main(%x: f32[2], %y: f32[2]) {
  %t = Node(%x, Leaf, Node(%y, Leaf, Leaf))
  %n = match (%t) {
    Node(%v, _, %w) => {
      %v
    }
    Leaf => {
      %y
    }
  }
  (@length(Cons(%x, Cons(%y, Nil))), %n)
}
""",
}


def main(root):
    os.makedirs(os.path.join(root, "onnx_import"), exist_ok=True)
    os.makedirs(os.path.join(root, "text_ir"), exist_ok=True)
    for name, m in onnx_seeds():
        with open(os.path.join(root, "onnx_import", name + ".onnx"), "wb") as out:
            out.write(m.SerializeToString())
    for name, text in TEXT_SEEDS.items():
        with open(os.path.join(root, "text_ir", name + ".txt"), "w") as out:
            out.write(text)


if __name__ == "__main__":
    main(sys.argv[1])
