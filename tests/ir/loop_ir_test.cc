// The loop IR's printer, visitor and mutator, structural equality, verifier and integer folding.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>
#include <map>
#include <set>

#include "common/test_util.h"
#include "ir/loop/loop.h"
#include "ir/loop/loop_text.h"
#include "ir/loop/loop_visitor.h"

namespace kiln::loop {
namespace {

using test::ErrorMessage;
using ::testing::HasSubstr;
using ::testing::StartsWith;

Expr I(int64_t v) {
  return IntImm(v);
}
Expr F(double v) {
  return FloatImm(v);
}
Expr LT(Expr a, Expr b) {
  return MakeBinary(BinaryOp::kLT, std::move(a), std::move(b));
}

PrimFunc MakeFunc(std::string name, std::vector<Buffer> buffers, int num_inputs,
                  std::vector<Var> scalars, Stmt body) {
  auto f = std::make_shared<PrimFuncNode>();
  f->name = std::move(name);
  f->buffer_params = std::move(buffers);
  f->num_inputs = num_inputs;
  f->scalar_params = std::move(scalars);
  f->body = std::move(body);
  return f;
}

// What BuildAllNodes varies, so structural equality can be tested one difference at a time.
struct Variant {
  double relu_floor = 0.0;
  ForKind outer = ForKind::kParallel;
  DType w_dtype = DType::kFloat16;
  std::string name = "all_nodes";
};

// A function that uses every node kind, built from fresh objects on every call.
PrimFunc BuildAllNodes(const Variant& v = {}) {
  Var n = MakeVar("n");
  Buffer a = MakeBuffer("a", DType::kFloat32, {n, I(16)});
  Buffer b = MakeBuffer("b", DType::kFloat32, {I(16)});
  Buffer w = MakeBuffer("w", v.w_dtype, {I(4), I(8)}, BufferNode::Scope::kGlobal, {I(16), I(2)});
  Buffer out = MakeBuffer("out", DType::kFloat32, {n, I(16)});
  Buffer tmp = MakeBuffer("tmp", DType::kFloat32, {I(16)}, BufferNode::Scope::kLocal);
  Var i = MakeVar("i"), j = MakeVar("j"), k = MakeVar("k"), x = MakeVar("x"), y = MakeVar("y");
  Var j2 = MakeVar("j2"), k2 = MakeVar("k2"), vi = MakeVar("vi"), vk = MakeVar("vk");

  auto block = std::make_shared<ScheduleBlockNode>();
  block->name = "row_sum";
  block->iter_vars = {{vi, I(16)}, {vk, I(16)}};
  block->is_reduce = {false, true};
  block->bindings = {j2, Sub(k2, I(2))};
  block->reads = {{a, {i, vk}, {I(1), I(1)}}, {b, {I(0)}, {I(16)}}};
  block->writes = {{out, {i, vi}, {I(1), I(1)}}};
  block->init = Store(out, {i, vi}, Cast(DType::kFloat32, y));
  block->body = Store(out, {i, vi}, Add(Load(out, {i, vi}), Load(a, {i, vk})));

  Expr ramp = Ramp(I(0), 1, 8);
  Stmt body = Seq({
      Alloc(tmp),
      For(j, I(0), I(16), ForKind::kSerial,
          Store(tmp, {j}, Max(Add(Load(a, {i, j}), Load(b, {j})), F(v.relu_floor)))),
      LetStmt(x, Mul(i, I(16)), Store(out, {i, I(0)}, Cast(DType::kFloat32, x))),
      IfThenElse(
          MakeBinary(BinaryOp::kAnd, LT(i, Sub(n, I(1))), Not(MakeBinary(BinaryOp::kEQ, i, I(3)))),
          Evaluate(Call(Intrinsic::kExp, {Load(tmp, {I(0)})})),
          Store(out, {i, I(1)},
                Select(LT(Load(b, {I(1)}), F(0.5)),
                       Call(Intrinsic::kPow, {Load(a, {i, I(1)}), F(2)}), F(1)))),
      Store(out, {Broadcast(i, 8), ramp}, Mul(Load(tmp, {ramp}), Broadcast(F(2), 8))),
      Store(out, {i, I(2)},
            Reduce(ReduceKind::kSum, Mul(Load(a, {i, k}), Load(b, {k})), {{k, I(16)}})),
      Store(out, {i, I(3)}, Cast(DType::kFloat32, Mul(Load(w, {I(5)}), FloatImm(0.5, v.w_dtype)))),
      Evaluate(Add(Cast(DType::kInt32, i), IntImm(3, DType::kInt32))),
      Evaluate(Mul(Cast(DType::kFloat64, i), FloatImm(0.1, DType::kFloat64))),
      Evaluate(MakeBinary(BinaryOp::kOr, LT(i, n), BoolImm(true))),
      Evaluate(Call(Intrinsic::kFma, {Load(b, {I(0)}), Load(b, {I(1)}), F(-1.5)})),
      Free(tmp),
      LetStmt(y, Add(i, I(1)),
              For(j2, I(0), I(16), ForKind::kUnrolled,
                  For(k2, I(2), I(14), ForKind::kGpuThreadX, block))),
  });
  return MakeFunc(v.name, {a, b, w, out}, 3, {n}, For(i, I(0), n, v.outer, body));
}

constexpr const char* kAllNodesText =
    R"(func @all_nodes(%a: f32[n, 16], %b: f32[16], %w: f16[4, 8] strides [16, 2], %out: f32[n, 16]; n: i64) {
  for i in [0, n) parallel {
    alloc tmp: f32[16] local
    for j in [0, 16) {
      tmp[j] = max(a[i, j] + b[j], 0.0f)
    }
    let x = i * 16 {
      out[i, 0] = f32(x)
    }
    if (i < n - 1 && !(i == 3)) {
      evaluate(exp(tmp[0]))
    } else {
      out[i, 1] = select(b[1] < 0.5f, pow(a[i, 1], 2.0f), 1.0f)
    }
    out[broadcast(i, 8), ramp(0, 1, 8)] = tmp[ramp(0, 1, 8)] * broadcast(2.0f, 8)
    out[i, 2] = sum(a[i, k] * b[k], k in [0, 16))
    out[i, 3] = f32(w[5] * 0.5f16)
    evaluate(i32(i) + 3i32)
    evaluate(f64(i) * 0.1f64)
    evaluate(i < n || true)
    evaluate(fma(b[0], b[1], -1.5f))
    free tmp
    let y = i + 1;
    for j2 in [0, 16) unrolled {
      for k2 in [2, 16) gpu.thread.x {
        block row_sum(vi in [0, 16) = j2, reduce vk in [0, 16) = k2 - 2) {
          reads a[i, vk], b[0:16]
          writes out[i, vi]
          init {
            out[i, vi] = f32(y)
          }
          out[i, vi] = out[i, vi] + a[i, vk]
        }
      }
    }
  }
}
)";

