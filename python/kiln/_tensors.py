"""NumPy arrays to and from kiln tensors, without copies where the layout allows.

In: a C-contiguous array of a kiln dtype is wrapped (kiln_tensor_wrap): kiln reads the array's
own memory, so the array must outlive the run (the caller of `wrap` keeps it). Anything else is
first made C-contiguous by NumPy (one copy).
Out: a tensor kiln made becomes an array over kiln's memory; the array's base owns the tensor
and destroys it when the last view of it is gone.
"""
import ctypes

import numpy as np

from ._capi import Error, check, lib

# kiln_dtype values (kiln.h) and NumPy's dtypes. KILN_BF16 (2) has no NumPy dtype.
DTYPES = {
    0: np.dtype(np.float32),
    1: np.dtype(np.float16),
    3: np.dtype(np.float64),
    4: np.dtype(np.int8),
    5: np.dtype(np.int16),
    6: np.dtype(np.int32),
    7: np.dtype(np.int64),
    8: np.dtype(np.uint8),
    9: np.dtype(np.bool_),
    10: np.dtype(np.uint16),
    11: np.dtype(np.uint32),
    12: np.dtype(np.uint64),
}
CODES = {dt: code for code, dt in DTYPES.items()}
BF16 = 2


def dtype_of(code):
    """NumPy's dtype for a kiln_dtype, or the string "bf16" (which NumPy lacks)."""
    if code in DTYPES:
        return DTYPES[code]
    return lib.kiln_dtype_name(code).decode() if lib.kiln_dtype_name(code) else f"dtype {code}"


class Wrapped:
    """kiln tensors over arrays, destroyed together (use as a context manager). Holds the
    arrays, so their memory outlives the tensors."""

    def __init__(self):
        self.arrays, self.handles = [], []

    def add(self, array, name, dtype=None):
        a = array if isinstance(array, np.ndarray) else np.asarray(array, dtype=dtype)
        a = np.ascontiguousarray(a)  # no copy when already C-contiguous
        if not a.dtype.isnative:
            a = a.astype(a.dtype.newbyteorder("="))
        code = CODES.get(a.dtype)
        if code is None:
            raise TypeError(f"kiln: input '{name}': NumPy dtype {a.dtype} has no kiln dtype")
        shape = (ctypes.c_int64 * max(a.ndim, 1))(*a.shape)
        handle = ctypes.c_void_p()
        check(lib.kiln_tensor_wrap(code, a.ndim, shape, a.ctypes.data or None, a.nbytes,
                                   ctypes.byref(handle)))
        self.arrays.append(a)
        self.handles.append(handle.value)
        return handle.value

    def close(self):
        for h in self.handles:
            lib.kiln_tensor_destroy(h)
        self.handles, self.arrays = [], []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class _Owner:
    """The base of an output array: NumPy reads the memory through __array_interface__, and
    kiln's tensor is destroyed when the array (and every view of it) is gone."""

    def __init__(self, handle, dtype, shape, data):
        self._handle = handle
        self._lib = lib  # kept: at interpreter exit the module's globals may be gone first
        self.__array_interface__ = {
            "shape": shape,
            "typestr": dtype.str,
            "data": (data, False),
            "version": 3,
        }

    def __del__(self):
        if self._handle:
            self._lib.kiln_tensor_destroy(self._handle)
            self._handle = None


def to_array(handle, name):
    """An array over the tensor `handle` (which it then owns)."""
    try:
        code = ctypes.c_int()
        rank = ctypes.c_size_t()
        check(lib.kiln_tensor_dtype(handle, ctypes.byref(code)))
        check(lib.kiln_tensor_rank(handle, ctypes.byref(rank)))
        dims = (ctypes.c_int64 * max(rank.value, 1))()
        check(lib.kiln_tensor_shape(handle, rank.value, dims))
        shape = tuple(dims[i] for i in range(rank.value))
        if code.value not in DTYPES:
            raise Error("KILN_UNSUPPORTED",
                        f"kiln: output '{name}' is {dtype_of(code.value)}, which NumPy has no dtype for")
        dtype = DTYPES[code.value]
        data = ctypes.c_void_p()
        check(lib.kiln_tensor_data(handle, ctypes.byref(data)))
    except BaseException:
        lib.kiln_tensor_destroy(handle)
        raise
    if not data.value:  # no elements: kiln has no buffer to lend
        lib.kiln_tensor_destroy(handle)
        return np.empty(shape, dtype)
    return np.asarray(_Owner(handle, dtype, shape, data.value))
