"""`kiln serve` as a user runs it: started on a loopback port over a folder of ONNX models,
checked with curl and with a small Python client (api/examples/oip_client.py), loaded with
concurrent requests of mixed batch sizes, then stopped with SIGTERM.

Environment (set by ctest): KILN_BIN, the kiln tool; KILN_TEST_SOURCE_DIR, the source tree;
PYTHONPATH holding the build's `kiln` package, whose reference interpreter is the oracle.
"""
import json
import os
import re
import select
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import onnx
import pytest

SOURCE_DIR = os.environ["KILN_TEST_SOURCE_DIR"]
sys.path.insert(0, os.path.join(SOURCE_DIR, "api", "examples"))
sys.path.insert(0, os.path.join(SOURCE_DIR, "bench", "vs_ort"))
import make_models  # noqa: E402
from oip_client import Client, OipError, decode_response  # noqa: E402

import kiln  # noqa: E402

MAX_REQUEST_BYTES = 8 << 20
MAX_ELEMENTS = 1 << 21


class Served:
    """A `kiln serve` process and a client for it."""

    def __init__(self, model_dir, *flags):
        self.proc = subprocess.Popen(
            [os.environ["KILN_BIN"], "serve", str(model_dir), "--port", "0", *flags],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self._first_line(60)
        m = re.search(r"listening on (http://127\.0\.0\.1:\d+)", line)
        assert m, f"kiln serve printed {line!r}; stderr: {self.proc.stderr.read() if self.proc.poll() is not None else ''}"
        self.url = m.group(1)
        self.client = Client(self.url)

    def _first_line(self, timeout):
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        return self.proc.stdout.readline() if ready else ""

    def stop(self):
        """SIGTERM; returns (exit status, stdout rest, stderr)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            out, err = self.proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, err = self.proc.communicate()
            return None, out, err
        return self.proc.returncode, out, err


def random(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def close(got, want):
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=2e-5)


def curl(*args):
    r = subprocess.run(["curl", "-s", "-S", *args], capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr.decode()
    return r.stdout


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("models")
    onnx.save(make_models.Mlp(), str(d / "mlp.onnx"))
    onnx.save(make_models.Encoder(), str(d / "encoder.onnx"))
    return d


@pytest.fixture(scope="module")
def server(models):
    s = Served(models, "--max-batch", "16", "--batch-delay-us", "20000", "--threads", "1",
               "--max-request-bytes", str(MAX_REQUEST_BYTES), "--max-elements", str(MAX_ELEMENTS))
    deadline = time.time() + 60
    while not s.client.ready():
        assert time.time() < deadline, "the server never became ready"
        time.sleep(0.1)
    yield s
    status, out, err = s.stop()
    assert status == 0, f"kiln serve exited {status} after SIGTERM; stderr: {err}"
    assert "stopped" in out


@pytest.fixture(scope="module")
def reference(models):
    return {n: kiln.Model.from_onnx(str(models / f"{n}.onnx")) for n in ("mlp", "encoder")}


def test_health_and_metadata(server):
    c = server.client
    assert c.get("/v2/health/live") == {"live": True}
    assert c.get("/v2")["extensions"] == ["binary_tensor_data"]
    meta = c.metadata("mlp")
    assert meta["inputs"] == [{"name": "x", "datatype": "FP32", "shape": [-1, 784]}]
    assert meta["outputs"][0]["shape"] == [-1, 10]
    assert c.metadata("encoder")["inputs"][0]["shape"] == [-1, -1, 256]
    assert c.get("/v2/models/mlp/versions/1/ready") == {"name": "mlp", "ready": True}
    with pytest.raises(OipError) as e:
        c.metadata("nope")
    assert e.value.status == 404 and "model 'nope' is not served here" in str(e.value)


def test_json_and_binary_with_curl(server, reference, tmp_path):
    x = random((3, 784), 1)
    out_name = reference["mlp"].outputs[0].name
    want = reference["mlp"].run_reference({"x": x})[out_name]
    request = {"id": "curl-1", "inputs": [{"name": "x", "shape": [3, 784], "datatype": "FP32",
                                             "data": x.tolist()}]}  # nested lists, row-major
    (tmp_path / "req.json").write_text(json.dumps(request))
    body = json.loads(curl("-X", "POST", "-H", "Content-Type: application/json", "--data-binary",
                           f"@{tmp_path / 'req.json'}", f"{server.url}/v2/models/mlp/infer"))
    assert body["id"] == "curl-1" and body["model_name"] == "mlp"
    (o,) = body["outputs"]
    assert o["name"] == out_name and o["shape"] == [3, 10] and o["datatype"] == "FP32"
    close(np.array(o["data"], np.float32).reshape(3, 10), want)

    # Binary tensor data both ways.
    header = json.dumps({"inputs": [{"name": "x", "shape": [3, 784], "datatype": "FP32",
                                     "parameters": {"binary_data_size": x.nbytes}}],
                         "outputs": [{"name": out_name, "parameters": {"binary_data": True}}]}).encode()
    (tmp_path / "req.bin").write_bytes(header + x.tobytes())
    raw = curl("-X", "POST", "-D", str(tmp_path / "headers.txt"), "-H",
               f"Inference-Header-Content-Length: {len(header)}", "-H",
               "Content-Type: application/octet-stream", "--data-binary",
               f"@{tmp_path / 'req.bin'}", f"{server.url}/v2/models/mlp/infer")
    headers = dict(line.split(": ", 1) for line in
                   (tmp_path / "headers.txt").read_text().strip().splitlines()[1:])
    headers = {k: v.strip() for k, v in headers.items()}
    out = decode_response(200, headers, raw)
    assert "Inference-Header-Content-Length" in headers
    assert len(raw) == int(headers["Inference-Header-Content-Length"]) + 3 * 10 * 4
    close(out[out_name], want)


def test_python_client_json_and_binary(server, reference):
    for binary in (False, True):
        for seed, shape in enumerate([(1, 5, 256), (2, 9, 256)]):
            x = random(shape, 10 + seed)
            got = server.client.infer("encoder", {"x": x}, binary=binary)
            want = reference["encoder"].run_reference({"x": x})
            assert list(got) == list(want)
            for k in want:
                close(got[k], want[k])


def test_concurrent_mixed_batches_are_batched_and_equal_single_requests(server, reference):
    c = server.client
    name = reference["mlp"].outputs[0].name
    jobs = [(i, 1 + i % 4) for i in range(96)]  # batch sizes 1..4
    inputs = {i: random((b, 784), 100 + i) for i, b in jobs}
    # One at a time first: each request is a batch of its own.
    single = {i: c.infer("mlp", {"x": inputs[i]}, binary=True)[name] for i, _ in jobs[:8]}
    before = metrics(c)
    results, errors = {}, []

    def work(ids):
        try:
            for i in ids:
                results[i] = c.infer("mlp", {"x": inputs[i]}, binary=i % 2 == 0)[name]
        except Exception as e:  # reported below
            errors.append(repr(e))

    threads = [threading.Thread(target=work, args=([i for i, _ in jobs[k::16]],))
               for k in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:3]
    for i, b in jobs:
        assert results[i].shape == (b, 10)
        if i in single:
            close(results[i], single[i])
        close(results[i], reference["mlp"].run_reference({"x": inputs[i]})[name])
    after = metrics(c)
    runs = after['kiln_batch_requests_count{model="mlp"}'] - before['kiln_batch_requests_count{model="mlp"}']
    requests = after['kiln_batch_requests_sum{model="mlp"}'] - before['kiln_batch_requests_sum{model="mlp"}']
    rows = after['kiln_batch_rows_sum{model="mlp"}'] - before['kiln_batch_rows_sum{model="mlp"}']
    assert requests == len(jobs) and rows == sum(b for _, b in jobs)
    print(f"mlp: {len(jobs)} concurrent requests ({rows:.0f} rows) in {runs:.0f} engine runs")
    assert runs < len(jobs), f"{len(jobs)} concurrent requests ran as {runs} engine runs: no batching"
    # Some engine run served more than one request: the histogram's le="1" bucket grew by less
    # than the number of runs.
    ones = (after['kiln_batch_requests_bucket{model="mlp",le="1"}'] -
            before['kiln_batch_requests_bucket{model="mlp",le="1"}'])
    assert ones < runs
    assert after['kiln_inference_requests_total{model="mlp",outcome="success"}'] >= len(jobs) + 8
    assert after["kiln_engine_runs_total"] >= runs and "kiln_engine_kernel_compiles_total" in after


def metrics(client):
    status, _, body = client.request("GET", "/metrics")
    assert status == 200
    out = {}
    for line in body.decode().splitlines():
        if line and not line.startswith("#"):
            key, value = line.rsplit(" ", 1)
            out[key] = float(value)
    return out


def test_bad_requests_get_protocol_errors(server):
    c = server.client

    def post(body, headers=None, model="mlp"):
        status, _, raw = c.request("POST", f"/v2/models/{model}/infer", body, headers or {})
        return status, json.loads(raw).get("error", "")

    def tensor(**kw):
        t = {"name": "x", "shape": [1, 784], "datatype": "FP32", "data": [0.5] * 784}
        t.update(kw)
        return json.dumps({"inputs": [t]}).encode()

    cases = [
        (b'{"inputs": [', 400, "not valid JSON"),
        (b'[1, 2]', 400, "must be a JSON object"),
        (b'{"inputs": [{"name": "x"}]}', 400, "input 'x' has no \"datatype\""),
        (tensor(datatype="FP64", data=[0.5] * 784), 400, "datatype FP64, the model takes FP32"),
        (tensor(datatype="BYTES"), 400, "datatype 'BYTES' is not supported"),
        (tensor(shape=[1, 783], data=[0.5] * 783), 400, "shape [1, 783], the model takes f32[batch, 784]"),
        (tensor(data=[0.5] * 700), 400, "\"data\" has 700 elements, the shape 784"),
        (tensor(data=[0.5] * 10), 400, "\"data\" cannot hold the shape's 784 elements"),
        (tensor(data=["a"] * 784), 400, "element 0 (\"a\") is not a FP32 value"),
        (tensor(shape=[-1, 784]), 400, "must hold integers >= 0"),
        (tensor(shape=[4096, 4096]), 400, f"more than the limit of {MAX_ELEMENTS} elements"),
        (tensor(shape=[1 << 40, 1 << 40]), 400, "more than the limit"),
        (tensor(name="y"), 400, "model 'mlp' has no input 'y' (its inputs: x)"),
        (json.dumps({"inputs": []}).encode(), 400, "input 'x' (f32[batch, 784]) is missing"),
        (tensor(parameters={"binary_data_size": 3136}), 400, "no Inference-Header-Content-Length"),
        (b"[" * 100000 + b"]" * 100000, 400, "must be a JSON object"),
    ]
    for body, status, text in cases:
        got = post(body)
        assert got[0] == status and text in got[1], (body[:80], got)
    assert post(tensor(), model="nope")[0] == 404
    big = b'{"inputs": [' + b" " * MAX_REQUEST_BYTES + b"]}"
    assert post(big)[0] == 413
    header = json.dumps({"inputs": [{"name": "x", "shape": [1, 784], "datatype": "FP32",
                                     "parameters": {"binary_data_size": 3136}}]}).encode()
    status, text = post(header + b"\0" * 100, {"Inference-Header-Content-Length": str(len(header))})
    assert status == 400 and "binary data ends before its 3136 bytes" in text, text
    status, text = post(header, {"Inference-Header-Content-Length": "12x"})
    assert status == 400 and "is not a byte count" in text, text
    status, text = post(header, {"Inference-Header-Content-Length": str(len(header) + 10)})
    assert status == 400 and "past the body" in text, text
    assert c.get("/v2/health/live") == {"live": True}, "the server survives every bad request"

    # On one kept-alive connection, an error answered before the body mattered (an unknown
    # model) still consumes the body: the next request on the connection is read as sent.
    import http.client
    host, port = server.url[len("http://"):].split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    body = tensor()
    conn.request("POST", "/v2/models/nope/infer", body, {"Content-Type": "application/json"})
    r = conn.getresponse()
    assert r.status == 404 and b"model 'nope' is not served here" in r.read()
    conn.request("GET", "/v2/health/live")
    r = conn.getresponse()
    assert r.status == 200 and json.loads(r.read()) == {"live": True}
    conn.close()


def test_a_model_that_fails_to_load(models, tmp_path):
    (tmp_path / "mlp.onnx").write_bytes((models / "mlp.onnx").read_bytes())
    (tmp_path / "broken.onnx").write_bytes(b"not a model")
    s = Served(tmp_path)
    try:
        assert not s.client.ready()
        assert s.client.get("/v2/models/mlp/ready")["ready"] is True
        with pytest.raises(OipError) as e:
            s.client.metadata("broken")
        assert e.value.status == 503 and "model 'broken' failed to load" in str(e.value)
        x = random((2, 784), 5)
        assert s.client.infer("mlp", {"x": x})
    finally:
        status, _, err = s.stop()
    assert status == 0
    assert "model 'broken' failed to load" in err


def test_usage_errors(tmp_path):
    r = subprocess.run([os.environ["KILN_BIN"], "serve", str(tmp_path)], capture_output=True, text=True)
    assert r.returncode == 1 and "has no .onnx file" in r.stderr
    r = subprocess.run([os.environ["KILN_BIN"], "serve", str(tmp_path), "--max-batch", "0"],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "--max-batch must be at least 1" in r.stderr
