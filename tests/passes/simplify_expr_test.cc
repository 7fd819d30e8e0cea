// SimplifyExpr: golden tests for every rule, the cases where a rule must not fire, and a check
// through the reference interpreter that simplified graphs compute the same values.
#include <gtest/gtest.h>

#include "common/models.h"
#include "common/pass_test_util.h"
#include "ir/interpreter.h"

namespace kiln {
namespace {

using test::ExpectPassOutput;

void ExpectSimplified(const std::string& input, const std::string& expected) {
  ExpectPassOutput("SimplifyExpr", input, expected);
}
void ExpectUnchanged(const std::string& input) {
  ExpectPassOutput("SimplifyExpr", input, input);
}

// ---- identities with constants ----

TEST(SimplifyExpr, MultiplyByOneOnEitherSide) {
  ExpectSimplified(R"(def @main(%x: f32[batch, 4]) {
    mul(const(f32[], 1), mul(%x, const(f32[4], [1, 1, 1, 1])))
  })",
                   R"(def @main(%x: f32[batch, 4]) { %x })");
}

TEST(SimplifyExpr, AddAndSubtractZero) {
  ExpectSimplified(R"(def @main(%x: f32[3]) {
    sub(add(const(f32[1], [0]), add(%x, const(f32[], -0.0))), const(f32[3], [0, 0, 0]))
  })",
                   R"(def @main(%x: f32[3]) { %x })");
}

TEST(SimplifyExpr, DivideByOneAndPowerOne) {
  ExpectSimplified(R"(def @main(%x: f32[2, 2]) {
    pow(div(%x, const(f32[], 1)), const(f32[1, 1], [1]))
  })",
                   R"(def @main(%x: f32[2, 2]) { %x })");
}

TEST(SimplifyExpr, ConstantsOfEveryDType) {
  ExpectSimplified(R"(def @main(%a: i32[3], %b: f16[3], %c: u8[3], %d: i64[3], %e: f64[3]) {
    (add(%a, const(i32[], 0)), mul(%b, const(f16[3], [1, 1, 1])), div(%c, const(u8[], 1)),
     pow(%d, const(i64[], 1)), sub(%e, const(f64[], 0)))
  })",
                   R"(def @main(%a: i32[3], %b: f16[3], %c: u8[3], %d: i64[3], %e: f64[3]) {
    (%a, %b, %c, %d, %e)
  })");
}

// x * 1 with a 1 of a larger shape broadcasts x: its result is not x.
TEST(SimplifyExpr, IdentityThatBroadcastsDoesNotFire) {
  ExpectUnchanged(R"(def @main(%x: f32[3]) {
    mul(%x, const(f32[2, 3], [1, 1, 1, 1, 1, 1]))
  })");
  ExpectUnchanged(R"(def @main(%x: f32[batch, 1]) {
    add(const(f32[1, 4], [0, 0, 0, 0]), %x)
  })");
  // The same constant on both sides: x keeps its shape only on one.
  ExpectSimplified(R"(def @main(%x: f32[2, 3]) {
    (mul(%x, const(f32[3], [1, 1, 1])), mul(%x, const(f32[1, 1, 3], [1, 1, 1])))
  })",
                   R"(def @main(%x: f32[2, 3]) {
    (%x, mul(%x, const(f32[1, 1, 3], [1, 1, 1])))
  })");
}

TEST(SimplifyExpr, ConstantsThatAreNotIdentitiesDoNotFire) {
  ExpectUnchanged(R"(def @main(%x: f32[2]) {
    (mul(%x, const(f32[2], [1, 2])), add(%x, const(f32[], 1)), sub(const(f32[], 0), %x),
     div(const(f32[], 1), %x), pow(const(f32[], 1), %x), pow(%x, const(f32[], 2)),
     mul(%x, const(f32[], 0)))
  })");
}

// ---- negation ----

TEST(SimplifyExpr, DoubleNegation) {
  ExpectSimplified(R"(def @main(%x: f32[4]) {
    (neg(neg(%x)), neg(neg(neg(%x))), neg(neg(neg(neg(%x)))))
  })",
                   R"(def @main(%x: f32[4]) {
    (%x, neg(%x), %x)
  })");
}

