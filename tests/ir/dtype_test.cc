#include "ir/dtype.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

namespace kiln {
namespace {

std::vector<DType> AllDTypes() {
  return {
#define KILN_X(e, n, t, s) DType::e,
      KILN_DTYPES(KILN_X)
#undef KILN_X
  };
}

float FloatFromBits(uint32_t x) {
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}
uint32_t BitsOfFloat(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  return x;
}
uint16_t HalfBits(float f) {
  return Half(f).bits;
}
float HalfValue(uint16_t bits) {
  Half h;
  h.bits = bits;
  return h;
}
uint16_t BF16Bits(float f) {
  return BFloat16(f).bits;
}
float BF16Value(uint16_t bits) {
  BFloat16 b;
  b.bits = bits;
  return b;
}

TEST(DType, NameRoundTripsForEveryDType) {
  for (DType t : AllDTypes()) {
    DType parsed = DType::kBool;
    ASSERT_TRUE(ParseDType(DTypeName(t), &parsed)) << DTypeName(t);
    EXPECT_EQ(parsed, t) << DTypeName(t);
  }
}

TEST(DType, NamesAndSizes) {
  EXPECT_EQ(DTypeName(DType::kFloat32), "f32");
  EXPECT_EQ(DTypeName(DType::kFloat16), "f16");
  EXPECT_EQ(DTypeName(DType::kBFloat16), "bf16");
  EXPECT_EQ(DTypeName(DType::kFloat64), "f64");
  EXPECT_EQ(DTypeName(DType::kInt8), "i8");
  EXPECT_EQ(DTypeName(DType::kInt16), "i16");
  EXPECT_EQ(DTypeName(DType::kInt32), "i32");
  EXPECT_EQ(DTypeName(DType::kInt64), "i64");
  EXPECT_EQ(DTypeName(DType::kUInt8), "u8");
  EXPECT_EQ(DTypeName(DType::kBool), "bool");
  EXPECT_EQ(DTypeName(DType::kUInt16), "u16");
  EXPECT_EQ(DTypeName(DType::kUInt32), "u32");
  EXPECT_EQ(DTypeName(DType::kUInt64), "u64");
  for (DType t : AllDTypes()) {
    int size = DispatchDType(t, [&]<typename T>() { return static_cast<int>(sizeof(T)); });
    EXPECT_EQ(DTypeSize(t), size) << DTypeName(t);
    EXPECT_EQ(DispatchDType(t, [&]<typename T>() { return DTypeOf<T>::value; }), t);
  }
}

TEST(DType, AliasesParse) {
  struct Case {
    const char* text;
    DType want;
  };
  const Case cases[] = {
      {"float32", DType::kFloat32},   {"float", DType::kFloat32},   {"float16", DType::kFloat16},
      {"bfloat16", DType::kBFloat16}, {"float64", DType::kFloat64}, {"double", DType::kFloat64},
      {"int8", DType::kInt8},         {"int16", DType::kInt16},     {"int32", DType::kInt32},
      {"int64", DType::kInt64},       {"uint8", DType::kUInt8},     {"boolean", DType::kBool},
  };
  for (const Case& c : cases) {
    DType parsed = c.want == DType::kBool ? DType::kFloat32 : DType::kBool;
    ASSERT_TRUE(ParseDType(c.text, &parsed)) << c.text;
    EXPECT_EQ(parsed, c.want) << c.text;
  }
}

TEST(DType, UnknownNamesAreRejectedAndLeaveTheOutputAlone) {
  for (const char* bad : {"", "f8", "F32", "float32 ", "uint128", "int", "i128", "f32x"}) {
    DType out = DType::kInt16;
    EXPECT_FALSE(ParseDType(bad, &out)) << bad;
    EXPECT_EQ(out, DType::kInt16) << bad;
  }
}

TEST(DType, Predicates) {
  for (DType t : AllDTypes()) {
    bool is_float = t == DType::kFloat32 || t == DType::kFloat16 || t == DType::kBFloat16 ||
                    t == DType::kFloat64;
    bool is_unsigned =
        t == DType::kUInt8 || t == DType::kUInt16 || t == DType::kUInt32 || t == DType::kUInt64;
    bool is_int = t == DType::kInt8 || t == DType::kInt16 || t == DType::kInt32 ||
                  t == DType::kInt64 || is_unsigned;
    EXPECT_EQ(IsFloat(t), is_float) << DTypeName(t);
    EXPECT_EQ(IsInteger(t), is_int) << DTypeName(t);
    EXPECT_EQ(IsUnsignedInteger(t), is_unsigned) << DTypeName(t);
    EXPECT_EQ(IsSignedInteger(t), is_int && !is_unsigned) << DTypeName(t);
  }
}

// ---- Half ----

TEST(Half, ExactValues) {
  EXPECT_EQ(HalfBits(0.0f), 0x0000);
  EXPECT_EQ(HalfBits(-0.0f), 0x8000);
  EXPECT_EQ(HalfBits(1.0f), 0x3c00);
  EXPECT_EQ(HalfBits(-2.0f), 0xc000);
  EXPECT_EQ(HalfBits(0.5f), 0x3800);
  EXPECT_EQ(HalfBits(1.5f), 0x3e00);
  EXPECT_EQ(HalfBits(65504.0f), 0x7bff);                  // largest finite
  EXPECT_EQ(HalfBits(std::ldexp(1.0f, -14)), 0x0400);     // smallest normal
  EXPECT_EQ(HalfBits(std::ldexp(1.0f, -24)), 0x0001);     // smallest subnormal
  EXPECT_EQ(HalfBits(std::ldexp(1023.0f, -24)), 0x03ff);  // largest subnormal
  EXPECT_EQ(HalfBits(-std::ldexp(5.0f, -24)), 0x8005);

  EXPECT_EQ(HalfValue(0x3c00), 1.0f);
  EXPECT_EQ(HalfValue(0xc000), -2.0f);
  EXPECT_EQ(HalfValue(0x7bff), 65504.0f);
  EXPECT_EQ(HalfValue(0x3555), 0.333251953125f);
  EXPECT_EQ(HalfValue(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(HalfValue(0x03ff), std::ldexp(1023.0f, -24));
  EXPECT_EQ(HalfValue(0x8001), -std::ldexp(1.0f, -24));
  EXPECT_TRUE(std::signbit(HalfValue(0x8000)));
  EXPECT_EQ(HalfValue(0x8000), 0.0f);
}

TEST(Half, RoundsToNearestEven) {
  const float ulp = std::ldexp(1.0f, -10);          // half's spacing in [1, 2)
  EXPECT_EQ(HalfBits(1.0f + ulp / 2), 0x3c00);      // tie, 0x3c00 is even
  EXPECT_EQ(HalfBits(1.0f + 3 * ulp / 2), 0x3c02);  // tie, 0x3c01 is odd
  EXPECT_EQ(HalfBits(1.0f + ulp / 2 + std::ldexp(1.0f, -20)), 0x3c01);
  EXPECT_EQ(HalfBits(1.0f + ulp / 2 - std::ldexp(1.0f, -20)), 0x3c00);
  EXPECT_EQ(HalfBits(-(1.0f + 3 * ulp / 2)), 0xbc02);
  EXPECT_EQ(HalfBits(2048.0f + 1.0f), 0x6800);  // 2049 ties between 2048 and 2050
  EXPECT_EQ(HalfBits(2048.0f + 3.0f), 0x6802);  // 2051 ties between 2050 and 2052
}

TEST(Half, Subnormals) {
  const float step = std::ldexp(1.0f, -24);
  EXPECT_EQ(HalfBits(step / 2), 0x0000);  // tie to even zero
  EXPECT_EQ(HalfBits(step / 2 + step / 64), 0x0001);
  EXPECT_EQ(HalfBits(3 * step / 2), 0x0002);  // tie to even 2
  EXPECT_EQ(HalfBits(5 * step / 2), 0x0002);  // tie to even 2
  EXPECT_EQ(HalfBits(-3 * step / 2), 0x8002);
  EXPECT_EQ(HalfBits(std::ldexp(1.0f, -30)), 0x0000);
  EXPECT_EQ(HalfBits(-std::ldexp(1.0f, -30)), 0x8000);
  EXPECT_EQ(HalfBits(std::numeric_limits<float>::denorm_min()), 0x0000);
  // From the largest subnormal up across the boundary to the smallest normal.
  EXPECT_EQ(HalfBits(1023.5f * step), 0x0400);  // tie: 0x03ff is odd
  EXPECT_EQ(HalfBits(1023.75f * step), 0x0400);
  EXPECT_EQ(HalfBits(1023.25f * step), 0x03ff);
  EXPECT_EQ(HalfBits(-1023.75f * step), 0x8400);
}

TEST(Half, InfNanAndOverflow) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(HalfBits(inf), 0x7c00);
  EXPECT_EQ(HalfBits(-inf), 0xfc00);
  EXPECT_EQ(HalfBits(65519.0f), 0x7bff);
  EXPECT_EQ(HalfBits(65520.0f), 0x7c00);  // tie between 65504 (odd) and 65536 (inf)
  EXPECT_EQ(HalfBits(-65520.0f), 0xfc00);
  EXPECT_EQ(HalfBits(1e6f), 0x7c00);
  EXPECT_EQ(HalfBits(std::numeric_limits<float>::max()), 0x7c00);
  EXPECT_EQ(HalfValue(0x7c00), inf);
  EXPECT_EQ(HalfValue(0xfc00), -inf);
  for (uint32_t nan : {0x7fc00000u, 0x7f800001u, 0xffc00000u, 0x7fffffffu}) {
    uint16_t h = HalfBits(FloatFromBits(nan));
    EXPECT_EQ(h & 0x7c00, 0x7c00) << std::hex << nan;
    EXPECT_NE(h & 0x03ff, 0) << std::hex << nan;  // still a nan, not inf
    EXPECT_EQ(h & 0x8000, (nan >> 16) & 0x8000) << std::hex << nan;
  }
  EXPECT_TRUE(std::isnan(HalfValue(0x7e00)));
  EXPECT_TRUE(std::isnan(HalfValue(0x7c01)));
  EXPECT_TRUE(std::isnan(HalfValue(0xfe00)));
}

TEST(Half, EveryBitPatternRoundTrips) {
  for (uint32_t b = 0; b <= 0xffff; ++b) {
    float f = HalfValue(static_cast<uint16_t>(b));
    bool nan = (b & 0x7c00) == 0x7c00 && (b & 0x3ff) != 0;
    if (nan) {
      EXPECT_TRUE(std::isnan(f)) << std::hex << b;
      EXPECT_TRUE(std::isnan(HalfValue(HalfBits(f)))) << std::hex << b;
    } else {
      ASSERT_EQ(HalfBits(f), b) << std::hex << b;
    }
  }
}

// Every tie between neighbouring positive halves, and the floats just either side of it: the
// rounding agrees with an independent nearest-even choice at every point.
TEST(Half, EveryMidpointRoundsCorrectly) {
  for (uint32_t b = 0; b < 0x7c00; ++b) {
    float lo = HalfValue(static_cast<uint16_t>(b));
    float hi = b + 1 == 0x7c00 ? 65536.0f : HalfValue(static_cast<uint16_t>(b + 1));
    float mid = (lo + hi) / 2;  // exact: one more bit than a half has
    uint16_t even = (b & 1) ? static_cast<uint16_t>(b + 1) : static_cast<uint16_t>(b);
    ASSERT_EQ(HalfBits(mid), even) << std::hex << b;
    ASSERT_EQ(HalfBits(std::nextafter(mid, 0.0f)), b) << std::hex << b;
    ASSERT_EQ(HalfBits(std::nextafter(mid, hi)), b + 1) << std::hex << b;
    ASSERT_EQ(HalfBits(-mid), even | 0x8000) << std::hex << b;
  }
}

// ---- BFloat16 ----

TEST(BFloat16, ExactValues) {
  EXPECT_EQ(BF16Bits(0.0f), 0x0000);
  EXPECT_EQ(BF16Bits(-0.0f), 0x8000);
  EXPECT_EQ(BF16Bits(1.0f), 0x3f80);
  EXPECT_EQ(BF16Bits(-2.0f), 0xc000);
  EXPECT_EQ(BF16Bits(3.0f), 0x4040);
  EXPECT_EQ(BF16Bits(1.0f / 128), 0x3c00);
  EXPECT_EQ(BF16Value(0x3f80), 1.0f);
  EXPECT_EQ(BF16Value(0x4049), 3.140625f);
  EXPECT_EQ(BF16Value(0x7f7f), FloatFromBits(0x7f7f0000u));
}

TEST(BFloat16, RoundsToNearestEven) {
  EXPECT_EQ(BF16Bits(FloatFromBits(0x3f808000u)), 0x3f80);  // tie, even below
  EXPECT_EQ(BF16Bits(FloatFromBits(0x3f818000u)), 0x3f82);  // tie, even above
  EXPECT_EQ(BF16Bits(FloatFromBits(0x3f808001u)), 0x3f81);
  EXPECT_EQ(BF16Bits(FloatFromBits(0x3f807fffu)), 0x3f80);
  EXPECT_EQ(BF16Bits(FloatFromBits(0xbf818000u)), 0xbf82);
  EXPECT_EQ(BF16Bits(3.14159265f), 0x4049);
}

TEST(BFloat16, SubnormalsInfNanOverflow) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(BF16Bits(FloatFromBits(0x00010000u)), 0x0001);
  EXPECT_EQ(BF16Bits(FloatFromBits(0x00008000u)), 0x0000);  // tie to even zero
  EXPECT_EQ(BF16Bits(FloatFromBits(0x00018000u)), 0x0002);  // tie to even 2
  EXPECT_EQ(BF16Bits(FloatFromBits(0x007fffffu)), 0x0080);  // rounds up to the smallest normal
  EXPECT_EQ(BF16Value(0x0001), FloatFromBits(0x00010000u));
  EXPECT_EQ(BF16Bits(inf), 0x7f80);
  EXPECT_EQ(BF16Bits(-inf), 0xff80);
  EXPECT_EQ(BF16Bits(std::numeric_limits<float>::max()), 0x7f80);  // rounds past the top
  EXPECT_EQ(BF16Bits(-std::numeric_limits<float>::max()), 0xff80);
  EXPECT_EQ(BF16Bits(FloatFromBits(0x7f7f7fffu)), 0x7f7f);
  for (uint32_t nan : {0x7fc00000u, 0x7f800001u, 0xff800001u, 0x7fffffffu}) {
    EXPECT_TRUE(std::isnan(BF16Value(BF16Bits(FloatFromBits(nan))))) << std::hex << nan;
  }
}

TEST(BFloat16, EveryBitPatternRoundTrips) {
  for (uint32_t b = 0; b <= 0xffff; ++b) {
    float f = BF16Value(static_cast<uint16_t>(b));
    EXPECT_EQ(BitsOfFloat(f), b << 16);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(BF16Value(BF16Bits(f)))) << std::hex << b;
    } else {
      ASSERT_EQ(BF16Bits(f), b) << std::hex << b;
    }
  }
}

}  // namespace
}  // namespace kiln
