"""Every failure is a kiln.Error carrying kiln's message and status, never a crash."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import kiln


def raises(fn, status, text):
    with pytest.raises(kiln.Error) as e:
        fn()
    assert e.value.status == status, str(e.value)
    assert text in str(e.value), str(e.value)


def test_bad_models(tmp_path):
    raises(lambda: kiln.Model.from_onnx(b"\x08\x01garbage"), "KILN_INVALID_ARGUMENT", "ONNX")
    raises(lambda: kiln.Model.from_onnx(str(tmp_path / "missing.onnx")), "KILN_INVALID_ARGUMENT",
           "missing.onnx")

    def one_node(op):
        node = helper.make_node(op, ["x"], ["y"], name="mystery")
        graph = helper.make_graph([node], "g",
                                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        return model.SerializeToString()

    raises(lambda: kiln.Model.from_onnx(one_node("NoSuchOp")), "KILN_INVALID_ARGUMENT",
           "No Op registered for NoSuchOp")
    raises(lambda: kiln.Model.from_onnx(one_node("StringNormalizer")), "KILN_UNSUPPORTED",
           "unsupported ONNX op 'StringNormalizer' (node 'mystery'")
    with pytest.raises(TypeError):
        kiln.Model.from_onnx(42)


def test_bad_inputs(mlp):
    engine = kiln.Engine(threads=1)
    raises(lambda: engine.run(mlp, {"x": np.zeros((2, 783), np.float32)}), "KILN_INVALID_ARGUMENT",
           "input 'x': expected f32[batch, 784], given f32[2, 783]")
    raises(lambda: engine.run(mlp, {"x": np.zeros((2, 784), np.float64)}), "KILN_INVALID_ARGUMENT",
           "given f64[2, 784]")
    raises(lambda: engine.run(mlp, {"y": np.zeros((2, 784), np.float32)}), "KILN_NOT_FOUND",
           "has no input 'y'")
    raises(lambda: engine.run(mlp, {}), "KILN_INVALID_ARGUMENT", "input 'x' (f32[batch, 784]) is missing")
    raises(lambda: engine.run(mlp, []), "KILN_INVALID_ARGUMENT", "takes 1 inputs, given 0")
    raises(lambda: mlp.run_reference({"x": np.zeros((784,), np.float32)}), "KILN_INVALID_ARGUMENT",
           "input 'x'")
    with pytest.raises(TypeError, match="input 'x'"):
        engine.run(mlp, {"x": np.zeros((2, 784), np.complex64)})


def test_bad_options_name_the_option():
    raises(lambda: kiln.Engine(policy="sometimes"), "KILN_INVALID_ARGUMENT", "sometimes")
    raises(lambda: kiln.Engine(pipeline="InferType,NoSuchPass"), "KILN_INVALID_ARGUMENT", "NoSuchPass")
    raises(lambda: kiln.Engine(config={"no.such.key": 1}), "KILN_INVALID_ARGUMENT", "no.such.key")
    raises(lambda: kiln.Engine(target="nonsense"), "KILN_INVALID_ARGUMENT", "nonsense")


def test_closed_engine(mlp):
    engine = kiln.Engine(threads=1)
    engine.close()
    raises(lambda: engine.run(mlp, {"x": np.zeros((1, 784), np.float32)}), "KILN_INVALID_ARGUMENT",
           "closed")
    with kiln.Engine(threads=1) as e:
        assert e.stats()["runs"] == 0
    raises(e.stats, "KILN_INVALID_ARGUMENT", "closed")


def test_hostile_models_and_options_fail_fast(tmp_path):
    """Issue 18's cases as a Python user meets them: each a kiln.Error in well under a second."""
    import time

    def fast(fn, status, text):
        t0 = time.monotonic()
        raises(fn, status, text)
        assert time.monotonic() - t0 < 1.0

    # A file that never ends, and a target that made LLVM abort the process.
    fast(lambda: kiln.Model.from_onnx("/dev/zero"), "KILN_INVALID_ARGUMENT", "not a regular file")
    fast(lambda: kiln.Engine(target="llvm -mcpu=i386"), "KILN_INVALID_ARGUMENT",
         "'i386' is not an x86-64 CPU model")
    fast(lambda: kiln.Engine(opt_level=1000), "KILN_INVALID_ARGUMENT", "must be 0 to 3")

    # ConstantOfShape to 2^31 floats, summed: 8 GiB of intermediates from a 100-byte model.
    shape = onnx.numpy_helper.from_array(np.array([2**31], dtype=np.int64), "shape")
    nodes = [helper.make_node("ConstantOfShape", ["shape"], ["c"],
                              value=helper.make_tensor("v", TensorProto.FLOAT, [1], [1.0])),
             helper.make_node("ReduceSum", ["c"], ["y"], keepdims=0)]
    graph = helper.make_graph(nodes, "huge", [],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [])], [shape])
    model = kiln.Model.from_onnx(
        helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString())
    for policy in ("eager", "tiered"):
        engine = kiln.Engine(threads=1, policy=policy, max_run_bytes=1 << 30)
        fast(lambda: engine.run(model, {}), "KILN_OUT_OF_MEMORY",
             "over the limit of 1073741824 (EngineOptions.max_run_bytes)")

    # Load limits: the file or buffer's size, and the weights', each named.
    w = onnx.numpy_helper.from_array(np.arange(64, dtype=np.float32), "w")
    graph = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"])], "addw",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [64])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [64])], [w])
    data = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()
    path = tmp_path / "addw.onnx"
    path.write_bytes(data)
    for source in (data, path):
        fast(lambda: kiln.Model.from_onnx(source, max_model_bytes=100), "KILN_INVALID_ARGUMENT",
             "over the limit of 100")
        fast(lambda: kiln.Model.from_onnx(source, max_weight_bytes=255), "KILN_INVALID_ARGUMENT",
             "(max_weight_bytes)")
        assert kiln.Model.from_onnx(source, max_model_bytes=len(data), max_weight_bytes=256)
    raises(lambda: kiln.Model.from_onnx(data, max_model_bytes=2**31), "KILN_INVALID_ARGUMENT",
           "max_model_bytes must be 1 to 2147483647")

    # A model whose output is declared INT64 but computes f32.
    node = helper.make_node("Relu", ["x"], ["y"])
    graph = helper.make_graph([node], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.INT64, [2])])
    fast(lambda: kiln.Model.from_onnx(
        helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()),
        "KILN_INVALID_ARGUMENT", "graph output 'y' is declared INT64 but the graph computes f32")