TEST(SimplifyExpr, MultiplyByMinusOneIsNegation) {
  ExpectSimplified(R"(def @main(%x: f32[4], %i: i32[4]) {
    (mul(%x, const(f32[], -1)), mul(const(i32[], -1), %i), div(%x, const(f32[4], [-1, -1, -1, -1])))
  })",
                   R"(def @main(%x: f32[4], %i: i32[4]) {
    (neg(%x), neg(%i), neg(%x))
  })");
  // u8 has no neg, and the -1 that broadcasts keeps its multiply.
  ExpectUnchanged(R"(def @main(%u: u8[4], %x: f32[4]) {
    (mul(%u, const(u8[], 255)), mul(%x, const(f32[2, 4], [-1, -1, -1, -1, -1, -1, -1, -1])))
  })");
}

TEST(SimplifyExpr, AddingANegationIsSubtraction) {
  ExpectSimplified(R"(def @main(%x: f32[4], %y: f32[4]) {
    (add(%x, neg(%y)), add(neg(%x), %y), sub(%x, neg(%y)))
  })",
                   R"(def @main(%x: f32[4], %y: f32[4]) {
    (sub(%x, %y), sub(%y, %x), add(%x, %y))
  })");
}

// ---- idempotent and self-combining ops ----

TEST(SimplifyExpr, IdempotentOps) {
  ExpectSimplified(R"(def @main(%x: f32[4]) {
    (relu(relu(relu(%x))), abs(abs(%x)), floor(floor(%x)), ceil(ceil(%x)), round(round(%x)),
     sign(sign(%x)), abs(neg(%x)), abs(neg(neg(%x))))
  })",
                   R"(def @main(%x: f32[4]) {
    (relu(%x), abs(%x), floor(%x), ceil(%x), round(%x), sign(%x), abs(%x), abs(%x))
  })");
  // Different ops do not collapse.
  ExpectUnchanged(R"(def @main(%x: f32[4]) {
    (relu(abs(%x)), floor(ceil(%x)), neg(abs(%x)))
  })");
}

TEST(SimplifyExpr, OpsOfOneOperandTwice) {
  ExpectSimplified(R"(def @main(%x: f32[4], %b: bool[4], %c: bool[4]) {
    (maximum(%x, %x), minimum(%x, %x), and(%b, %b), or(%b, %b), where(%c, %x, %x),
     clip(%x), and(%b, const(bool[], true)), or(const(bool[4], [false, false, false, false]), %b))
  })",
                   R"(def @main(%x: f32[4], %b: bool[4], %c: bool[4]) {
    (%x, %x, %b, %b, %x, %x, %b, %b)
  })");
  // A condition of a larger shape broadcasts x; a clip with a bound clamps.
  ExpectUnchanged(R"(def @main(%x: f32[4], %y: f32[4], %c: bool[2, 4], %b: bool[4]) {
    (where(%c, %x, %x), maximum(%x, %y), clip(%x, max=6.0), and(%b, const(bool[], false)),
     or(%b, const(bool[4], [false, true, false, false])))
  })");
}

// ---- casts ----

TEST(SimplifyExpr, CastToTheSameDType) {
  ExpectSimplified(R"(def @main(%x: f32[batch, 2]) {
    cast(cast(%x, dtype=f32), dtype=f32)
  })",
                   R"(def @main(%x: f32[batch, 2]) { %x })");
}

TEST(SimplifyExpr, CastAfterALosslessWidening) {
  ExpectSimplified(R"(def @main(%h: f16[2], %i: i8[2], %b: bool[2]) {
    (cast(cast(%h, dtype=f32), dtype=f16), cast(cast(%i, dtype=i32), dtype=f32),
     cast(cast(%h, dtype=f64), dtype=i32), cast(cast(%b, dtype=i64), dtype=u8))
  })",
                   R"(def @main(%h: f16[2], %i: i8[2], %b: bool[2]) {
    (%h, cast(%i, dtype=f32), cast(%h, dtype=i32), cast(%b, dtype=u8))
  })");
}

TEST(SimplifyExpr, CastAfterALossyOrConvertingCastDoesNotFire) {
  // f32 -> i32 truncates; i32 -> f64 is exact but then f64 -> i8 saturates where i32 -> i8
  // wraps; u8 -> i8 wraps 200 to -56; f32 -> f16 rounds.
  ExpectUnchanged(R"(def @main(%x: f32[2], %i: i32[2], %u: u8[2]) {
    (cast(cast(%x, dtype=i32), dtype=f32), cast(cast(%i, dtype=f64), dtype=i8),
     cast(cast(%u, dtype=i8), dtype=i32), cast(cast(%x, dtype=f16), dtype=f32))
  })");
}