// ---- printing ----

TEST(LoopPrint, FunctionWithEveryNodeKind) {
  EXPECT_EQ(Print(BuildAllNodes()), kAllNodesText);
}

TEST(LoopPrint, Immediates) {
  EXPECT_EQ(Print(I(3)), "3");
  EXPECT_EQ(Print(I(-7)), "-7");
  EXPECT_EQ(Print(IntImm(3, DType::kInt32)), "3i32");
  EXPECT_EQ(Print(IntImm(255, DType::kUInt8)), "255u8");
  EXPECT_EQ(Print(BoolImm(true)), "true");
  EXPECT_EQ(Print(BoolImm(false)), "false");
  EXPECT_EQ(Print(F(0.5)), "0.5f");
  EXPECT_EQ(Print(F(1)), "1.0f");
  EXPECT_EQ(Print(F(0.1)), "0.1f");  // shortest digits of the f32 value, not of the double
  EXPECT_EQ(Print(F(-0.0)), "-0.0f");
  EXPECT_EQ(Print(F(1e20)), "1e+20f");
  EXPECT_EQ(Print(F(100)), "100.0f");
  EXPECT_EQ(Print(FloatImm(0.1, DType::kFloat64)), "0.1f64");
  EXPECT_EQ(Print(FloatImm(1.0 / 3, DType::kFloat64)), "0.3333333333333333f64");
  EXPECT_EQ(Print(FloatImm(0.5, DType::kFloat16)), "0.5f16");
  EXPECT_EQ(Print(FloatImm(0.1, DType::kFloat16)), "0.1f16");
  EXPECT_EQ(Print(FloatImm(3.0, DType::kBFloat16)), "3.0bf16");
  EXPECT_EQ(Print(F(INFINITY)), "f32(inf)");
  EXPECT_EQ(Print(FloatImm(-INFINITY, DType::kFloat64)), "f64(-inf)");
  EXPECT_EQ(Print(F(NAN)), "f32(nan)");
}

TEST(LoopPrint, ParenthesesAreMinimalButKeepTheTree) {
  Var a = MakeVar("a"), b = MakeVar("b"), c = MakeVar("c");
  EXPECT_EQ(Print(Add(Mul(a, b), c)), "a * b + c");
  EXPECT_EQ(Print(Mul(Add(a, b), c)), "(a + b) * c");
  EXPECT_EQ(Print(Sub(Sub(a, b), c)), "a - b - c");
  EXPECT_EQ(Print(Sub(a, Sub(b, c))), "a - (b - c)");
  EXPECT_EQ(Print(Add(a, Add(b, c))), "a + (b + c)");  // not re-associated in the text
  EXPECT_EQ(Print(FloorMod(FloorDiv(a, b), c)), "a // b % c");
  EXPECT_EQ(Print(FloorDiv(a, Mul(b, c))), "a // (b * c)");
  EXPECT_EQ(Print(Mul(Min(a, b), Max(b, c))), "min(a, b) * max(b, c)");
  EXPECT_EQ(Print(Sub(a, I(-3))), "a - -3");
  Expr lt = LT(a, b);
  EXPECT_EQ(Print(MakeBinary(BinaryOp::kEQ, lt, BoolImm(false))), "(a < b) == false");
  EXPECT_EQ(Print(MakeBinary(BinaryOp::kOr, MakeBinary(BinaryOp::kAnd, lt, lt), lt)),
            "a < b && a < b || a < b");
  EXPECT_EQ(Print(MakeBinary(BinaryOp::kAnd, lt, MakeBinary(BinaryOp::kOr, lt, lt))),
            "a < b && (a < b || a < b)");
  EXPECT_EQ(Print(Not(lt)), "!(a < b)");
  EXPECT_EQ(Print(Not(Not(lt))), "!!(a < b)");
  EXPECT_EQ(Print(LT(Add(a, b), Mul(b, c))), "a + b < b * c");
}

