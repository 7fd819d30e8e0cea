"""Runs through the Python package checked against kiln's reference interpreter (and, for the
MLP, against NumPy): several shapes, inputs by name and in order, output subsets, layouts."""
import numpy as np
import onnx
import pytest
from onnx import numpy_helper

import kiln


def random(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def close(got, want):
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=2e-5)


def test_model_info_shows_symbolic_dims(mlp, encoder):
    assert mlp.name == "mlp"
    assert mlp.inputs == [kiln.TensorInfo("x", np.dtype(np.float32), ("batch", 784))]
    assert [o.shape for o in mlp.outputs] == [("batch", 10)]
    assert encoder.inputs[0].shape == ("batch", "seq", 256)
    assert encoder.outputs[0].dtype == np.float32
    assert "batch" in mlp.text()


@pytest.mark.parametrize("policy", ["tiered", "eager"])
def test_mlp_matches_reference_and_numpy(mlp, model_dir, policy):
    weights = {t.name: numpy_helper.to_array(t).astype(np.float64)
               for t in onnx.load(str(model_dir / "mlp.onnx")).graph.initializer}
    gemms = [n for n in onnx.load(str(model_dir / "mlp.onnx")).graph.node if n.op_type == "Gemm"]
    engine = kiln.Engine(threads=1, policy=policy)
    for seed, batch in enumerate([1, 3, 17, 64, 3]):
        x = random((batch, 784), seed)
        got = engine.run(mlp, {"x": x})
        (name,) = got.keys()
        assert got[name].shape == (batch, 10) and got[name].dtype == np.float32
        close(got[name], mlp.run_reference({"x": x})[name])
        h = x.astype(np.float64)
        for i, node in enumerate(gemms):
            h = h @ weights[node.input[1]] + weights[node.input[2]]
            if i < 2:
                h = np.maximum(h, 0)
        e = np.exp(h - h.max(axis=1, keepdims=True))
        close(got[name], e / e.sum(axis=1, keepdims=True))
    stats = engine.stats()
    assert stats["runs"] == 5 and stats["hits"] >= 1


def test_encoder_matches_reference_at_several_shapes(encoder):
    engine = kiln.Engine(threads=2)
    for seed, shape in enumerate([(1, 5), (2, 16), (1, 33), (2, 16)]):
        x = random(shape + (256,), 100 + seed)
        got = engine.run(encoder, [x])  # in model order
        want = encoder.run_reference([x])
        assert list(got) == list(want) == [encoder.outputs[0].name]
        close(got[encoder.outputs[0].name], want[encoder.outputs[0].name])


def test_layouts_and_conversions(mlp):
    engine = kiln.Engine(threads=1, policy="eager")
    name = mlp.outputs[0].name
    x = random((784, 4), 7).T  # a Fortran-ordered view: made C-ordered on the way in
    want = mlp.run_reference({"x": np.ascontiguousarray(x)})[name]
    close(engine.run(mlp, {"x": x})[name], want)
    close(engine.run(mlp, {"x": x.tolist()})[name], want)  # lists take the input's dtype
    close(engine.run(mlp, {"x": x.astype(">f4")})[name], want)  # big-endian: made native
    empty = engine.run(mlp, {"x": np.zeros((0, 784), np.float32)})[name]
    assert empty.shape == (0, 10) and empty.dtype == np.float32


def test_outputs_are_kiln_memory_and_outlive_engine_and_model(model_dir):
    model = kiln.Model.from_onnx((model_dir / "mlp.onnx").read_bytes())
    engine = kiln.Engine(threads=1, policy="eager")
    x = random((2, 784), 3)
    out = list(engine.run(model, {"x": x}).values())[0]
    want = list(model.run_reference({"x": x}).values())[0]
    assert not out.flags.owndata and out.base is not None  # no copy: a view of kiln's tensor
    assert out.flags.c_contiguous and out.flags.writeable
    del engine, model
    close(out, want)
    view = out[1]
    del out
    close(view, want[1])


def test_output_subset_by_name(encoder):
    engine = kiln.Engine(threads=1)
    x = random((1, 4, 256), 9)
    name = encoder.outputs[0].name
    assert list(engine.run(encoder, {"x": x}, outputs=[name])) == [name]
    with pytest.raises(kiln.Error) as e:
        engine.run(encoder, {"x": x}, outputs=["nope"])
    assert e.value.status == "KILN_NOT_FOUND" and "has no output 'nope'" in str(e.value)


def test_profile_stats_and_explain(mlp):
    engine = kiln.Engine(threads=1, policy="eager", profiling=True)
    x = random((5, 784), 1)
    first = engine.explain(mlp, {"x": x})
    assert first["cached"] is False and "first run of model 'mlp'" in first["reason"]
    engine.run(mlp, {"x": x})
    engine.run(mlp, {"x": x})
    assert engine.explain(mlp, {"x": x})["cached"] is True
    stats = engine.stats()
    assert stats["runs"] == 2 and stats["hits"] == 1 and stats["misses"] == 1
    assert stats["kernels"] and all(k["calls"] >= 1 for k in stats["kernels"])
    assert stats["shapes"][0]["passes"], "profiling records each pass"
    engine.prepare(mlp, {"x": random((9, 784), 2)})
    assert engine.stats()["cached_executables"] == 2


def test_cache_budget_bounds_cached_executables(mlp):
    budget = 8 << 20  # an executable of this MLP is charged ~3.6 MB (its packed weights)
    engine = kiln.Engine(threads=1, policy="eager", max_cache_bytes=budget)
    for batch in range(1, 9):
        x = random((batch, 784), batch)
        (got,) = engine.run(mlp, {"x": x}).values()
        close(got, next(iter(mlp.run_reference({"x": x}).values())))
        stats = engine.stats()
        assert stats["cache_budget_bytes"] == budget
        assert 0 < stats["cached_bytes"] <= budget
    assert engine.stats()["evictions"] > 0


def test_warm_start_files(mlp, tmp_path):
    engine = kiln.Engine(threads=1, policy="eager")
    for batch in (2, 6):
        engine.run(mlp, {"x": random((batch, 784), batch)})
    engine.save_shapes(mlp, tmp_path / "shapes.txt")
    fresh = kiln.Engine(threads=1)
    fresh.precompile_shapes(mlp, tmp_path / "shapes.txt")
    assert fresh.stats()["cached_executables"] == 2


def test_reference_outputs_never_alias_inputs_or_weights():
    # y = Identity(x), w = Identity(weight): the interpreter hands back the very tensors.
    from onnx import TensorProto, helper
    weight = helper.make_tensor("weight", TensorProto.FLOAT, [2], [5.0, 6.0])
    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"]), helper.make_node("Identity", ["weight"], ["w"])],
        "ident", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2]),
         helper.make_tensor_value_info("w", TensorProto.FLOAT, [2])], [weight])
    model = kiln.Model.from_onnx(
        helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString())
    x = np.array([1.0, 2.0], np.float32)
    out = model.run_reference({"x": x})
    x[:] = -1  # the caller's buffer changes after the run
    out["w"][:] = 0  # writing an output must not touch the model's weights
    assert out["y"].tolist() == [1.0, 2.0]
    assert model.run_reference({"x": x})["w"].tolist() == [5.0, 6.0]
    assert model.run_reference({"x": [3.0, 4.0]})["y"].tolist() == [3.0, 4.0]  # a temporary input
