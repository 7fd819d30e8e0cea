// GenericBinder, the fast way to bind a shape-generic executable, against BindGeneric, the slow
// way by the symbols' names: on a hand-made executable (two inputs sharing a symbol, a constant
// dim, output and intermediate shapes that are floordivs and products, a scalar argument, a
// constraint), every binding the fast way accepts equals the slow way's, and it gives up
// (null) on each thing the slow way refuses.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "engine/generic_bind.h"

namespace kiln {
namespace {

using test::RandomTensor;

Dim S(const char* n) {
  return Dim::Symbol(n);
}

struct Fixture {
  Executable generic;
  GenericShapes shapes;
  std::vector<DimConstraint> constraints;
};

// x: f32[n, 3, h], y: f32[n, h]; out0: [n, (h - 2) // 2 + h - 2]; out1 copies y; intermediates
// [n * 3, h] and [h // 4]; one scalar argument h; the constraint h <= 40.
Fixture Make() {
  Fixture f;
  f.shapes.inputs = {{S("n"), Dim(3), S("h")}, {S("n"), S("h")}};
  f.shapes.outputs = {{S("n"), FloorDiv(S("h") - 2, 2) + S("h") - 2}, {S("n"), S("h")}};
  f.shapes.intermediates = {{S("n") * 3, S("h")}, {FloorDiv(S("h"), 4)}};
  f.shapes.scalar_symbols = {"h"};
  f.constraints.push_back({DimConstraint::Kind::kAtMost, S("h"), Dim(40), "test"});
  // A constraint over a symbol no input binds cannot be decided; both ways skip it.
  f.constraints.push_back({DimConstraint::Kind::kEqual, S("other"), Dim(1), "skipped"});
  Executable& g = f.generic;
  g.inputs = {{DType::kFloat32, {}, 0}, {DType::kFloat32, {}, 0}};
  g.outputs = {{DType::kFloat32, {}, 0}, {DType::kFloat32, {}, 0}};
  g.intermediates.resize(2);
  g.intermediates[0].type.dtype = DType::kFloat32;
  g.intermediates[0].lifetime = {0, 0, 1};
  g.intermediates[1].type.dtype = DType::kInt64;
  g.intermediates[1].lifetime = {0, 1, 2};
  g.buffer_refs = {{BufferRef::Kind::kInput, 0, 0},
                   {BufferRef::Kind::kArena, 0, 0},
                   {BufferRef::Kind::kArena, 1, 0},
                   {BufferRef::Kind::kOutput, 0, 0}};
  g.copies = {{{BufferRef::Kind::kInput, 1, 0}, 1, 0}};
  g.scalars = {0};
  g.code = std::make_shared<ExecutableCode>();
  g.tier = Tier::kGeneric;
  return f;
}

TEST(GenericBinder, AgreesWithBindGenericOrGivesUp) {
  Fixture f = Make();
  f.shapes.binder = GenericBinder::Make(f.generic.inputs, f.shapes, f.constraints);
  ASSERT_NE(f.shapes.binder, nullptr);
  f.generic.generic = std::make_shared<GenericShapes>(f.shapes);
  const GenericBinder& binder = *f.shapes.binder;
  for (int64_t n : {1, 2, 7})
    for (int64_t h : {2, 3, 17, 40}) {
      SCOPED_TRACE(StrCat("n ", n, " h ", h));
      const std::vector<Tensor> in = {RandomTensor(DType::kFloat32, {n, 3, h}, 1),
                                      RandomTensor(DType::kFloat32, {n, h}, 2)};
      std::shared_ptr<Executable> fast = binder.Bind(f.generic, in);
      ASSERT_NE(fast, nullptr);
      std::shared_ptr<const Executable> slow = BindGeneric(f.generic, {{"n", n}, {"h", h}}, "k");
      EXPECT_EQ(fast->symbols, slow->symbols);
      for (size_t i = 0; i < 2; ++i) {
        EXPECT_EQ(fast->inputs[i].shape, slow->inputs[i].shape);
        EXPECT_EQ(fast->inputs[i].nbytes, slow->inputs[i].nbytes);
        EXPECT_EQ(fast->outputs[i].shape, slow->outputs[i].shape);
        EXPECT_EQ(fast->outputs[i].nbytes, slow->outputs[i].nbytes);
        EXPECT_EQ(fast->intermediates[i].type.shape, slow->intermediates[i].type.shape);
        EXPECT_EQ(fast->intermediates[i].type.nbytes, slow->intermediates[i].type.nbytes);
        EXPECT_EQ(fast->intermediates[i].lifetime.bytes, slow->intermediates[i].lifetime.bytes);
      }
      EXPECT_EQ(fast->outputs[0].shape, (std::vector<int64_t>{n, (h - 2) / 2 + h - 2}));
      EXPECT_EQ(fast->intermediates[1].type.nbytes, static_cast<size_t>(h / 4 * 8));
      EXPECT_EQ(fast->plan.offsets, slow->plan.offsets);
      EXPECT_EQ(fast->plan.peak_bytes, slow->plan.peak_bytes);
      for (size_t i = 0; i < fast->buffer_refs.size(); ++i)
        EXPECT_EQ(fast->buffer_refs[i].offset, slow->buffer_refs[i].offset) << i;
      EXPECT_EQ(fast->copies[0].nbytes, slow->copies[0].nbytes);
      EXPECT_EQ(fast->scalars, (std::vector<int64_t>{h}));
      EXPECT_EQ(fast->tier, Tier::kGeneric);
      EXPECT_EQ(fast->code, f.generic.code);
    }

  // What the slow way refuses (BindInputs' checks, the constraint, a negative shape), the fast
  // way gives up on.
  auto t = [](DType d, std::vector<int64_t> s) { return RandomTensor(d, s, 3); };
  const std::vector<std::vector<Tensor>> bad = {
      {t(DType::kFloat32, {2, 4, 9}), t(DType::kFloat32, {2, 9})},    // the constant dim
      {t(DType::kFloat32, {2, 3, 9}), t(DType::kFloat32, {3, 9})},    // n bound twice, unequal
      {t(DType::kFloat32, {2, 3, 9}), t(DType::kFloat32, {2, 8})},    // h bound twice, unequal
      {t(DType::kFloat64, {2, 3, 9}), t(DType::kFloat32, {2, 9})},    // a dtype
      {t(DType::kFloat32, {2, 3}), t(DType::kFloat32, {2, 9})},       // a rank
      {t(DType::kFloat32, {2, 3, 41}), t(DType::kFloat32, {2, 41})},  // h <= 40
      {t(DType::kFloat32, {2, 3, 1}), t(DType::kFloat32, {2, 1})},    // out0 would be [2, -2]
      {t(DType::kFloat32, {2, 3, 9})},                                // an input missing
  };
  for (size_t i = 0; i < bad.size(); ++i) EXPECT_EQ(binder.Bind(f.generic, bad[i]), nullptr) << i;
}

// Input shapes with an expression (bound the slow way, which checks it) or a shape over a
// symbol no input binds: no fast way.
TEST(GenericBinder, NoneWhereInputsAreNotConstantsAndSymbols) {
  Fixture f = Make();
  GenericShapes expr = f.shapes;
  expr.inputs[1] = {S("n"), S("h") * 2};
  EXPECT_EQ(GenericBinder::Make(f.generic.inputs, expr, f.constraints), nullptr);
  GenericShapes unbound = f.shapes;
  unbound.intermediates[1] = {S("q")};
  EXPECT_EQ(GenericBinder::Make(f.generic.inputs, unbound, f.constraints), nullptr);
  GenericShapes scalar = f.shapes;
  scalar.scalar_symbols = {"q"};
  EXPECT_EQ(GenericBinder::Make(f.generic.inputs, scalar, f.constraints), nullptr);
}

}  // namespace
}  // namespace kiln