TEST(LoopPrint, DistinctObjectsWithOneNamePrintDistinctly) {
  Var i1 = MakeVar("i"), i2 = MakeVar("i"), i_1 = MakeVar("i_1");
  EXPECT_EQ(Print(Add(Add(i1, i2), Add(i_1, i1))), "i + i_1 + (i_1_1 + i)");

  Buffer a1 = MakeBuffer("a", DType::kFloat32, {I(4)});
  Buffer a2 = MakeBuffer("a", DType::kFloat32, {I(4)});
  Var k = MakeVar("k");
  Stmt s = Seq({For(i1, I(0), I(4), ForKind::kSerial, Store(a2, {i1}, Load(a1, {i1}))),
                For(i2, I(0), I(4), ForKind::kVectorized, Store(a1, {i2}, Load(a2, {i2})))});
  EXPECT_EQ(Print(s),
            "for i in [0, 4) {\n"
            "  a[i] = a_1[i]\n"
            "}\n"
            "for i_1 in [0, 4) vectorized {\n"
            "  a_1[i_1] = a[i_1]\n"
            "}\n");
}

TEST(LoopPrint, StatementsAndSignatureDetails) {
  Var i = MakeVar("i"), n = MakeVar("n");
  Buffer in = MakeBuffer("in", DType::kFloat32, {});
  Buffer o1 = MakeBuffer("o1", DType::kFloat32, {});
  Buffer o2 = MakeBuffer("o2", DType::kFloat32, {});
  // A loop that does not start at 0 prints its end; a non-constant end is an expression.
  Stmt loop = For(i, n, Mul(n, I(2)), ForKind::kGpuBlockY, Store(o1, {}, Load(in, {})));
  EXPECT_EQ(Print(loop),
            "for i in [n, n + n * 2) gpu.block.y {\n"
            "  o1[] = in[]\n"
            "}\n");
  EXPECT_EQ(Print(IfThenElse(LT(n, I(4)), Evaluate(n))), "if (n < 4) {\n  evaluate(n)\n}\n");

  auto f = std::make_shared<PrimFuncNode>(*MakeFunc("two_out", {in, o1, o2}, 1, {}, loop));
  f->attrs.Set("target", std::string("cpu"));
  EXPECT_THAT(Print(f), StartsWith("func @two_out(%in: f32[], %o1: f32[], %o2: f32[]) "
                                   "num_inputs=1 attrs {target = \"cpu\"} {\n"));

  // Ill-formed IR still prints, so the verifier and debugging can show it.
  EXPECT_EQ(Print(Expr()), "<null>");
  EXPECT_EQ(Print(For(i, I(0), I(4), ForKind::kSerial, nullptr)),
            "for i in [0, 4) {\n  <null>\n}\n");
  EXPECT_EQ(Print(std::make_shared<const BinaryNode>(BinaryOp::kAdd, n, nullptr, DType::kInt64, 1)),
            "n + <null>");
}

// ---- visitor and mutator ----

class KindCounter : public Visitor {
 public:
  std::map<std::string, int> counts;
  void VisitExpr(const Expr& e) override {
    if (e) ++counts[ExprKindName(e->kind)];
    Visitor::VisitExpr(e);
  }
  void VisitStmt(const Stmt& s) override {
    if (s) ++counts[StmtKindName(s->kind)];
    Visitor::VisitStmt(s);
  }

 protected:
  void VisitBuffer(const Buffer& b) override {
    ++counts["buffer " + b->name];
    Visitor::VisitBuffer(b);
  }
};

TEST(LoopVisitor, CountsEveryOccurrence) {
  // for i in [0, n) { let x = i * 2; out[i] = a[x] + sum(a[k], k in [0, n)) }
  Var n = MakeVar("n"), i = MakeVar("i"), x = MakeVar("x"), k = MakeVar("k");
  Buffer a = MakeBuffer("a", DType::kFloat32, {Mul(n, I(2))});
  Buffer out = MakeBuffer("out", DType::kFloat32, {n});
  Stmt s = For(i, I(0), n, ForKind::kSerial,
               LetStmt(x, Mul(i, I(2)),
                       Store(out, {i},
                             Add(Load(a, {x}), Reduce(ReduceKind::kSum, Load(a, {k}), {{k, n}})))));
  KindCounter c;
  c.VisitStmt(s);
  EXPECT_EQ(c.counts["For"], 1);
  EXPECT_EQ(c.counts["LetStmt"], 1);
  EXPECT_EQ(c.counts["Store"], 1);
  EXPECT_EQ(c.counts["Load"], 2);
  EXPECT_EQ(c.counts["Reduce"], 1);
  EXPECT_EQ(c.counts["buffer a"], 2);
  EXPECT_EQ(c.counts["buffer out"], 1);
  // Binary: i * 2, the add, and n * 2 in a's shape twice.
  EXPECT_EQ(c.counts["Binary"], 4);
  // Uses only: n (loop extent, out's shape, a's shape twice, reduce extent), i (let value,
  // store index), x, k. Binders are not visited.
  EXPECT_EQ(c.counts["Var"], 9);
  // 0 (loop min), the 2 of i * 2, the 2 of a's shape twice.
  EXPECT_EQ(c.counts["IntImm"], 4);
}

class VarCollector : public Visitor {
 public:
  std::set<std::string> names;

 protected:
  void VisitVar(const VarNode* v, const Expr&) override { names.insert(v->name); }
};

