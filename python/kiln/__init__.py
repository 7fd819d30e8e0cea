"""kiln from Python: a JIT-compiling inference engine for models whose shapes change.

    import numpy as np, kiln
    engine = kiln.Engine(threads=2)
    model = kiln.Model.from_onnx("mlp.onnx")
    out = engine.run(model, {"x": np.ones((3, 64), np.float32)})   # {"probs": array, ...}

Arrays go in and come out without copies where their layout allows (see _tensors.py). Every
failure raises kiln.Error carrying kiln's message and status. An Engine and a Model may be used
from many threads at once: runs release the GIL.
"""
import ctypes
import json
import os
from collections import namedtuple

import numpy as np

from ._capi import Error, check, encode, lib, take_string
from ._tensors import Wrapped, dtype_of, to_array

__all__ = ["Binding", "Engine", "Error", "Model", "TensorInfo", "__version__"]
__version__ = lib.kiln_version_string().decode()

TensorInfo = namedtuple("TensorInfo", ["name", "dtype", "shape"])
TensorInfo.__doc__ = """A model input or output: its name, NumPy dtype ("bf16" as a string,
which NumPy lacks), and shape: an int per constant dim, a str for a symbolic one ("batch",
"batch * 2")."""


def _names(names):
    arr = (ctypes.c_char_p * max(len(names), 1))()
    for i, n in enumerate(names):
        arr[i] = encode(n, "a tensor name")
    return arr


class Model:
    """A model: a graph with symbolic input shapes and its weights. Immutable; thread-safe."""

    def __init__(self, handle):
        self._handle = handle
        self._lib = lib
        n = ctypes.c_size_t()
        check(lib.kiln_model_num_inputs(handle, ctypes.byref(n)))
        self.inputs = [self._info(i, True) for i in range(n.value)]
        check(lib.kiln_model_num_outputs(handle, ctypes.byref(n)))
        self.outputs = [self._info(i, False) for i in range(n.value)]
        name = ctypes.c_char_p()
        check(lib.kiln_model_name(handle, ctypes.byref(name)))
        self.name = name.value.decode()

    @classmethod
    def from_onnx(cls, path_or_bytes, max_model_bytes=None, max_weight_bytes=None,
                  base_dir=None):
        """Imports an ONNX model from a file path (str or os.PathLike) or from its bytes.

        max_model_bytes, max_weight_bytes: limits checked before anything large is read or
        allocated; base_dir: where external data resolves (see kiln_load_options in kiln.h).
        """
        if not isinstance(path_or_bytes, (bytes, bytearray, memoryview, str, os.PathLike)):
            raise TypeError("kiln.Model.from_onnx: wants a path or bytes, got "
                            f"{type(path_or_bytes).__name__}")
        handle = ctypes.c_void_p()
        opts = ctypes.c_void_p()
        check(lib.kiln_load_options_create(ctypes.byref(opts)))
        try:
            o = opts.value
            if max_model_bytes is not None:
                check(lib.kiln_load_options_set_max_model_bytes(o, int(max_model_bytes)))
            if max_weight_bytes is not None:
                check(lib.kiln_load_options_set_max_weight_bytes(o, int(max_weight_bytes)))
            if base_dir is not None:
                check(lib.kiln_load_options_set_base_dir(o, os.fsencode(base_dir)))
            if isinstance(path_or_bytes, (str, os.PathLike)):
                check(lib.kiln_model_load_onnx_file_with(os.fsencode(path_or_bytes), o,
                                                         ctypes.byref(handle)))
            else:
                buf = bytes(path_or_bytes)
                check(lib.kiln_model_load_onnx_buffer_with(buf, len(buf), o, ctypes.byref(handle)))
        finally:
            lib.kiln_load_options_destroy(opts.value)
        return cls(handle.value)

    def _info(self, index, is_input):
        kind = "input" if is_input else "output"
        name, code, rank = ctypes.c_char_p(), ctypes.c_int(), ctypes.c_size_t()
        check(getattr(lib, f"kiln_model_{kind}_name")(self._handle, index, ctypes.byref(name)))
        check(getattr(lib, f"kiln_model_{kind}_type")(self._handle, index, ctypes.byref(code),
                                                      ctypes.byref(rank)))
        shape = []
        for d in range(rank.value):
            value, symbol = ctypes.c_int64(), ctypes.c_char_p()
            check(getattr(lib, f"kiln_model_{kind}_dim")(self._handle, index, d,
                                                         ctypes.byref(value), ctypes.byref(symbol)))
            shape.append(symbol.value.decode() if symbol.value else value.value)
        return TensorInfo(name.value.decode(), dtype_of(code.value), tuple(shape))

    def text(self):
        """The graph as kiln's text IR."""
        out = ctypes.c_void_p()
        check(lib.kiln_model_print(self._handle, ctypes.byref(out)))
        return take_string(out.value)

    def run_reference(self, inputs, outputs=None):
        """Runs the model with each op's reference kernel, compiling nothing (slow): the oracle
        that compiled kernels are checked against. Arguments and result as Engine.run's."""
        return _run(lambda *a: lib.kiln_model_run_reference(self._handle, *a), self, inputs,
                    outputs)

    def __repr__(self):
        return f"<kiln.Model '{self.name}' inputs={self.inputs} outputs={self.outputs}>"

    def __del__(self):
        if getattr(self, "_handle", None):
            self._lib.kiln_model_destroy(self._handle)
            self._handle = None


