"""A small Open Inference Protocol v2 (KServe v2) client for `kiln serve`, on the standard
library and NumPy:

    from oip_client import Client
    c = Client("http://127.0.0.1:8000")
    c.ready()                                         # True once every model has loaded
    c.metadata("mlp")                                 # {"inputs": [{"name", "datatype", "shape"}], ...}
    c.infer("mlp", {"x": np.ones((2, 784), np.float32)})                # JSON tensors
    c.infer("mlp", {"x": np.ones((2, 784), np.float32)}, binary=True)   # binary tensor data
"""
import json
import urllib.error
import urllib.request

import numpy as np

DATATYPES = {
    "BOOL": np.bool_, "UINT8": np.uint8, "UINT16": np.uint16, "UINT32": np.uint32,
    "UINT64": np.uint64, "INT8": np.int8, "INT16": np.int16, "INT32": np.int32,
    "INT64": np.int64, "FP16": np.float16, "FP32": np.float32, "FP64": np.float64,
}
NAMES = {np.dtype(t): name for name, t in DATATYPES.items()}


class OipError(Exception):
    """An error response: `status` is the HTTP status, str(e) the server's message."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status


class Client:
    def __init__(self, url, timeout=60):
        self.url = url.rstrip("/")
        self.timeout = timeout

    def request(self, method, path, body=None, headers=None):
        """(status, headers, body bytes); error statuses are returned, not raised."""
        req = urllib.request.Request(self.url + path, data=body, method=method,
                                     headers=headers or {})
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as r:
                return r.status, r.headers, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.headers, e.read()

    def get(self, path):
        status, _, body = self.request("GET", path)
        if status != 200:
            raise OipError(status, json.loads(body).get("error", body.decode()))
        return json.loads(body)

    def ready(self):
        return self.request("GET", "/v2/health/ready")[0] == 200

    def metadata(self, model):
        return self.get(f"/v2/models/{model}")

    def infer(self, model, inputs, outputs=None, binary=False):
        """{name: array} in, {name: array} out. binary=True sends and asks for the binary tensor
        data extension instead of JSON numbers."""
        tensors, blobs = [], []
        for name, value in inputs.items():
            a = np.ascontiguousarray(value)
            t = {"name": name, "shape": list(a.shape), "datatype": NAMES[a.dtype]}
            if binary:
                t["parameters"] = {"binary_data_size": a.nbytes}
                blobs.append(a.tobytes())
            else:
                t["data"] = a.ravel().tolist()
            tensors.append(t)
        request = {"inputs": tensors}
        if outputs is not None:
            request["outputs"] = [{"name": n, "parameters": {"binary_data": binary}} for n in outputs]
        elif binary:
            request["parameters"] = {"binary_data_output": True}
        header = json.dumps(request).encode()
        headers = {"Content-Type": "application/json"}
        if binary:
            headers = {"Content-Type": "application/octet-stream",
                       "Inference-Header-Content-Length": str(len(header))}
        status, rheaders, body = self.request("POST", f"/v2/models/{model}/infer",
                                              header + b"".join(blobs), headers)
        return decode_response(status, rheaders, body)


def decode_response(status, headers, body):
    """An infer response's outputs as {name: array}; raises OipError for an error response."""
    length = headers.get("Inference-Header-Content-Length")
    header = body[:int(length)] if length is not None else body
    response = json.loads(header)
    if status != 200:
        raise OipError(status, response.get("error", ""))
    out, at = {}, int(length) if length is not None else 0
    for t in response["outputs"]:
        dtype = np.dtype(DATATYPES[t["datatype"]])
        size = t.get("parameters", {}).get("binary_data_size")
        if size is not None:
            out[t["name"]] = np.frombuffer(body[at:at + size], dtype).reshape(t["shape"])
            at += size
        else:
            data = [np.nan if v is None else v for v in t["data"]]
            out[t["name"]] = np.array(data, dtype).reshape(t["shape"])
    return out