TEST(LoopVisitor, ReachesExpressionsInEveryStatementPosition) {
  auto v = [](const char* name) { return MakeVar(name); };
  Var i = v("i");
  Buffer g =
      MakeBuffer("g", DType::kFloat32, {v("shape")}, BufferNode::Scope::kGlobal, {v("stride")});
  Buffer t = MakeBuffer("t", DType::kFloat32, {v("alloc_shape")}, BufferNode::Scope::kLocal);
  auto block = std::make_shared<ScheduleBlockNode>();
  Var vi = v("vi");
  block->iter_vars = {{vi, v("iter_extent")}};
  block->is_reduce = {false};
  block->bindings = {v("binding")};
  block->reads = {{g, {v("read_min")}, {v("read_extent")}}};
  block->writes = {{t, {v("write_min")}, {v("write_extent")}}};
  block->init = Evaluate(v("init"));
  block->body = Store(t, {vi}, Load(g, {v("load_index")}));
  Stmt s = Seq({
      Alloc(t),
      For(i, v("for_min"), v("for_extent"), ForKind::kSerial,
          LetStmt(v("x"), v("let_value"),
                  IfThenElse(MakeBinary(BinaryOp::kEQ, v("cond"), I(0)), Evaluate(v("then")),
                             Evaluate(v("else"))))),
      Store(g, {v("store_index")},
            Select(LT(v("sel"), I(0)), Cast(DType::kFloat32, v("cast")),
                   Call(Intrinsic::kExp, {Broadcast(F(1), 1)}))),
      Evaluate(Reduce(ReduceKind::kMax, Load(g, {Ramp(v("ramp"), 1, 4)}), {{v("k"), v("axis")}})),
      Evaluate(Broadcast(Not(LT(v("not"), I(1))), 4)),
      block,
      Free(t),
  });
  VarCollector c;
  c.VisitStmt(s);
  EXPECT_EQ(c.names,
            (std::set<std::string>{
                "shape",       "stride",     "alloc_shape",  "iter_extent", "binding", "read_min",
                "read_extent", "write_min",  "write_extent", "init",        "vi",      "load_index",
                "for_min",     "for_extent", "let_value",    "cond",        "then",    "else",
                "store_index", "sel",        "cast",         "ramp",        "axis",    "not"}));
}

class MulToAdd : public Mutator {
 protected:
  Expr MutateBinary(const BinaryNode* n, const Expr& self) override {
    Expr rebuilt = Mutator::MutateBinary(n, self);
    const BinaryNode* b = AsBinary(rebuilt);
    if (b && b->op == BinaryOp::kMul) return Add(b->a, b->b);
    return rebuilt;
  }
};

TEST(LoopMutator, NothingChangedGivesBackTheSameNodes) {
  PrimFunc f = BuildAllNodes();
  class Nothing : public Mutator {};
  Nothing m;
  EXPECT_EQ(m.MutateStmt(f->body), f->body);
  EXPECT_EQ(WithBody(f, m.MutateStmt(f->body)), f);
}

TEST(LoopMutator, RewriteSharesUntouchedSubtrees) {
  PrimFunc f = BuildAllNodes();
  MulToAdd m;
  PrimFunc g = WithBody(f, m.MutateStmt(f->body));
  ASSERT_NE(g, f);
  EXPECT_EQ(g->buffer_params, f->buffer_params);
  std::string text = Print(g);
  EXPECT_THAT(text, HasSubstr("let x = i + 16 {"));
  EXPECT_THAT(text, HasSubstr("out[i, 2] = sum(a[i, k] + b[k], k in [0, 16))"));
  EXPECT_THAT(text, HasSubstr("tmp[ramp(0, 1, 8)] + broadcast(2.0f, 8)"));
  EXPECT_EQ(text.find(" * "), std::string::npos);

  const SeqNode* before = AsSeq(AsFor(f->body)->body);
  const SeqNode* after = AsSeq(AsFor(g->body)->body);
  ASSERT_TRUE(before && after);
  ASSERT_EQ(before->stmts.size(), after->stmts.size());
  EXPECT_EQ(after->stmts[0], before->stmts[0]);  // alloc
  EXPECT_EQ(after->stmts[1], before->stmts[1]);  // the j loop has no multiplication
  EXPECT_NE(after->stmts[2], before->stmts[2]);  // let x = i * 16
  EXPECT_EQ(after->stmts[3], before->stmts[3]);  // the if
  EXPECT_EQ(after->stmts.back(), before->stmts.back());
  EXPECT_EQ(AsFor(g->body)->var, AsFor(f->body)->var);  // binders are kept
  Verify(g);
}

TEST(LoopMutator, RebuiltNodesFoldAndDeletedStatementsDisappear) {
  Var i = MakeVar("i");
  class DropEvaluate : public Mutator {
   protected:
    Stmt MutateEvaluate(const EvaluateNode*, const Stmt&) override { return nullptr; }
  };
  Expr folded = Substitute(Mul(Add(i, I(1)), I(4)), i, I(0));
  int64_t v = 0;
  ASSERT_TRUE(IsConstInt(folded, &v));
  EXPECT_EQ(v, 4);

  Buffer o = MakeBuffer("o", DType::kInt64, {I(4)});
  Stmt s = Seq({Store(o, {i}, i), Evaluate(i), Store(o, {I(1)}, I(2))});
  EXPECT_EQ(Print(Substitute(DropEvaluate().MutateStmt(s), i, I(0))), "o[0] = 0\no[1] = 2\n");
}

// ---- structural equality ----

