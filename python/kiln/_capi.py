"""libkiln.so through ctypes: the library, its functions' prototypes, and the status check.

Why ctypes and not a compiled extension: the package is plain Python over the stable C API
(kiln.h), so nothing is compiled against one Python's ABI, any python3 on the machine imports
it, and the C API's compatibility promise (its SONAME) is the only one to keep. ctypes releases
the GIL around every foreign call, so runs from many Python threads overlap inside kiln. A call
costs about a microsecond more than from C, which is small next to a run.

Which library: $KILN_LIBRARY when set, else the one _config.py names (the build tree's, or the
install prefix's, relative to this package).
"""
import ctypes
import os

from . import _config

c_void_pp = ctypes.POINTER(ctypes.c_void_p)
c_char_pp = ctypes.POINTER(ctypes.c_char_p)
c_size_p = ctypes.POINTER(ctypes.c_size_t)
c_int64_p = ctypes.POINTER(ctypes.c_int64)
c_int_p = ctypes.POINTER(ctypes.c_int)


class Error(Exception):
    """A kiln call failed. str(e) is kiln's message; e.status names the kiln_status
    ("KILN_INVALID_ARGUMENT", "KILN_NOT_FOUND", "KILN_UNSUPPORTED", ...)."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status


def _library_path():
    path = os.environ.get("KILN_LIBRARY") or _config.LIBRARY
    if not os.path.isabs(path):
        path = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), path))
    return path


def _load():
    path = _library_path()
    try:
        return ctypes.CDLL(path)
    except OSError as e:
        raise ImportError(f"kiln: cannot load libkiln from '{path}' (set KILN_LIBRARY to its path): {e}")


lib = _load()

_S = ctypes.c_int  # kiln_status
_P = ctypes.c_void_p
_STR = ctypes.c_char_p
_SZ = ctypes.c_size_t

# name: (restype, argtypes). Opaque handles are void pointers; `char**` that kiln allocates are
# void pointers too, so the address survives for kiln_string_free.
_PROTOTYPES = {
    "kiln_last_error": (_STR, []),
    "kiln_status_name": (_STR, [_S]),
    "kiln_version_string": (_STR, []),
    "kiln_string_free": (None, [_P]),
    "kiln_dtype_name": (_STR, [ctypes.c_int]),
    # tensors
    "kiln_tensor_wrap": (_S, [ctypes.c_int, _SZ, c_int64_p, _P, _SZ, c_void_pp]),
    "kiln_tensor_destroy": (None, [_P]),
    "kiln_tensor_dtype": (_S, [_P, c_int_p]),
    "kiln_tensor_rank": (_S, [_P, c_size_p]),
    "kiln_tensor_shape": (_S, [_P, _SZ, c_int64_p]),
    "kiln_tensor_data": (_S, [_P, c_void_pp]),
    # models
    "kiln_model_load_onnx_file": (_S, [_STR, c_void_pp]),
    "kiln_model_load_onnx_buffer": (_S, [_P, _SZ, c_void_pp]),
    "kiln_model_load_onnx_file_with": (_S, [_STR, _P, c_void_pp]),
    "kiln_model_load_onnx_buffer_with": (_S, [_P, _SZ, _P, c_void_pp]),
    "kiln_load_options_create": (_S, [c_void_pp]),
    "kiln_load_options_destroy": (None, [_P]),
    "kiln_load_options_set_max_model_bytes": (_S, [_P, ctypes.c_uint64]),
    "kiln_load_options_set_max_weight_bytes": (_S, [_P, ctypes.c_uint64]),
    "kiln_load_options_set_base_dir": (_S, [_P, _STR]),
    "kiln_model_destroy": (None, [_P]),
    "kiln_model_name": (_S, [_P, c_char_pp]),
    "kiln_model_num_inputs": (_S, [_P, c_size_p]),
    "kiln_model_num_outputs": (_S, [_P, c_size_p]),
    "kiln_model_input_name": (_S, [_P, _SZ, c_char_pp]),
    "kiln_model_output_name": (_S, [_P, _SZ, c_char_pp]),
    "kiln_model_input_type": (_S, [_P, _SZ, c_int_p, c_size_p]),
    "kiln_model_output_type": (_S, [_P, _SZ, c_int_p, c_size_p]),
    "kiln_model_input_dim": (_S, [_P, _SZ, _SZ, c_int64_p, c_char_pp]),
    "kiln_model_output_dim": (_S, [_P, _SZ, _SZ, c_int64_p, c_char_pp]),
    "kiln_model_print": (_S, [_P, c_void_pp]),
    "kiln_model_run_reference": (_S, [_P, _SZ, c_char_pp, c_void_pp, _SZ, c_char_pp, c_void_pp]),
    # options
    "kiln_options_create": (_S, [c_void_pp]),
    "kiln_options_destroy": (None, [_P]),
    "kiln_options_set_target": (_S, [_P, _STR]),
    "kiln_options_set_opt_level": (_S, [_P, ctypes.c_int]),
    "kiln_options_set_num_threads": (_S, [_P, ctypes.c_int]),
    "kiln_options_set_cache_dir": (_S, [_P, _STR]),
    "kiln_options_set_cache_max_bytes": (_S, [_P, ctypes.c_uint64]),
    "kiln_options_set_max_run_bytes": (_S, [_P, ctypes.c_uint64]),
    "kiln_options_set_max_cache_bytes": (_S, [_P, ctypes.c_uint64]),
    "kiln_options_disable_pass": (_S, [_P, _STR]),
    "kiln_options_require_pass": (_S, [_P, _STR]),
    "kiln_options_set_config_int": (_S, [_P, _STR, ctypes.c_int64]),
    "kiln_options_set_config_float": (_S, [_P, _STR, ctypes.c_double]),
    "kiln_options_set_config_string": (_S, [_P, _STR, _STR]),
    "kiln_options_set_config_bool": (_S, [_P, _STR, ctypes.c_int]),
    "kiln_options_set_max_specializations": (_S, [_P, ctypes.c_int]),
    "kiln_options_set_compile_policy": (_S, [_P, _STR]),
    "kiln_options_set_specialize_after": (_S, [_P, ctypes.c_int]),
    "kiln_options_set_compile_threads": (_S, [_P, ctypes.c_int]),
    "kiln_options_set_pipeline": (_S, [_P, _STR]),
    "kiln_options_set_profiling": (_S, [_P, ctypes.c_int]),
    "kiln_options_set_trace": (_S, [_P, ctypes.c_int]),
    # engines
    "kiln_engine_create": (_S, [_P, c_void_pp]),
    "kiln_engine_destroy": (None, [_P]),
    "kiln_engine_run": (_S, [_P, _P, _SZ, c_char_pp, c_void_pp, _SZ, c_char_pp, c_void_pp]),
    "kiln_engine_prepare": (_S, [_P, _P, _SZ, c_char_pp, c_void_pp]),
    "kiln_binding_create": (_S, [_P, _P, c_void_pp]),
    "kiln_binding_destroy": (None, [_P]),
    "kiln_binding_bind_input": (_S, [_P, _STR, _P]),
    "kiln_binding_bind_output": (_S, [_P, _STR, _P]),
    "kiln_binding_run": (_S, [_P]),
    "kiln_engine_explain": (_S, [_P, _P, _SZ, c_char_pp, c_void_pp, c_void_pp]),
    "kiln_engine_stats_json": (_S, [_P, c_void_pp]),
    "kiln_engine_trace_json": (_S, [_P, c_void_pp]),
    "kiln_engine_wait_background_compiles": (_S, [_P]),
    "kiln_engine_save_shapes": (_S, [_P, _P, _STR]),
    "kiln_engine_precompile_shapes": (_S, [_P, _P, _STR]),
}

for _name, (_res, _args) in _PROTOTYPES.items():
    _f = getattr(lib, _name)
    _f.restype = _res
    _f.argtypes = _args


def check(status):
    """Raises Error with kiln's message (this thread's kiln_last_error) unless status is OK."""
    if status != 0:
        message = lib.kiln_last_error().decode("utf-8", "replace")
        raise Error(lib.kiln_status_name(status).decode(), message)


def take_string(ptr):
    """The text of a `char*` kiln allocated, which is then freed."""
    try:
        return ctypes.string_at(ptr).decode("utf-8", "replace") if ptr else ""
    finally:
        lib.kiln_string_free(ptr)


def encode(s, what):
    if not isinstance(s, str):
        raise TypeError(f"kiln: {what} must be a str, got {type(s).__name__}")
    return s.encode("utf-8")