// ---- transposes ----

TEST(SimplifyExpr, TransposeWithTheIdentityPermutation) {
  ExpectSimplified(R"(def @main(%x: f32[2, 3], %v: f32[5]) {
    (transpose(%x, perm=[0, 1]), transpose(%x, perm=[-2, -1]), transpose(%v))
  })",
                   R"(def @main(%x: f32[2, 3], %v: f32[5]) { (%x, %x, %v) })");
}

TEST(SimplifyExpr, TransposesThatCancel) {
  ExpectSimplified(R"(def @main(%x: f32[batch, 3, 4], %y: f32[2, 3]) {
    (transpose(transpose(%x, perm=[1, 2, 0]), perm=[2, 0, 1]), transpose(transpose(%y)))
  })",
                   R"(def @main(%x: f32[batch, 3, 4], %y: f32[2, 3]) { (%x, %y) })");
}

TEST(SimplifyExpr, TransposesCompose) {
  // Output axis i of the pair is axis p[q[i]] of x: [0, 2, 1] then [1, 0, 2] is [2, 0, 1].
  ExpectSimplified(R"(def @main(%x: f32[2, 3, 4]) {
    transpose(transpose(%x, perm=[0, 2, 1]), perm=[1, 0, 2])
  })",
                   R"(def @main(%x: f32[2, 3, 4]) { transpose(%x, perm=[2, 0, 1]) })");
  // Three in a row, the last one an axis reversal (empty perm): [1, 2, 0] for the first two,
  // then reversed.
  ExpectSimplified(R"(def @main(%x: f32[2, 3, 4]) {
    transpose(transpose(transpose(%x, perm=[1, 0, 2]), perm=[0, 2, 1]))
  })",
                   R"(def @main(%x: f32[2, 3, 4]) { transpose(%x, perm=[0, 2, 1]) })");
}

TEST(SimplifyExpr, TransposesThatAreNotTheIdentityStay) {
  // A lone transpose that moves axes, and a cancelling pair with an op between them.
  ExpectUnchanged(R"(def @main(%x: f32[2, 3, 4], %y: f32[batch, 2]) {
    (transpose(%x, perm=[1, 0, 2]), transpose(%y),
     transpose(relu(transpose(%x, perm=[1, 0, 2])), perm=[1, 0, 2]))
  })");
}

// ---- views: reshape, squeeze, unsqueeze, flatten ----

TEST(SimplifyExpr, ReshapeToTheSameShape) {
  ExpectSimplified(R"(def @main(%x: f32[batch, 8], %y: f32[2, 3]) {
    (reshape(%x, shape=[0, 8]), reshape(%x, shape=[-1, 8]), reshape(%y, shape=[2, 3]),
     flatten(%y), squeeze(%y))
  })",
                   R"(def @main(%x: f32[batch, 8], %y: f32[2, 3]) { (%x, %x, %y, %y, %y) })");
}

TEST(SimplifyExpr, ReshapeOfReshapeWithConcreteShapes) {
  ExpectSimplified(R"(def @main(%x: f32[2, 3, 4]) {
    (reshape(reshape(%x, shape=[6, 4]), shape=[4, -1]),
     reshape(reshape(%x, shape=[-1]), shape=[2, 3, 4]))
  })",
                   R"(def @main(%x: f32[2, 3, 4]) { (reshape(%x, shape=[4, 6]), %x) })");
  // The attribute comes from the inferred type, so a 0 that copied a dim of the inner
  // reshape's result becomes that dim.
  ExpectSimplified(R"(def @main(%x: f32[2, 3, 4]) {
    reshape(reshape(%x, shape=[3, 8]), shape=[0, 2, -1])
  })",
                   R"(def @main(%x: f32[2, 3, 4]) { reshape(%x, shape=[3, 2, 4]) })");
}