TEST(LoopStructural, SeparatelyBuiltFunctionsAreEqual) {
  PrimFunc f = BuildAllNodes(), g = BuildAllNodes();
  EXPECT_TRUE(StructuralEqual(f, g));
  EXPECT_EQ(StructuralHash(f), StructuralHash(g));
  Variant renamed;
  renamed.name = "other_name";  // function names are labels, not structure
  EXPECT_TRUE(StructuralEqual(f, BuildAllNodes(renamed)));
  EXPECT_EQ(StructuralHash(f), StructuralHash(BuildAllNodes(renamed)));
}

TEST(LoopStructural, OneDifferenceMakesThemUnequal) {
  PrimFunc f = BuildAllNodes();
  Variant constant, kind, dtype;
  constant.relu_floor = 1.0;
  kind.outer = ForKind::kSerial;
  dtype.w_dtype = DType::kBFloat16;
  for (const Variant& v : {constant, kind, dtype}) {
    PrimFunc g = BuildAllNodes(v);
    EXPECT_FALSE(StructuralEqual(f, g)) << Print(g);
    EXPECT_FALSE(StructuralEqual(g, f));
    EXPECT_NE(StructuralHash(f), StructuralHash(g));
  }
  auto h = std::make_shared<PrimFuncNode>(*f);
  h->num_inputs = 2;
  EXPECT_FALSE(StructuralEqual(f, PrimFunc(h)));
}

TEST(LoopStructural, BoundVariablesByPositionFreeOnesByIdentity) {
  Var x = MakeVar("x"), y = MakeVar("y");
  EXPECT_TRUE(StructuralEqual(Add(x, I(1)), Add(x, I(1))));
  EXPECT_FALSE(StructuralEqual(Add(x, I(1)), Add(y, I(1))));  // free: must be the same object
  Buffer a = MakeBuffer("a", DType::kFloat32, {I(8)});
  Var k1 = MakeVar("k"), k2 = MakeVar("other");
  EXPECT_TRUE(StructuralEqual(Reduce(ReduceKind::kSum, Load(a, {k1}), {{k1, I(8)}}),
                              Reduce(ReduceKind::kSum, Load(a, {k2}), {{k2, I(8)}})));
  EXPECT_FALSE(StructuralEqual(Reduce(ReduceKind::kSum, Load(a, {k1}), {{k1, I(8)}}),
                               Reduce(ReduceKind::kMax, Load(a, {k2}), {{k2, I(8)}})));

  // Which binder a use refers to matters, also when one side reuses a variable object.
  Var i = MakeVar("i"), j = MakeVar("j"), p = MakeVar("p"), q = MakeVar("q");
  auto nest = [&](Var outer, Var inner, Var used) {
    return For(outer, I(0), I(4), ForKind::kSerial,
               For(inner, I(0), I(4), ForKind::kSerial, Evaluate(used)));
  };
  EXPECT_TRUE(StructuralEqual(nest(i, j, i), nest(p, q, p)));
  EXPECT_FALSE(StructuralEqual(nest(i, j, i), nest(p, q, q)));
  EXPECT_FALSE(StructuralEqual(nest(i, j, i), nest(p, p, p)));  // p is shadowed
  Stmt siblings_reused = Seq({nest(i, j, j), nest(i, j, j)});
  Stmt siblings_fresh = Seq({nest(p, q, q), nest(MakeVar("r"), MakeVar("s"), MakeVar("s"))});
  EXPECT_TRUE(StructuralEqual(siblings_reused, Seq({nest(p, q, q), nest(p, q, q)})));
  EXPECT_FALSE(StructuralEqual(siblings_reused, siblings_fresh));  // the last `s` is free

  // Allocated buffers pair by position, and their declarations must agree.
  auto alloc_store = [](DType t) {
    Buffer b = MakeBuffer("t", t, {I(4)}, BufferNode::Scope::kLocal);
    return Seq({Alloc(b), Store(b, {I(0)}, MakeConst(1, t)), Free(b)});
  };
  EXPECT_TRUE(StructuralEqual(alloc_store(DType::kFloat32), alloc_store(DType::kFloat32)));
  EXPECT_FALSE(StructuralEqual(alloc_store(DType::kFloat32), alloc_store(DType::kInt32)));
  EXPECT_FALSE(StructuralEqual(F(0.0), F(-0.0)));
  EXPECT_TRUE(StructuralEqual(F(NAN), F(NAN)));
}

// ---- verifier ----

// Parameters shared by the must-fail tests: f(%in: f32[n, 16], %out: f32[n, 16]; n: i64).
struct Fixture {
  Var n = MakeVar("n");
  Var i = MakeVar("i");
  Buffer in = MakeBuffer("in", DType::kFloat32, {n, I(16)});
  Buffer out = MakeBuffer("out", DType::kFloat32, {n, I(16)});
  Buffer flat =
      MakeBuffer("flat", DType::kFloat32, {I(4), I(8)}, BufferNode::Scope::kGlobal, {I(8), I(1)});
  Buffer vec = MakeBuffer("vec", DType::kFloat32, {I(16)});

  PrimFunc Func(Stmt body) { return MakeFunc("bad", {in, flat, vec, out}, 1, {n}, body); }
  // for i in [0, n) { <s> }
  PrimFunc InLoop(Stmt s) { return Func(For(i, I(0), n, ForKind::kSerial, std::move(s))); }
  std::string Error(Stmt body, bool allow_reduce = true) {
    PrimFunc f = InLoop(std::move(body));
    return ErrorMessage([&] { Verify(f, allow_reduce); });
  }
};

