// Element data types, and the half-precision storage types used by reference kernels.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace kiln {

// The list of data types, once. X(enum, text name, C++ storage type, byte size). New ones are
// appended: the enum values are part of the C API (KILN_F32...).
#define KILN_DTYPES(X)                      \
  X(kFloat32, "f32", float, 4)              \
  X(kFloat16, "f16", ::kiln::Half, 2)       \
  X(kBFloat16, "bf16", ::kiln::BFloat16, 2) \
  X(kFloat64, "f64", double, 8)             \
  X(kInt8, "i8", int8_t, 1)                 \
  X(kInt16, "i16", int16_t, 2)              \
  X(kInt32, "i32", int32_t, 4)              \
  X(kInt64, "i64", int64_t, 8)              \
  X(kUInt8, "u8", uint8_t, 1)               \
  X(kBool, "bool", bool, 1)                 \
  X(kUInt16, "u16", uint16_t, 2)            \
  X(kUInt32, "u32", uint32_t, 4)            \
  X(kUInt64, "u64", uint64_t, 8)

// IEEE binary16 storage. Arithmetic goes through float; conversion rounds to nearest even.
struct Half {
  uint16_t bits = 0;
  Half() = default;
  Half(float f);  // NOLINT: implicit, like a builtin arithmetic type
  operator float() const;
};

// bfloat16 storage: the top 16 bits of a float, rounded to nearest even.
struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  BFloat16(float f);  // NOLINT
  operator float() const;
};

enum class DType : uint8_t {
#define KILN_X(e, n, t, s) e,
  KILN_DTYPES(KILN_X)
#undef KILN_X
};

std::string_view DTypeName(DType t);
int DTypeSize(DType t);
// Parses "f32", also accepting the long spellings "float32", "int64", "float16", "bfloat16".
bool ParseDType(std::string_view s, DType* out);

inline bool IsFloat(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat16 || t == DType::kBFloat16 ||
         t == DType::kFloat64;
}
inline bool IsUnsignedInteger(DType t) {
  return t == DType::kUInt8 || t == DType::kUInt16 || t == DType::kUInt32 || t == DType::kUInt64;
}
inline bool IsInteger(DType t) {
  return t == DType::kInt8 || t == DType::kInt16 || t == DType::kInt32 || t == DType::kInt64 ||
         IsUnsignedInteger(t);
}
inline bool IsSignedInteger(DType t) {
  return IsInteger(t) && !IsUnsignedInteger(t);
}

template <typename T>
struct DTypeOf;
#define KILN_X(e, n, t, s)                   \
  template <>                                \
  struct DTypeOf<t> {                        \
    static constexpr DType value = DType::e; \
  };
KILN_DTYPES(KILN_X)
#undef KILN_X

// Calls fn.template operator()<T>() with T the storage type of `t`.
// Usage: DispatchDType(t, [&]<typename T>() { ... });
template <typename Fn>
decltype(auto) DispatchDType(DType t, Fn&& fn) {
  switch (t) {
#define KILN_X(e, n, ty, s) \
  case DType::e:            \
    return fn.template operator()<ty>();
    KILN_DTYPES(KILN_X)
#undef KILN_X
  }
  return fn.template operator()<float>();  // unreachable: the switch covers every enumerator
}

}  // namespace kiln
