// A dense, row-major, host tensor: the values that constants hold, that reference kernels
// read and write, and that the interpreter passes around.
//
// Ownership: a Tensor is a handle; copies share the buffer (use Clone() for a deep copy).
// Storage is 64-byte aligned. A Tensor is not synchronized: share it between threads only
// for reading.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ir/dtype.h"
#include "ir/error.h"

namespace kiln {

// The machine's physical memory in bytes; 0 when the system does not say. Memory limits with
// machine-tied defaults (an engine's max_run_bytes, the importer's max_weight_bytes) and the CPU
// allocator's refusal of impossible requests are all measured against it.
int64_t PhysicalMemoryBytes();

class Tensor {
 public:
  Tensor() = default;

  // A new zero-filled tensor. Throws kInvalidArgument on a negative dim or a size that
  // overflows, naming the shape.
  static Tensor Empty(DType dtype, const std::vector<int64_t>& shape);
  // A view of caller-owned memory; `owner` (may be null) is kept alive with the tensor.
  static Tensor Wrap(DType dtype, const std::vector<int64_t>& shape, void* data,
                     std::shared_ptr<void> owner);
  template <typename T>
  static Tensor FromVector(const std::vector<int64_t>& shape, const std::vector<T>& values) {
    Tensor t = Empty(DTypeOf<T>::value, shape);
    KILN_CHECK(static_cast<int64_t>(values.size()) == t.numel(), "FromVector: ", values.size(),
               " values for ", t.numel(), " elements");
    T* d = t.data<T>();
    for (size_t i = 0; i < values.size(); ++i) d[i] = values[i];
    return t;
  }
  template <typename T>
  static Tensor Scalar(T v) {
    return FromVector<T>({}, {v});
  }

  bool defined() const { return defined_; }
  DType dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  int ndim() const { return static_cast<int>(shape_.size()); }
  int64_t numel() const { return numel_; }
  size_t nbytes() const { return static_cast<size_t>(numel_) * DTypeSize(dtype_); }
  // Row-major strides in elements.
  std::vector<int64_t> strides() const;

  void* raw_data() const { return data_; }
  template <typename T>
  T* data() const {
    KILN_CHECK(DTypeOf<T>::value == dtype_, "tensor of ", DTypeName(dtype_), " read as ",
               DTypeName(DTypeOf<T>::value));
    return static_cast<T*>(data_);
  }

  Tensor Clone() const;
  // The buffer's owner, held weakly: while it lives, Wrap(dtype(), shape(), raw_data(),
  // owner.lock()) is this tensor again (a cache can find a buffer without keeping it alive).
  std::weak_ptr<void> weak_owner() const { return owner_; }
  // Same buffer, another shape with the same element count.
  Tensor Reshaped(const std::vector<int64_t>& shape) const;
  // Element i (row-major) converted to double; for printing and tests.
  double GetAsDouble(int64_t i) const;
  void SetFromDouble(int64_t i, double v);

  // `f32[2, 3]`
  std::string TypeString() const;

 private:
  std::shared_ptr<void> owner_;
  void* data_ = nullptr;
  DType dtype_ = DType::kFloat32;
  std::vector<int64_t> shape_;
  int64_t numel_ = 0;
  bool defined_ = false;
};

// Checked product of dims; throws kInvalidArgument naming `what` on a negative dim or overflow.
int64_t CheckedNumel(const std::vector<int64_t>& shape, const std::string& what);
// A new tensor holding `x` with its axes permuted: axis i of the result is axis perm[i] of x
// (perm a permutation of x's axes; any dtype).
Tensor PermuteAxes(const Tensor& x, const std::vector<int>& perm);
std::string IntsToString(const std::vector<int64_t>& v);  // `[2, 3]`

}  // namespace kiln