TEST(LoopVerify, WellFormedFunctionsPass) {
  Verify(BuildAllNodes());
  Fixture x;
  Verify(x.InLoop(Store(x.out, {x.i, I(15)}, Load(x.flat, {I(31)}))));  // flat index
  Verify(x.InLoop(
      Store(x.vec, {Ramp(I(8), 1, 8)}, Load(x.in, {Broadcast(x.i, 8), Ramp(I(0), 2, 8)}))));
}

TEST(LoopVerify, UndefinedVariable) {
  Fixture x;
  Var q = MakeVar("q");
  std::string msg = x.Error(Store(x.out, {q, I(0)}, F(1)));
  EXPECT_THAT(msg, StartsWith("@bad: "));
  EXPECT_THAT(msg, HasSubstr("@bad: Store out: variable 'q' is used but not defined"));
  // A loop variable is out of scope after its loop.
  Var j = MakeVar("j");
  Stmt after = Seq({For(j, I(0), I(4), ForKind::kSerial, Evaluate(j)), Evaluate(j)});
  EXPECT_THAT(x.Error(after), HasSubstr("@bad: Evaluate: variable 'j' is used but not defined"));
  // A let's value cannot use its own variable.
  Var l = MakeVar("l");
  EXPECT_THAT(x.Error(LetStmt(l, Add(l, I(1)), Evaluate(l))),
              HasSubstr("@bad: LetStmt l: variable 'l' is used but not defined"));
  // Buffer shapes may only use scalar parameters.
  Buffer odd = MakeBuffer("odd", DType::kFloat32, {q});
  EXPECT_THAT(ErrorMessage([&] { Verify(MakeFunc("bad", {odd}, 0, {}, Evaluate(I(0)))); }),
              HasSubstr("@bad: parameter %odd: variable 'q' is used but not defined"));
}

TEST(LoopVerify, VariableRedefinedInsideItsScope) {
  Fixture x;
  EXPECT_THAT(x.Error(For(x.i, I(0), I(2), ForKind::kSerial, Evaluate(x.i))),
              HasSubstr("@bad: For i: variable 'i' is defined again inside its own scope"));
}

TEST(LoopVerify, BufferNeitherParameterNorAllocated) {
  Fixture x;
  Buffer stray = MakeBuffer("stray", DType::kFloat32, {I(4)});
  EXPECT_THAT(
      x.Error(Store(x.out, {x.i, I(0)}, Load(stray, {I(0)}))),
      HasSubstr("@bad: Store out: buffer 'stray' is neither a parameter nor allocated here"));
  Buffer t = MakeBuffer("t", DType::kFloat32, {I(4)}, BufferNode::Scope::kLocal);
  // Used before its Alloc.
  EXPECT_THAT(x.Error(Seq({Store(t, {I(0)}, F(1)), Alloc(t), Free(t)})),
              HasSubstr("@bad: Store t: buffer 't' is neither a parameter nor allocated here"));
  // Used after its Free.
  EXPECT_THAT(x.Error(Seq({Alloc(t), Free(t), Store(t, {I(0)}, F(1))})),
              HasSubstr("@bad: Store t: buffer 't' is used after its Free"));
  // Its storage ends with the statement list that allocated it.
  Var j = MakeVar("j");
  Stmt scoped = Seq({For(j, I(0), I(2), ForKind::kSerial, Seq({Alloc(t), Store(t, {j}, F(1))})),
                     Evaluate(Load(t, {I(0)}))});
  EXPECT_THAT(x.Error(scoped),
              HasSubstr("@bad: Evaluate: buffer 't' is neither a parameter nor allocated here"));
  EXPECT_THAT(x.Error(Seq({Alloc(t), Free(t), Free(t)})),
              HasSubstr("@bad: Free t: 't' is freed twice"));
  EXPECT_THAT(x.Error(Free(t)), HasSubstr("@bad: Free t: 't' is not allocated here"));
  EXPECT_THAT(x.Error(Seq({Alloc(t), Alloc(t)})),
              HasSubstr("@bad: Alloc t: 't' is already allocated"));
  EXPECT_THAT(x.Error(Alloc(x.out)), HasSubstr("@bad: Alloc out: 'out' is a parameter"));
  EXPECT_THAT(x.Error(Store(x.in, {x.i, I(0)}, F(1))),
              HasSubstr("@bad: Store in: stores to 'in', an input, which is read-only"));
}

TEST(LoopVerify, IndexCountMustMatchRank) {
  Fixture x;
  EXPECT_THAT(x.Error(Store(x.out, {x.i}, F(1))),
              HasSubstr("@bad: Store out: 'out' has rank 2 but is accessed with 1 indices"));
  EXPECT_THAT(x.Error(Evaluate(Load(x.vec, {x.i, x.i}))),
              HasSubstr("@bad: Evaluate: 'vec' has rank 1 but is accessed with 2 indices"));
  EXPECT_THAT(x.Error(Evaluate(Load(x.flat, {I(0), I(0), I(0)}))),
              HasSubstr("'flat' has rank 2 but is accessed with 3 indices"));
}

