#include "ir/tensor.h"

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>

#include <unistd.h>

namespace kiln {

int64_t PhysicalMemoryBytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return 0;
  return static_cast<int64_t>(pages) * page;
}

std::string IntsToString(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(v[i]);
  }
  return s + "]";
}

int64_t CheckedNumel(const std::vector<int64_t>& shape, const std::string& what) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0)
      Throw(ErrorCode::kInvalidArgument, what, ": negative dimension in shape ",
            IntsToString(shape));
    if (__builtin_mul_overflow(n, d, &n))
      Throw(ErrorCode::kInvalidArgument, what, ": shape ", IntsToString(shape), " overflows int64");
  }
  return n;
}

Tensor Tensor::Empty(DType dtype, const std::vector<int64_t>& shape) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = shape;
  t.defined_ = true;
  t.numel_ = CheckedNumel(shape, "tensor");
  size_t bytes;
  // The cap keeps the rounding up to a multiple of 64 below from wrapping around to a tiny
  // allocation.
  if (__builtin_mul_overflow(static_cast<size_t>(t.numel_), static_cast<size_t>(DTypeSize(dtype)),
                             &bytes) ||
      bytes > static_cast<size_t>(PTRDIFF_MAX) - 64)
    Throw(ErrorCode::kInvalidArgument, "tensor: shape ", IntsToString(shape), " is too large");
  size_t rounded = (bytes + 63) / 64 * 64;
  if (rounded == 0) rounded = 64;
  void* p = std::aligned_alloc(64, rounded);
  if (!p)
    Throw(ErrorCode::kOutOfMemory, "tensor: cannot allocate ", bytes, " bytes for shape ",
          IntsToString(shape));
  std::memset(p, 0, rounded);
  t.owner_ = std::shared_ptr<void>(p, [](void* q) { std::free(q); });
  t.data_ = p;
  return t;
}

Tensor Tensor::Wrap(DType dtype, const std::vector<int64_t>& shape, void* data,
                    std::shared_ptr<void> owner) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = shape;
  t.defined_ = true;
  t.numel_ = CheckedNumel(shape, "tensor");
  t.data_ = data;
  t.owner_ = owner ? std::move(owner) : std::shared_ptr<void>(data, [](void*) {});
  return t;
}

std::vector<int64_t> Tensor::strides() const {
  std::vector<int64_t> s(shape_.size());
  int64_t acc = 1;
  for (size_t i = shape_.size(); i-- > 0;) {
    s[i] = acc;
    acc *= shape_[i];
  }
  return s;
}

Tensor Tensor::Clone() const {
  if (!defined_) return Tensor();
  Tensor t = Empty(dtype_, shape_);
  if (nbytes()) std::memcpy(t.data_, data_, nbytes());
  return t;
}

Tensor Tensor::Reshaped(const std::vector<int64_t>& shape) const {
  int64_t n = CheckedNumel(shape, "reshape");
  KILN_CHECK(n == numel_, "Reshaped to ", IntsToString(shape), " from ", IntsToString(shape_));
  Tensor t = *this;
  t.shape_ = shape;
  return t;
}

double Tensor::GetAsDouble(int64_t i) const {
  return DispatchDType(
      dtype_, [&]<typename T>() { return static_cast<double>(static_cast<const T*>(data_)[i]); });
}

void Tensor::SetFromDouble(int64_t i, double v) {
  DispatchDType(dtype_, [&]<typename T>() {
    if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
      static_cast<T*>(data_)[i] = T(static_cast<float>(v));
    } else if constexpr (std::is_same_v<T, bool>) {
      static_cast<T*>(data_)[i] = v != 0;
    } else if constexpr (std::is_integral_v<T>) {
      // Saturate: converting an out-of-range double to an integer is undefined behaviour.
      double lo = static_cast<double>(std::numeric_limits<T>::lowest());
      double hi = static_cast<double>(std::numeric_limits<T>::max());
      T out;
      if (std::isnan(v))
        out = 0;
      else if (v <= lo)
        out = std::numeric_limits<T>::lowest();
      else if (v >= hi)
        out = std::numeric_limits<T>::max();
      else
        out = static_cast<T>(v);
      static_cast<T*>(data_)[i] = out;
    } else {
      static_cast<T*>(data_)[i] = static_cast<T>(v);
    }
  });
}

std::string Tensor::TypeString() const {
  return std::string(DTypeName(dtype_)) + IntsToString(shape_);
}

Tensor PermuteAxes(const Tensor& x, const std::vector<int>& perm) {
  const std::vector<int64_t>& in_shape = x.shape();
  KILN_CHECK(perm.size() == in_shape.size(), "PermuteAxes: perm has ", perm.size(),
             " entries for rank ", in_shape.size());
  const std::vector<int64_t> in_strides = x.strides();
  const size_t rank = perm.size();
  std::vector<int64_t> shape(rank), from(rank);
  for (size_t i = 0; i < rank; ++i) {
    shape[i] = in_shape[perm[i]];
    from[i] = in_strides[perm[i]];
  }
  Tensor out = Tensor::Empty(x.dtype(), shape);
  const size_t bytes = DTypeSize(x.dtype());
  const auto* src = static_cast<const char*>(x.raw_data());
  auto* dst = static_cast<char*>(out.raw_data());
  // An odometer over the result's index; `at` is the element of x it reads.
  std::vector<int64_t> idx(rank, 0);
  int64_t at = 0;
  for (int64_t o = 0; o < out.numel(); ++o) {
    std::memcpy(dst + o * bytes, src + at * bytes, bytes);
    for (size_t d = rank; d-- > 0;) {
      at += from[d];
      if (++idx[d] < shape[d]) break;
      at -= from[d] * shape[d];
      idx[d] = 0;
    }
  }
  return out;
}

}  // namespace kiln