TEST(SimplifyExpr, ReshapeOfReshapeWithSymbolicShapes) {
  // The outer attribute fits as it is: its -1 is inferred from the element count.
  ExpectSimplified(R"(def @main(%x: f32[batch, 8]) {
    reshape(reshape(%x, shape=[0, 2, 4]), shape=[-1, 4])
  })",
                   R"(def @main(%x: f32[batch, 8]) { reshape(%x, shape=[-1, 4]) })");
  // The outer 0s copy dims of [batch, 2, 4]; over x they are written from the result type.
  ExpectSimplified(R"(def @main(%x: f32[batch, 8]) {
    reshape(reshape(%x, shape=[0, 2, 4]), shape=[0, 0, 4, 1])
  })",
                   R"(def @main(%x: f32[batch, 8]) { reshape(%x, shape=[0, 2, 4, 1]) })");
  // A symbolic dim that is not at its input position becomes the -1.
  ExpectSimplified(R"(def @main(%x: f32[4, batch]) {
    reshape(reshape(%x, shape=[2, 2, -1]), shape=[4, 1, 0])
  })",
                   R"(def @main(%x: f32[4, batch]) { reshape(%x, shape=[4, 1, -1]) })");
  // Cancelling pairs disappear.
  ExpectSimplified(R"(def @main(%x: f32[batch, seq, 16]) {
    reshape(reshape(%x, shape=[0, 0, 2, 8]), shape=[0, 0, 16])
  })",
                   R"(def @main(%x: f32[batch, seq, 16]) { %x })");
}

TEST(SimplifyExpr, ReshapeOfReshapeThatOneAttributeCannotWriteStays) {
  // [a*d, b*c] over [a, b, c, d]: two symbolic dims that are not copies of x's dims at their
  // positions would both need the -1.
  ExpectUnchanged(R"(def @main(%x: f32[a, b, c, d]) {
    reshape(reshape(%x, shape=[-1, 0, 0]), shape=[0, -1])
  })");
  // A reshape whose -1 makes a new symbolic dim is no identity.
  ExpectUnchanged(R"(def @main(%x: f32[batch, 8]) {
    (reshape(%x, shape=[-1, 4]), reshape(%x, shape=[-1]), reshape(%x, shape=[0, -1, 1]))
  })");
}

TEST(SimplifyExpr, ReshapeWithAllowZero) {
  ExpectSimplified(R"(def @main(%x: f32[0, 4]) {
    reshape(reshape(%x, shape=[4, 0], allowzero=true), shape=[2, 0, 2], allowzero=true)
  })",
                   R"(def @main(%x: f32[0, 4]) { reshape(%x, shape=[2, 0, 2], allowzero=true) })");
}

TEST(SimplifyExpr, SqueezeAndUnsqueeze) {
  ExpectSimplified(R"(def @main(%x: f32[batch, 3]) {
    (squeeze(unsqueeze(%x, axes=[1]), axes=[1]), squeeze(unsqueeze(%x, axes=[0, 3]), axes=[-1, 0]),
     squeeze(unsqueeze(%x, axes=[2])))
  })",
                   R"(def @main(%x: f32[batch, 3]) { (%x, %x, %x) })");
  // The unit dim comes back elsewhere: a real change of shape.
  ExpectUnchanged(R"(def @main(%x: f32[1, 3]) {
    unsqueeze(squeeze(%x, axes=[0]), axes=[1])
  })");
}

TEST(SimplifyExpr, ViewsAroundAReshapeBecomeOneReshape) {
  ExpectSimplified(R"(def @main(%x: f32[batch, 6]) {
    (unsqueeze(reshape(%x, shape=[0, 2, 3]), axes=[1]), reshape(flatten(%x, axis=0), shape=[2, -1]))
  })",
                   R"(def @main(%x: f32[batch, 6]) {
    (reshape(%x, shape=[0, 1, 2, 3]), reshape(%x, shape=[2, -1]))
  })");
}

// ---- expand, slice, concat ----

TEST(SimplifyExpr, ExpandToTheSameShape) {
  ExpectSimplified(R"(def @main(%x: f32[2, 3]) {
    (expand(%x, shape=[2, 3]), expand(%x, shape=[1, 3]), expand(%x, shape=[1]))
  })",
                   R"(def @main(%x: f32[2, 3]) { (%x, %x, %x) })");
  ExpectUnchanged(R"(def @main(%x: f32[1, 3]) {
    (expand(%x, shape=[2, 3]), expand(%x, shape=[1, 1, 3]))
  })");
}

TEST(SimplifyExpr, SliceThatTakesEverything) {
  ExpectSimplified(R"(def @main(%x: f32[batch, 4]) {
    (slice(%x, starts=[0], ends=[9223372036854775807], axes=[1]),
     slice(%x, starts=[0, -4], ends=[9223372036854775807, 4]),
     slice(%x, starts=[0], ends=[4], axes=[-1], steps=[1]))
  })",
                   R"(def @main(%x: f32[batch, 4]) { (%x, %x, %x) })");
}