TEST(LoopVerify, OperandTypesMustAgree) {
  Fixture x;
  // The helpers refuse to build these, so build the nodes directly.
  Expr bad_add = std::make_shared<const BinaryNode>(BinaryOp::kAdd, Load(x.vec, {I(0)}), x.i,
                                                    DType::kFloat32, 1);
  EXPECT_THAT(x.Error(Store(x.out, {x.i, I(0)}, bad_add)),
              HasSubstr("@bad: Store out: operands of '+' differ: f32 vs i64 in vec[0] + i"));
  Expr bad_select =
      std::make_shared<const SelectNode>(x.i, Load(x.vec, {I(0)}), Load(x.vec, {I(1)}));
  EXPECT_THAT(x.Error(Evaluate(bad_select)),
              HasSubstr("@bad: Evaluate: select condition has type i64"));
  EXPECT_THAT(x.Error(Evaluate(Load(x.vec, {Cast(DType::kInt32, x.i)}))),
              HasSubstr("@bad: Evaluate: index 0 of 'vec' has type i32; index arithmetic is i64"));
  EXPECT_THAT(x.Error(IfThenElse(x.i, Evaluate(x.i))),
              HasSubstr("@bad: IfThenElse: condition has type i64; it must be a bool scalar"));
  Var f = MakeVar("f", DType::kFloat32);
  EXPECT_THAT(x.Error(LetStmt(f, x.i, Evaluate(f))),
              HasSubstr("@bad: LetStmt f: variable 'f' of type f32 is bound to a i64"));
  EXPECT_THAT(x.Error(Evaluate(FloorDiv(Load(x.vec, {I(0)}), F(2)))),
              HasSubstr("'//' needs integer operands, got f32"));
}

TEST(LoopVerify, ConstantIndexOutOfRange) {
  Fixture x;
  EXPECT_THAT(
      x.Error(Store(x.out, {x.i, I(16)}, F(1))),
      HasSubstr("@bad: Store out: index 16 is out of range for dim 1 of 'out' (extent 16)"));
  EXPECT_THAT(x.Error(Evaluate(Load(x.vec, {I(-1)}))),
              HasSubstr("@bad: Evaluate: index -1 is out of range for dim 0 of 'vec' (extent 16)"));
  // The last lane of a ramp: 12 + 7 = 19.
  EXPECT_THAT(x.Error(Evaluate(Load(x.vec, {Ramp(I(12), 1, 8)}))),
              HasSubstr("index 19 is out of range for dim 0 of 'vec' (extent 16)"));
  // A flat index into a strided buffer: 3 * 8 + 7 * 1 + 1 = 32 elements.
  EXPECT_THAT(x.Error(Evaluate(Load(x.flat, {I(32)}))),
              HasSubstr("@bad: Evaluate: flat index 32 is out of range for 'flat' (32 elements)"));
}

TEST(LoopVerify, LoopVariableMustBeI64) {
  Fixture x;
  Var j = MakeVar("j", DType::kInt32);
  EXPECT_THAT(x.Error(For(j, I(0), I(4), ForKind::kSerial, Evaluate(j))),
              HasSubstr("@bad: For j: loop variable 'j' has type i32; it must be i64"));
  EXPECT_THAT(
      x.Error(For(MakeVar("k"), IntImm(0, DType::kInt32), I(4), ForKind::kSerial, Evaluate(I(0)))),
      HasSubstr("@bad: For k: min has type i32; index arithmetic is i64"));
}

TEST(LoopVerify, ReduceOnlyWhereAllowed) {
  Fixture x;
  Var k = MakeVar("k");
  Stmt s = Store(x.out, {x.i, I(0)}, Reduce(ReduceKind::kSum, Load(x.in, {x.i, k}), {{k, I(16)}}));
  EXPECT_THAT(x.Error(s, /*allow_reduce=*/false),
              HasSubstr("@bad: Store out: Reduce is not allowed here"));
  Verify(x.InLoop(s), /*allow_reduce=*/true);
  EXPECT_THAT(ErrorMessage([&] { Verify(BuildAllNodes(), false); }),
              HasSubstr("@all_nodes: Store out: Reduce is not allowed here"));
}

TEST(LoopVerify, StoredValueMustHaveTheBufferDtype) {
  Fixture x;
  EXPECT_THAT(x.Error(Store(x.out, {x.i, I(0)}, FloatImm(1, DType::kFloat16))),
              HasSubstr("@bad: Store out: stores a f16 value into 'out' of f32"));
  EXPECT_THAT(x.Error(Store(x.vec, {Ramp(I(0), 1, 4)}, F(1))),
              HasSubstr("@bad: Store vec: stores 1 lanes through indices of 4 lanes"));
}

