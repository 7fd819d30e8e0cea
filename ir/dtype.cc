#include "ir/dtype.h"

namespace kiln {

Half::Half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u) {  // inf or nan
    bits = static_cast<uint16_t>(sign | 0x7c00u | (absx > 0x7f800000u ? 0x200u : 0u));
    return;
  }
  if (absx >= 0x477ff000u) {  // rounds to >= 65520: overflow to inf
    bits = static_cast<uint16_t>(sign | 0x7c00u);
    return;
  }
  if (absx < 0x38800000u) {  // below the smallest normal half: subnormal or zero
    // Add 0.5 (as a float) so the FPU rounds to a multiple of 2^-24 (the half subnormal
    // step) for us; the low bits then count steps. Rounding up from the largest subnormal
    // gives 1024 steps, which is bit 10 set: the smallest normal, so no mask is applied.
    float a;
    std::memcpy(&a, &absx, 4);
    a += 0.5f;
    uint32_t r;
    std::memcpy(&r, &a, 4);
    bits = static_cast<uint16_t>(sign | (r - 0x3f000000u));
    return;
  }
  uint32_t mant_odd = (absx >> 13) & 1u;
  absx += 0xc8000fffu + mant_odd;  // rebias exponent (-112 << 23) and round to nearest even
  bits = static_cast<uint16_t>(sign | (absx >> 13));
}

Half::operator float() const {
  uint32_t sign = (bits & 0x8000u) << 16;
  uint32_t exp = (bits >> 10) & 0x1fu;
  uint32_t mant = bits & 0x3ffu;
  uint32_t out;
  if (exp == 0) {
    if (mant == 0) {
      out = sign;
    } else {  // subnormal: value = mant * 2^-24
      float f = static_cast<float>(mant) * 5.9604644775390625e-8f;
      std::memcpy(&out, &f, 4);
      out |= sign;
    }
  } else if (exp == 31) {
    out = sign | 0x7f800000u | (mant << 13);
  } else {
    out = sign | ((exp + 112) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &out, 4);
  return f;
}

BFloat16::BFloat16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) {
    bits = static_cast<uint16_t>((x >> 16) | 0x40u);  // keep nan a nan
    return;
  }
  x += 0x7fffu + ((x >> 16) & 1u);
  bits = static_cast<uint16_t>(x >> 16);
}

BFloat16::operator float() const {
  uint32_t x = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

std::string_view DTypeName(DType t) {
  switch (t) {
#define KILN_X(e, n, ty, s) \
  case DType::e:            \
    return n;
    KILN_DTYPES(KILN_X)
#undef KILN_X
  }
  return "?";
}

int DTypeSize(DType t) {
  switch (t) {
#define KILN_X(e, n, ty, s) \
  case DType::e:            \
    return s;
    KILN_DTYPES(KILN_X)
#undef KILN_X
  }
  return 0;
}

bool ParseDType(std::string_view s, DType* out) {
  struct Alias {
    std::string_view name;
    DType t;
  };
  static constexpr Alias kAliases[] = {
      {"float32", DType::kFloat32},   {"float", DType::kFloat32},   {"float16", DType::kFloat16},
      {"bfloat16", DType::kBFloat16}, {"float64", DType::kFloat64}, {"double", DType::kFloat64},
      {"int8", DType::kInt8},         {"int16", DType::kInt16},     {"int32", DType::kInt32},
      {"int64", DType::kInt64},       {"uint8", DType::kUInt8},     {"boolean", DType::kBool},
      {"uint16", DType::kUInt16},     {"uint32", DType::kUInt32},   {"uint64", DType::kUInt64},
  };
#define KILN_X(e, n, ty, sz) \
  if (s == n) {              \
    *out = DType::e;         \
    return true;             \
  }
  KILN_DTYPES(KILN_X)
#undef KILN_X
  for (const Alias& a : kAliases) {
    if (a.name == s) {
      *out = a.t;
      return true;
    }
  }
  return false;
}

}  // namespace kiln