TEST(SimplifyExpr, SliceThatReversesOrDropsStays) {
  // A step of -1 over all of x keeps its type but reverses it.
  ExpectUnchanged(R"(def @main(%x: f32[4]) {
    (slice(%x, starts=[-1], ends=[-9223372036854775807], steps=[-1]),
     slice(%x, starts=[1], ends=[4]))
  })");
}

TEST(SimplifyExpr, ConcatOfOneInput) {
  ExpectSimplified(R"(def @main(%x: f32[2, 3]) {
    (concat(%x, axis=1), concat(%x, %x, axis=0))
  })",
                   R"(def @main(%x: f32[2, 3]) { (%x, concat(%x, %x, axis=0)) })");
}

// ---- whole graphs ----

TEST(SimplifyExpr, ChainsSimplifyCompletely) {
  ExpectSimplified(R"(def @main(%x: f32[batch, 4, 8]) {
    %a = mul(add(cast(%x, dtype=f32), const(f32[], 0)), const(f32[], 1))
    %t = transpose(transpose(%a, perm=[0, 2, 1]), perm=[0, 2, 1])
    %r = reshape(reshape(%t, shape=[0, 32]), shape=[-1, 8, 4])
    %n = neg(neg(squeeze(unsqueeze(%r, axes=[0]), axes=[0])))
    relu(relu(concat(slice(%n, starts=[0], ends=[8], axes=[1]), axis=2)))
  })",
                   R"(def @main(%x: f32[batch, 4, 8]) {
    %r = reshape(%x, shape=[-1, 8, 4])
    relu(%r)
  })");
}

TEST(SimplifyExpr, SharedNodesStayShared) {
  ExpectSimplified(R"(def @main(%x: f32[3]) {
    %a = mul(%x, const(f32[], 1))
    %b = neg(neg(%a))
    add(add(%a, %b), exp(%b))
  })",
                   R"(def @main(%x: f32[3]) { add(add(%x, %x), exp(%x)) })");
}

TEST(SimplifyExpr, InsideNestedFunctionsAndTuples) {
  ExpectSimplified(R"(def @main(%x: f32[3]) {
    %f = fn(%p: f32[3]) { relu(relu(add(%p, const(f32[], 0)))) }
    %t = (neg(neg(%x)), %x)
    %f(mul(%t.0, const(f32[], 1)))
  })",
                   R"(def @main(%x: f32[3]) {
    %f = fn(%p: f32[3]) { relu(%p) }
    %f(%x)
  })");
}

TEST(SimplifyExpr, EveryFunctionOfTheModule) {
  ExpectSimplified(R"(
    def @helper(%y: f32[2]) { neg(neg(%y)) }
    def @main(%x: f32[2]) { relu(relu(%x)) }
  )",
                   R"(
    def @helper(%y: f32[2]) { %y }
    def @main(%x: f32[2]) { relu(%x) }
  )");
}

TEST(SimplifyExpr, SkipOptimizationIsRespected) {
  ExpectUnchanged(R"(def @main(%x: f32[2]) attrs{skip_optimization=true} { neg(neg(%x)) })");
}

TEST(SimplifyExpr, RunsAtOptLevelTwo) {
  std::string input = R"(def @main(%x: f32[2]) { neg(neg(%x)) })";
  ExpectPassOutput("SimplifyExpr", input, input, /*opt_level=*/1);
  ExpectPassOutput("SimplifyExpr", input, R"(def @main(%x: f32[2]) { %x })", /*opt_level=*/2);
}

TEST(SimplifyExpr, AnUnchangedFunctionIsReturnedAsItIs) {
  IRModule m = InferTypes(IRModule({{"main", test::MlpModel()}}));
  auto ctx = std::make_shared<PassContext>();
  ctx->SetConfig("testing.check_immutable", true);
  PassContextScope scope(ctx);
  IRModule out = (*PassRegistry::Global().Create("SimplifyExpr"))(m);
  EXPECT_EQ(out.Lookup("main"), m.Lookup("main"));
}

// ---- the values stay the same ----