TEST(LoopVerify, NullChildrenAreErrorsNotCrashes) {
  Fixture x;
  EXPECT_THAT(x.Error(For(MakeVar("j"), I(0), I(4), ForKind::kSerial, nullptr)),
              HasSubstr("@bad: For j: body is null"));
  EXPECT_THAT(x.Error(For(nullptr, I(0), I(4), ForKind::kSerial, Evaluate(I(0)))),
              HasSubstr("@bad: For <null>: loop variable is null"));
  EXPECT_THAT(x.Error(For(MakeVar("j"), I(0), nullptr, ForKind::kSerial, Evaluate(I(0)))),
              HasSubstr("@bad: For j: extent is null"));
  EXPECT_THAT(
      x.Error(std::make_shared<const StoreNode>(x.out, std::vector<Expr>{x.i, I(0)}, nullptr)),
      HasSubstr("@bad: Store out: value is null"));
  EXPECT_THAT(x.Error(std::make_shared<const StoreNode>(nullptr, std::vector<Expr>{}, F(1))),
              HasSubstr("@bad: Store <null>: access to a null buffer"));
  EXPECT_THAT(x.Error(Evaluate(std::make_shared<const BinaryNode>(BinaryOp::kAdd, x.i, nullptr,
                                                                  DType::kInt64, 1))),
              HasSubstr("@bad: Evaluate: '+' has a null operand"));
  EXPECT_THAT(x.Error(std::make_shared<const SeqNode>(std::vector<Stmt>{Evaluate(I(0)), nullptr})),
              HasSubstr("@bad: For i: statement 1 of a Seq is null"));
  EXPECT_THAT(x.Error(IfThenElse(BoolImm(true), nullptr)),
              HasSubstr("@bad: IfThenElse: then branch is null"));
  EXPECT_THAT(x.Error(Alloc(nullptr)), HasSubstr("@bad: Alloc <null>: buffer is null"));
  EXPECT_THAT(
      x.Error(Evaluate(std::make_shared<const LoadNode>(x.vec, std::vector<Expr>{nullptr}, 1))),
      HasSubstr("@bad: Evaluate: index 0 of 'vec' is null"));
  auto block = std::make_shared<ScheduleBlockNode>();
  block->name = "blk";
  block->iter_vars = {{MakeVar("v"), I(4)}};
  block->body = Evaluate(I(0));
  EXPECT_THAT(
      x.Error(block),
      HasSubstr("@bad: ScheduleBlock blk: 1 iter_vars but 0 is_reduce flags and 0 bindings"));
  EXPECT_THAT(ErrorMessage([&] { Verify(x.Func(nullptr)); }),
              HasSubstr("@bad: func: body is null"));
  EXPECT_THAT(ErrorMessage([&] { Verify(MakeFunc("bad", {nullptr}, 0, {}, Evaluate(I(0)))); }),
              HasSubstr("@bad: func: buffer parameter 0 is null"));
  EXPECT_THAT(ErrorMessage([&] { Verify(nullptr); }), HasSubstr("Verify: null function"));
}

// Shifts fold as the generated code computes them: past the width (or by a negative amount)
// a left or unsigned right shift is 0 and a signed right shift keeps the sign.
TEST(LoopFold, ShiftsPastTheWidthAndSignedRightShifts) {
  auto fold = [](BinaryOp op, int64_t a, int64_t b, DType t) {
    int64_t r = 0;
    EXPECT_TRUE(FoldIntBinary(op, a, b, t, &r));
    return r;
  };
  EXPECT_EQ(fold(BinaryOp::kShl, 3, 4, DType::kInt32), 48);
  EXPECT_EQ(fold(BinaryOp::kShl, 1, 31, DType::kInt32), std::numeric_limits<int32_t>::min());
  EXPECT_EQ(fold(BinaryOp::kShl, 1, 32, DType::kInt32), 0);
  EXPECT_EQ(fold(BinaryOp::kShl, 200, 1, DType::kUInt8), 144);  // wraps in 8 bits
  EXPECT_EQ(fold(BinaryOp::kShr, -16, 2, DType::kInt32), -4);
  EXPECT_EQ(fold(BinaryOp::kShr, -16, 40, DType::kInt32), -1);
  EXPECT_EQ(fold(BinaryOp::kShr, 255, 9, DType::kUInt8), 0);
  EXPECT_EQ(fold(BinaryOp::kShr, 255, -1, DType::kUInt16), 0);
  EXPECT_THAT(ErrorMessage([] { MakeBinary(BinaryOp::kShl, FloatImm(1), FloatImm(2)); }),
              HasSubstr("'shl' needs integers, not f32"));
}

TEST(LoopIR, EvalIndexComputesAsGeneratedCodeDoes) {
  loop::Var n = loop::MakeVar("n"), m = loop::MakeVar("m");
  std::map<const loop::VarNode*, int64_t> vars{{n.get(), 10}, {m.get(), 3}};
  EXPECT_EQ(loop::EvalIndex(loop::Add(loop::Mul(n, m), loop::IntImm(2)), vars), 32);
  EXPECT_EQ(loop::EvalIndex(loop::FloorDiv(loop::Sub(loop::IntImm(0), n), m), vars), -4);
  EXPECT_EQ(loop::EvalIndex(loop::FloorMod(loop::Sub(loop::IntImm(0), n), m), vars), 2);
  // Division by zero is 0, as in the kernels; MIN / -1 wraps.
  std::map<const loop::VarNode*, int64_t> zero{{n.get(), 10}, {m.get(), 0}};
  EXPECT_EQ(loop::EvalIndex(loop::FloorDiv(n, m), zero), 0);
  EXPECT_EQ(loop::EvalIndex(loop::FloorMod(n, m), zero), 0);
  std::map<const loop::VarNode*, int64_t> min{{n.get(), INT64_MIN}, {m.get(), -1}};
  EXPECT_EQ(loop::EvalIndex(loop::FloorDiv(n, m), min), INT64_MIN);
  EXPECT_EQ(loop::EvalIndex(loop::Max(n, m), vars), 10);
  EXPECT_THAT(ErrorMessage([&] { loop::EvalIndex(loop::Add(n, loop::MakeVar("k")), vars); }),
              HasSubstr("'k' has no value"));
  EXPECT_THAT(ErrorMessage([&] { loop::EvalIndex(loop::FloatImm(1.5), vars); }),
              HasSubstr("cannot evaluate"));
}

}  // namespace
}  // namespace kiln::loop
