"""Prepared runs (kiln.Binding over kiln_binding): arrays bound once, run again and again with
new values written into them; results match Engine.run; misuse raises kiln.Error naming the
input or output."""
import numpy as np
import pytest

import kiln


def random(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def test_bound_arrays_are_read_and_written_in_place(mlp):
    engine = kiln.Engine(threads=1, policy="eager")
    (out_name,) = [o.name for o in mlp.outputs]
    for batch in [1, 5, 64]:
        x = random((batch, 784), batch)
        y = np.full((batch, 10), np.nan, np.float32)
        with engine.bind(mlp, {"x": x}, {out_name: y}) as binding:
            for seed in range(3):
                x[...] = random((batch, 784), 100 * batch + seed)  # new values, same memory
                binding.run()
                want = engine.run(mlp, {"x": x.copy()})[out_name]
                np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-6)
                assert not np.isnan(y).any()


def test_outputs_made_by_a_first_run_and_inputs_in_model_order(mlp):
    engine = kiln.Engine(threads=1)
    x = random((3, 784), 7)
    binding = engine.bind(mlp, [x])
    (out_name,) = [o.name for o in mlp.outputs]
    y = binding._arrays[("output", out_name)]
    first = y.copy()
    x *= -1.0
    binding.run()
    np.testing.assert_allclose(y, engine.run(mlp, [x.copy()])[out_name], rtol=1e-5, atol=1e-6)
    assert not np.allclose(y, first)
    binding.close()
    with pytest.raises(kiln.Error, match="binding is closed"):
        binding.run()


def test_misuse_names_the_input_or_output(mlp):
    engine = kiln.Engine(threads=1)
    (out_name,) = [o.name for o in mlp.outputs]
    binding = kiln.Binding(engine, mlp)
    with pytest.raises(kiln.Error, match="input 'x'.*C-contiguous") as e:
        binding.bind_input("x", random((784, 3), 1).T)  # strided: a copy would not see writes
    assert e.value.status == "KILN_INVALID_ARGUMENT"
    with pytest.raises(kiln.Error, match="input 'x'.*got list"):
        binding.bind_input("x", [[1.0] * 784])
    with pytest.raises(kiln.Error, match="byte order"):
        binding.bind_input("x", random((2, 784), 1).astype(">f4"))
    with pytest.raises(kiln.Error, match="nope") as e:
        binding.bind_input("nope", random((2, 784), 1))
    assert e.value.status == "KILN_NOT_FOUND"
    with pytest.raises(kiln.Error, match="'x'") as e:
        binding.bind_input("x", np.zeros((2, 784), np.float64))  # wrong dtype
    assert e.value.status == "KILN_INVALID_ARGUMENT"
    with pytest.raises(kiln.Error, match="read-only"):
        ro = np.zeros((2, 10), np.float32)
        ro.flags.writeable = False
        binding.bind_output(out_name, ro)
    binding.bind_input("x", random((2, 784), 1))
    with pytest.raises(kiln.Error, match=f"output '{out_name}' is not bound"):
        binding.run()
    binding.bind_output(out_name, np.zeros((2, 10), np.float32))
    binding.run()
    engine.close()
    with pytest.raises(kiln.Error, match="engine is closed"):
        binding.run()
    binding.close()
