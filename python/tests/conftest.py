"""Models for the Python package's tests: bench/vs_ort's MLP (x: f32[batch, 784]) and encoder
layer (x: f32[batch, seq, 256]), written as ONNX files once per session."""
import os
import sys

import onnx
import pytest

SOURCE_DIR = os.environ.get("KILN_TEST_SOURCE_DIR",
                            os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(SOURCE_DIR, "bench", "vs_ort"))
import make_models  # noqa: E402  (bench/vs_ort, found through the path above)

import kiln  # noqa: E402


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("models")
    onnx.save(make_models.Mlp(), str(d / "mlp.onnx"))
    onnx.save(make_models.Encoder(), str(d / "encoder.onnx"))
    return d


@pytest.fixture(scope="session")
def mlp(model_dir):
    return kiln.Model.from_onnx(str(model_dir / "mlp.onnx"))


@pytest.fixture(scope="session")
def encoder(model_dir):
    return kiln.Model.from_onnx(model_dir / "encoder.onnx")