def _bind_inputs(model, inputs, wrapped):
    """The C arrays of a run's input names and tensors; `inputs` is a dict by name or a
    sequence in model order."""
    if isinstance(inputs, dict):
        names = list(inputs.keys())
        values = list(inputs.values())
        dtypes = {i.name: i.dtype for i in model.inputs}
    else:
        values = list(inputs)
        if len(values) != len(model.inputs):
            raise Error("KILN_INVALID_ARGUMENT", f"kiln: model '{model.name}' takes "
                        f"{len(model.inputs)} inputs, given {len(values)}")
        names = [i.name for i in model.inputs]
        dtypes = {i.name: i.dtype for i in model.inputs}
    handles = (ctypes.c_void_p * max(len(values), 1))()
    for k, (name, value) in enumerate(zip(names, values)):
        dt = dtypes.get(name)
        handles[k] = wrapped.add(value, name, dt if isinstance(dt, np.dtype) else None)
    return len(values), _names(names), handles


def _run(call, model, inputs, outputs):
    """One run through `call` (kiln_engine_run's or kiln_model_run_reference's arguments after
    the handles); returns {output name: array} in the order asked for (model order if None)."""
    out_names = [o.name for o in model.outputs] if outputs is None else list(outputs)
    with Wrapped() as wrapped:
        n, in_names, in_handles = _bind_inputs(model, inputs, wrapped)
        slots = (ctypes.c_void_p * max(len(out_names), 1))()
        check(call(n, in_names, in_handles, len(out_names),
                   None if outputs is None else _names(out_names), slots))
    result = {}
    try:
        for j, name in enumerate(out_names):
            handle, slots[j] = slots[j], None
            result[name] = to_array(handle, name)  # owns the handle from here, even on error
    finally:
        for j in range(len(out_names)):
            if slots[j]:
                lib.kiln_tensor_destroy(slots[j])
    return result


class _Closable:
    """A handle's wrapper: close() frees it (subclasses define it), _live() is the handle or a
    kiln.Error saying it is closed, and `with` closes it."""

    _what = "handle"

    def _live(self):
        if not self._handle:
            raise Error("KILN_INVALID_ARGUMENT", f"kiln: the {self._what} is closed")
        return self._handle

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()