// Random inputs for `fn`'s parameters, with every symbolic dim bound to a small size.
std::vector<Tensor> RandomInputs(const Function& fn, uint64_t seed) {
  std::vector<Tensor> inputs;
  for (const Var& p : fn->params) {
    const TensorTypeNode* t = AsTensor(p->type);
    std::vector<int64_t> shape;
    for (const Dim& d : t->shape) shape.push_back(d.is_const() ? d.value() : 3);
    inputs.push_back(test::RandomTensor(t->dtype, shape, seed++, -2.0, 2.0));
  }
  return inputs;
}

// Runs the pass and compares the interpreter's results before and after; returns how many
// nodes the pass removed.
int ExpectSameValues(const Function& fn) {
  IRModule before = InferTypes(IRModule({{"main", fn}}));
  auto ctx = std::make_shared<PassContext>();
  ctx->SetConfig("testing.check_immutable", true);
  PassContextScope scope(ctx);
  IRModule after = (*ParsePipeline("SimplifyExpr"))(before);
  for (uint64_t seed : {1, 2, 3}) {
    std::vector<Tensor> inputs = RandomInputs(before.Lookup("main"), seed * 10);
    std::vector<Tensor> want = Interpret(before.Lookup("main"), inputs);
    std::vector<Tensor> got = Interpret(after.Lookup("main"), inputs);
    EXPECT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size() && i < want.size(); ++i) {
      // Exact: every rule keeps values (up to the sign of a zero, which compares equal).
      EXPECT_TRUE(test::TensorsNear(got[i], want[i], 0.0, 0.0)) << "output " << i;
    }
  }
  return static_cast<int>(PostOrder(before.Lookup("main")->body).size()) -
         static_cast<int>(PostOrder(after.Lookup("main")->body).size());
}

TEST(SimplifyExprSemantics, Models) {
  EXPECT_EQ(ExpectSameValues(test::MlpModel()), 0);
  EXPECT_EQ(ExpectSameValues(test::EncoderLayerModel()), 0);
  EXPECT_EQ(ExpectSameValues(test::ElementwiseReductionModel()), 0);
  // (add, tanh(matmul(x, unused))).0 -> the add: the tuple and its dead field go.
  EXPECT_EQ(ExpectSameValues(test::SharedAndDeadModel()), 5);
}

TEST(SimplifyExprSemantics, RewrittenGraphs) {
  IRModule m = ParseModule(R"(def @main(%x: f32[batch, 4, 6], %y: f32[batch, 4, 6], %i: i8[6]) {
    %t = transpose(transpose(%x, perm=[2, 0, 1]), perm=[0, 2, 1])
    %v = unsqueeze(reshape(%y, shape=[0, 24]), axes=[0])
    %c = cast(cast(%i, dtype=i32), dtype=f32)
    %r = reshape(reshape(reshape(%t, shape=[-1, 2, 0]), shape=[6, 0, -1]), shape=[6, 4, -1])
    %s = add(mul(%r, const(f32[], -1)), neg(%t))
    %z = sub(neg(neg(%s)), neg(div(%t, const(f32[], -1))))
    (relu(relu(%z)), abs(neg(%v)), mul(%c, const(f32[], 1)),
     transpose(transpose(%x, perm=[1, 0, 2]), perm=[0, 2, 1]),
     slice(%x, starts=[-1], ends=[-9223372036854775807], axes=[1], steps=[-1]))
  })");
  EXPECT_GE(ExpectSameValues(m.Lookup("main")), 15);
  // The whole-graph chain and the casts of the golden tests.
  IRModule chain = ParseModule(R"(def @main(%x: f32[batch, 4, 8], %h: f16[2], %i: i8[2],
                                            %b: bool[2]) {
    %a = mul(add(cast(%x, dtype=f32), const(f32[], 0)), const(f32[], 1))
    %t = transpose(transpose(%a, perm=[0, 2, 1]), perm=[0, 2, 1])
    %r = reshape(reshape(%t, shape=[0, 32]), shape=[-1, 8, 4])
    %n = neg(neg(squeeze(unsqueeze(%r, axes=[0]), axes=[0])))
    (relu(relu(concat(slice(%n, starts=[0], ends=[8], axes=[1]), axis=2))),
     cast(cast(%h, dtype=f32), dtype=f16), cast(cast(%i, dtype=i32), dtype=f32),
     cast(cast(%h, dtype=f64), dtype=i32), cast(cast(%b, dtype=i64), dtype=u8))
  })");
  EXPECT_GE(ExpectSameValues(chain.Lookup("main")), 15);
}

}  // namespace
}  // namespace kiln
