#include "ir/tensor.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <vector>

#include "common/test_util.h"

namespace kiln {
namespace {

using test::ErrorMessage;
using ::testing::HasSubstr;

std::vector<DType> AllDTypes() {
  return {
#define KILN_X(e, n, t, s) DType::e,
      KILN_DTYPES(KILN_X)
#undef KILN_X
  };
}

bool Aligned64(const Tensor& t) {
  return reinterpret_cast<uintptr_t>(t.raw_data()) % 64 == 0;
}

TEST(Tensor, DefaultIsUndefined) {
  Tensor t;
  EXPECT_FALSE(t.defined());
  EXPECT_EQ(t.numel(), 0);
  EXPECT_EQ(t.raw_data(), nullptr);
  EXPECT_FALSE(t.Clone().defined());
}

TEST(Tensor, EmptyIsZeroedAndAligned) {
  for (DType dt : AllDTypes()) {
    for (const std::vector<int64_t>& shape : std::vector<std::vector<int64_t>>{
             {}, {1}, {7}, {3, 5}, {2, 3, 4}, {0}, {4, 0, 2}, {1000}}) {
      Tensor t = Tensor::Empty(dt, shape);
      EXPECT_TRUE(t.defined());
      EXPECT_EQ(t.dtype(), dt);
      EXPECT_EQ(t.shape(), shape);
      EXPECT_EQ(t.ndim(), static_cast<int>(shape.size()));
      int64_t n = 1;
      for (int64_t d : shape) n *= d;
      EXPECT_EQ(t.numel(), n);
      EXPECT_EQ(t.nbytes(), static_cast<size_t>(n * DTypeSize(dt)));
      ASSERT_NE(t.raw_data(), nullptr);
      EXPECT_TRUE(Aligned64(t)) << t.TypeString();
      const unsigned char* bytes = static_cast<const unsigned char*>(t.raw_data());
      for (size_t i = 0; i < t.nbytes(); ++i) ASSERT_EQ(bytes[i], 0) << t.TypeString() << " " << i;
      for (int64_t i = 0; i < t.numel(); ++i) ASSERT_EQ(t.GetAsDouble(i), 0.0);
    }
  }
}

TEST(Tensor, ScalarHasOneElement) {
  Tensor t = Tensor::Scalar<float>(2.5f);
  EXPECT_EQ(t.ndim(), 0);
  EXPECT_EQ(t.numel(), 1);
  EXPECT_EQ(t.data<float>()[0], 2.5f);
  EXPECT_EQ(t.TypeString(), "f32[]");
}

TEST(Tensor, FromVector) {
  Tensor t = Tensor::FromVector<int32_t>({2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_EQ(t.dtype(), DType::kInt32);
  EXPECT_EQ(t.TypeString(), "i32[2, 3]");
  for (int i = 0; i < 6; ++i) EXPECT_EQ(t.data<int32_t>()[i], i + 1);
  EXPECT_TRUE(Aligned64(t));

  Tensor h = Tensor::FromVector<Half>({2}, {Half(1.5f), Half(-2.0f)});
  EXPECT_EQ(h.dtype(), DType::kFloat16);
  EXPECT_EQ(h.GetAsDouble(1), -2.0);

  std::string msg = ErrorMessage([] { Tensor::FromVector<float>({2, 2}, {1, 2, 3}); });
  EXPECT_THAT(msg, HasSubstr("3 values for 4 elements"));
}

TEST(Tensor, ReadingAsTheWrongTypeIsAnError) {
  Tensor t = Tensor::Empty(DType::kFloat32, {2});
  std::string msg = ErrorMessage([&] { t.data<int32_t>(); });
  EXPECT_THAT(msg, HasSubstr("tensor of f32 read as i32"));
}

TEST(Tensor, CopiesShareCloneIsDeep) {
  Tensor a = Tensor::FromVector<float>({3}, {1, 2, 3});
  Tensor shared = a;
  Tensor deep = a.Clone();
  EXPECT_EQ(shared.raw_data(), a.raw_data());
  EXPECT_NE(deep.raw_data(), a.raw_data());
  EXPECT_TRUE(Aligned64(deep));
  EXPECT_TRUE(test::TensorsNear(deep, a, 0, 0));
  deep.data<float>()[0] = 10;
  shared.data<float>()[1] = 20;
  EXPECT_EQ(a.data<float>()[0], 1);
  EXPECT_EQ(a.data<float>()[1], 20);
  EXPECT_EQ(deep.data<float>()[1], 2);

  Tensor empty = Tensor::Empty(DType::kInt64, {0, 3});
  Tensor empty_clone = empty.Clone();
  EXPECT_EQ(empty_clone.shape(), empty.shape());
  EXPECT_EQ(empty_clone.dtype(), DType::kInt64);
}

TEST(Tensor, CloneKeepsItsBufferAfterTheOriginalGoes) {
  Tensor c;
  {
    Tensor a = Tensor::FromVector<int64_t>({2}, {7, 8});
    c = a.Clone();
  }
  EXPECT_EQ(c.data<int64_t>()[1], 8);
}

TEST(Tensor, ReshapedSharesTheBuffer) {
  Tensor a = Tensor::FromVector<float>({2, 3}, {0, 1, 2, 3, 4, 5});
  Tensor r = a.Reshaped({3, 2});
  EXPECT_EQ(r.shape(), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(a.shape(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(r.raw_data(), a.raw_data());
  r.data<float>()[5] = 50;
  EXPECT_EQ(a.data<float>()[5], 50);
  EXPECT_EQ(a.Reshaped({6}).numel(), 6);
  EXPECT_EQ(Tensor::Scalar<float>(1).Reshaped({1, 1}).ndim(), 2);

  std::string msg = ErrorMessage([&] { a.Reshaped({4, 2}); });
  EXPECT_THAT(msg, HasSubstr("[4, 2]"));
  EXPECT_THAT(msg, HasSubstr("[2, 3]"));
  msg = ErrorMessage([&] { a.Reshaped({-2, -3}); });
  EXPECT_THAT(msg, HasSubstr("[-2, -3]"));
}

TEST(Tensor, Strides) {
  EXPECT_EQ(Tensor::Empty(DType::kFloat32, {2, 3, 4}).strides(), (std::vector<int64_t>{12, 4, 1}));
  EXPECT_EQ(Tensor::Empty(DType::kFloat32, {5}).strides(), (std::vector<int64_t>{1}));
  EXPECT_EQ(Tensor::Empty(DType::kFloat32, {}).strides(), (std::vector<int64_t>{}));
  EXPECT_EQ(Tensor::Empty(DType::kInt8, {3, 1, 2}).strides(), (std::vector<int64_t>{2, 2, 1}));
  EXPECT_EQ(Tensor::Empty(DType::kFloat32, {2, 0, 3}).strides(), (std::vector<int64_t>{0, 3, 1}));
}

TEST(Tensor, GetAndSetAsDoublePerDType) {
  struct Case {
    DType dtype;
    std::vector<double> in;    // written with SetFromDouble
    std::vector<double> want;  // read back with GetAsDouble
  };
  const Case cases[] = {
      {DType::kFloat32, {1.5, -2.25, 1e30, 0.1}, {1.5, -2.25, 1e30f, 0.1f}},
      {DType::kFloat64, {1.5, -2.25, 1e300, 0.1}, {1.5, -2.25, 1e300, 0.1}},
      {DType::kFloat16, {1.5, -2.25, 65504, 0.1}, {1.5, -2.25, 65504, 0.0999755859375}},
      {DType::kBFloat16, {1.5, -2.25, 256, 0.1}, {1.5, -2.25, 256, 0.10009765625}},
      {DType::kInt8, {127, -128, 3.7, -3.7}, {127, -128, 3, -3}},
      {DType::kInt16, {32767, -32768, 5, -1}, {32767, -32768, 5, -1}},
      {DType::kInt32, {2147483647, -2147483648.0, 12, -9.9}, {2147483647, -2147483648.0, 12, -9}},
      {DType::kInt64, {9007199254740992.0, -4, 0, 1}, {9007199254740992.0, -4, 0, 1}},
      {DType::kUInt8, {255, 0, 17, 1.9}, {255, 0, 17, 1}},
      {DType::kBool, {1, 0, 0.5, -3}, {1, 0, 1, 1}},
  };
  for (const Case& c : cases) {
    Tensor t = Tensor::Empty(c.dtype, {static_cast<int64_t>(c.in.size())});
    for (size_t i = 0; i < c.in.size(); ++i) t.SetFromDouble(static_cast<int64_t>(i), c.in[i]);
    for (size_t i = 0; i < c.in.size(); ++i)
      EXPECT_EQ(t.GetAsDouble(static_cast<int64_t>(i)), c.want[i])
          << DTypeName(c.dtype) << " " << i;
  }
  // The storage holds the native value, not a double.
  Tensor i = Tensor::Empty(DType::kInt32, {1});
  i.SetFromDouble(0, -7);
  EXPECT_EQ(i.data<int32_t>()[0], -7);
  Tensor h = Tensor::Empty(DType::kFloat16, {1});
  h.SetFromDouble(0, 1.0);
  EXPECT_EQ(h.data<Half>()[0].bits, 0x3c00);
}

TEST(Tensor, WrapUsesCallerMemory) {
  alignas(64) float buf[6] = {1, 2, 3, 4, 5, 6};
  Tensor t = Tensor::Wrap(DType::kFloat32, {2, 3}, buf, nullptr);
  EXPECT_EQ(t.raw_data(), buf);
  EXPECT_EQ(t.GetAsDouble(4), 5.0);
  t.SetFromDouble(0, 9);
  EXPECT_EQ(buf[0], 9);

  auto owned = std::make_shared<std::vector<int32_t>>(std::vector<int32_t>{4, 5});
  Tensor w = Tensor::Wrap(DType::kInt32, {2}, owned->data(), owned);
  std::weak_ptr<std::vector<int32_t>> weak = owned;
  owned.reset();
  EXPECT_FALSE(weak.expired());  // the tensor keeps its owner alive
  EXPECT_EQ(w.data<int32_t>()[1], 5);
  w = Tensor();
  EXPECT_TRUE(weak.expired());
}

TEST(Tensor, BadShapesAreErrorsNamingTheShape) {
  auto expect_invalid = [](const std::vector<int64_t>& shape, DType dt, const std::string& want) {
    try {
      Tensor::Empty(dt, shape);
      ADD_FAILURE() << "no error for " << IntsToString(shape);
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
      EXPECT_THAT(e.what(), HasSubstr(want));
    }
  };
  const int64_t big = int64_t{1} << 40;
  expect_invalid({2, -3}, DType::kFloat32, "[2, -3]");
  expect_invalid({-1}, DType::kInt8, "negative dimension in shape [-1]");
  expect_invalid({0, -1}, DType::kFloat32, "[0, -1]");
  expect_invalid({big, big}, DType::kFloat32, "shape [1099511627776, 1099511627776] overflows");
  expect_invalid({std::numeric_limits<int64_t>::max(), 2}, DType::kBool, "overflows int64");
  // The element count fits in int64 but the byte count does not fit in memory's address range.
  expect_invalid({int64_t{1} << 62}, DType::kFloat64, "[4611686018427387904] is too large");
  expect_invalid({(int64_t{1} << 61) - 1}, DType::kFloat64, "is too large");
  expect_invalid({(int64_t{1} << 62) - 1}, DType::kInt32, "is too large");

  std::string msg = ErrorMessage([] { Tensor::Wrap(DType::kFloat32, {3, -1}, nullptr, nullptr); });
  EXPECT_THAT(msg, HasSubstr("[3, -1]"));
  EXPECT_THAT(ErrorMessage([] {
                CheckedNumel({4, -2}, "my op");
              }),
              HasSubstr("my op: negative dimension in shape [4, -2]"));
  EXPECT_EQ(CheckedNumel({}, "x"), 1);
  EXPECT_EQ(CheckedNumel({3, 0, 5}, "x"), 0);
}

TEST(Tensor, PrintsItsType) {
  EXPECT_EQ(Tensor::Empty(DType::kBFloat16, {2, 3}).TypeString(), "bf16[2, 3]");
  EXPECT_EQ(Tensor::Empty(DType::kBool, {0}).TypeString(), "bool[0]");
  EXPECT_EQ(IntsToString({}), "[]");
  EXPECT_EQ(IntsToString({-1, 2}), "[-1, 2]");
}

}  // namespace
}  // namespace kiln