class Engine(_Closable):
    """Compiles each model once per set of input shapes and runs it. Thread-safe: many threads
    may run models through one engine at once (the GIL is released during runs).

    threads: kernel threads (0 or None: every core). opt_level: 0-3 (default 2).
    cache_dir: a directory for the disk kernel cache (a new process starts warm).
    policy: "tiered" (default), "eager" or "generic_only" (see kiln.h).
    target: "llvm" (default, this CPU), "cuda", or a target string.
    profiling: per-pass and per-kernel times in stats(). trace: record a Chrome/Perfetto trace
    (trace()). pipeline: a pipeline string.
    disabled_passes, required_passes: pass names. config: {key: value} PassContext settings.
    max_specializations, specialize_after, compile_threads, cache_max_bytes, max_run_bytes,
    max_cache_bytes: see kiln.h.
    """

    _what = "engine"

    def __init__(self, threads=None, opt_level=None, cache_dir=None, policy=None, target=None,
                 profiling=False, trace=False, pipeline=None, disabled_passes=(), required_passes=(),
                 config=None, max_specializations=None, specialize_after=None,
                 compile_threads=None, cache_max_bytes=None, max_run_bytes=None,
                 max_cache_bytes=None):
        self._handle = None
        self._lib = lib
        opts = ctypes.c_void_p()
        check(lib.kiln_options_create(ctypes.byref(opts)))
        try:
            o = opts.value
            if target is not None:
                check(lib.kiln_options_set_target(o, encode(target, "target")))
            if opt_level is not None:
                check(lib.kiln_options_set_opt_level(o, int(opt_level)))
            if threads is not None:
                check(lib.kiln_options_set_num_threads(o, int(threads)))
            if cache_dir is not None:
                check(lib.kiln_options_set_cache_dir(o, os.fsencode(cache_dir)))
            if cache_max_bytes is not None:
                check(lib.kiln_options_set_cache_max_bytes(o, int(cache_max_bytes)))
            if max_run_bytes is not None:
                check(lib.kiln_options_set_max_run_bytes(o, int(max_run_bytes)))
            if max_cache_bytes is not None:
                check(lib.kiln_options_set_max_cache_bytes(o, int(max_cache_bytes)))
            if policy is not None:
                check(lib.kiln_options_set_compile_policy(o, encode(policy, "policy")))
            if specialize_after is not None:
                check(lib.kiln_options_set_specialize_after(o, int(specialize_after)))
            if compile_threads is not None:
                check(lib.kiln_options_set_compile_threads(o, int(compile_threads)))
            if max_specializations is not None:
                check(lib.kiln_options_set_max_specializations(o, int(max_specializations)))
            if pipeline is not None:
                check(lib.kiln_options_set_pipeline(o, encode(pipeline, "pipeline")))
            for p in disabled_passes:
                check(lib.kiln_options_disable_pass(o, encode(p, "a pass name")))
            for p in required_passes:
                check(lib.kiln_options_require_pass(o, encode(p, "a pass name")))
            for key, value in (config or {}).items():
                k = encode(key, "a config key")
                if isinstance(value, bool):
                    check(lib.kiln_options_set_config_bool(o, k, int(value)))
                elif isinstance(value, int):
                    check(lib.kiln_options_set_config_int(o, k, value))
                elif isinstance(value, float):
                    check(lib.kiln_options_set_config_float(o, k, value))
                else:
                    check(lib.kiln_options_set_config_string(o, k, encode(value, key)))
            check(lib.kiln_options_set_profiling(o, int(bool(profiling))))
            check(lib.kiln_options_set_trace(o, int(bool(trace))))
            engine = ctypes.c_void_p()
            check(lib.kiln_engine_create(o, ctypes.byref(engine)))
            self._handle = engine.value
        finally:
            lib.kiln_options_destroy(opts.value)

    def run(self, model, inputs, outputs=None):
        """Runs `model` on `inputs` ({name: array}, or arrays in model order). Returns
        {output name: array} for `outputs` (names, in that order; None: all, in model order).
        Arrays that are not NumPy arrays are converted to the input's dtype; NumPy arrays must
        have it (kiln.Error names the input otherwise)."""
        h = self._live()
        return _run(lambda *a: lib.kiln_engine_run(h, model._handle, *a), model, inputs, outputs)

    def bind(self, model, inputs, outputs=None):
        """A Binding of `model` on this engine: `inputs` ({name: array}, or arrays in model
        order) and `outputs` ({name: array}; None: arrays of this run's results, one run made
        now to learn their shapes) bound once, then run() again and again without name lookups
        or copies. See Binding."""
        binding = Binding(self, model)
        try:
            names = ([i.name for i in model.inputs] if not isinstance(inputs, dict)
                     else list(inputs.keys()))
            values = list(inputs.values()) if isinstance(inputs, dict) else list(inputs)
            if len(values) != len(names):
                raise Error("KILN_INVALID_ARGUMENT", f"kiln: model '{model.name}' takes "
                            f"{len(model.inputs)} inputs, given {len(values)}")
            for name, value in zip(names, values):
                binding.bind_input(name, value)
            if outputs is None:
                outputs = self.run(model, dict(zip(names, values)))
            for name, array in outputs.items():
                binding.bind_output(name, array)
        except BaseException:
            binding.close()
            raise
        return binding

    def prepare(self, model, inputs):
        """Compiles `model` for these inputs' shapes without running it."""
        h = self._live()
        with Wrapped() as wrapped:
            n, names, handles = _bind_inputs(model, inputs, wrapped)
            check(lib.kiln_engine_prepare(h, model._handle, n, names, handles))

    def explain(self, model, inputs):
        """What would serve a run on these inputs now: {"shape_key", "cached", "tier",
        "reason"}. Compiles nothing."""
        h = self._live()
        out = ctypes.c_void_p()
        with Wrapped() as wrapped:
            n, names, handles = _bind_inputs(model, inputs, wrapped)
            check(lib.kiln_engine_explain(h, model._handle, n, names, handles, ctypes.byref(out)))
        return json.loads(take_string(out.value))

    def stats(self):
        """The engine's statistics as a dict (kiln_engine_stats_json's keys); with
        profiling=True, "shapes"[i]["passes"] and "kernels" hold the profile."""
        out = ctypes.c_void_p()
        check(lib.kiln_engine_stats_json(self._live(), ctypes.byref(out)))
        return json.loads(take_string(out.value))

    def trace(self):
        """With trace=True: the trace so far as a dict in the Chrome/Perfetto trace format
        ({"traceEvents": [...]}; json.dump it to a file to open in ui.perfetto.dev)."""
        out = ctypes.c_void_p()
        check(lib.kiln_engine_trace_json(self._live(), ctypes.byref(out)))
        return json.loads(take_string(out.value))

    def wait_background_compiles(self):
        check(lib.kiln_engine_wait_background_compiles(self._live()))

    def save_shapes(self, model, path):
        check(lib.kiln_engine_save_shapes(self._live(), model._handle, os.fsencode(path)))

    def precompile_shapes(self, model, path):
        check(lib.kiln_engine_precompile_shapes(self._live(), model._handle, os.fsencode(path)))

    def close(self):
        """Frees the engine now (its runs must have returned); later calls raise kiln.Error."""
        if self._handle:
            self._lib.kiln_engine_destroy(self._handle)
            self._handle = None



class Binding(_Closable):
    """A prepared run of one model on one engine (kiln_binding): each input and output array
    bound once by name, then run() any number of times. kiln reads the input arrays' memory and
    writes the output arrays' memory directly: write new values into the input arrays (x[...] =
    ...) and run again; read the results from the output arrays. On a compiled shape a run does
    no name lookup, no copy and no allocation inside kiln. Bound arrays must be C-contiguous
    NumPy arrays of the input's or output's dtype (a copy would not see later writes, so none is
    made); the binding keeps them, the engine and the model alive. One thread at a time per
    binding; any number of bindings may run on one engine at once."""

    _what = "binding"

    def __init__(self, engine, model):
        self._handle = None
        self._lib = lib
        self._engine, self._model = engine, model
        self._arrays = {}  # (kind, name) -> the bound array, whose memory kiln uses
        handle = ctypes.c_void_p()
        check(lib.kiln_binding_create(engine._live(), model._handle, ctypes.byref(handle)))
        self._handle = handle.value

    def bind_input(self, name, array):
        self._bind("input", lib.kiln_binding_bind_input, name, array)

    def bind_output(self, name, array):
        if isinstance(array, np.ndarray) and not array.flags.writeable:
            raise Error("KILN_INVALID_ARGUMENT",
                        f"kiln: output '{name}': the array is read-only, and runs write it")
        self._bind("output", lib.kiln_binding_bind_output, name, array)

    def run(self):
        """Runs the model on the bound inputs into the bound outputs."""
        self._engine._live()  # the engine must outlive the binding: a closed one is an error
        check(lib.kiln_binding_run(self._live()))

    def close(self):
        if self._handle:
            self._lib.kiln_binding_destroy(self._handle)
            self._handle = None
        self._arrays = {}

    def _bind(self, kind, call, name, array):
        if not isinstance(array, np.ndarray):
            got = type(array).__name__
        elif not array.flags.c_contiguous:
            got = "a strided array"
        elif not array.dtype.isnative:
            got = f"an array of byte order {array.dtype.byteorder!r}"
        else:
            got = None
        if got:
            raise Error("KILN_INVALID_ARGUMENT",
                        f"kiln: {kind} '{name}': a binding takes a C-contiguous NumPy array in "
                        f"the host's byte order (its memory is used, not a copy), got {got}")
        h = self._live()
        with Wrapped() as wrapped:  # the binding shares the tensor's memory; the handle can go
            check(call(h, encode(name, f"an {kind} name"), wrapped.add(array, name)))
        self._arrays[(kind, name)] = array

