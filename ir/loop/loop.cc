#include "ir/loop/loop.h"

#include <cmath>
#include <limits>

#include "ir/dim.h"
#include "ir/error.h"

namespace kiln::loop {

const char* ExprKindName(ExprKind k) {
  switch (k) {
#define KILN_LOOP_EXPR(N) \
  case ExprKind::k##N:    \
    return #N;
#include "ir/loop/loop_nodes.def"
  }
  return "?";
}

const char* StmtKindName(StmtKind k) {
  switch (k) {
#define KILN_LOOP_STMT(N) \
  case StmtKind::k##N:    \
    return #N;
#include "ir/loop/loop_nodes.def"
  }
  return "?";
}

const char* BinaryOpName(BinaryOp op) {
  switch (op) {
#define KILN_BINARY_OP(E, S, C) \
  case BinaryOp::E:             \
    return S;
#include "ir/loop/binary_ops.def"
  }
  return "?";
}

bool IsComparison(BinaryOp op) {
  switch (op) {
#define KILN_BINARY_OP(E, S, C) \
  case BinaryOp::E:             \
    return C;
#include "ir/loop/binary_ops.def"
  }
  return false;
}

const char* IntrinsicName(Intrinsic fn) {
  switch (fn) {
#define KILN_INTRINSIC(E, N, A) \
  case Intrinsic::E:            \
    return N;
#include "ir/loop/intrinsics.def"
  }
  return "?";
}

int IntrinsicArity(Intrinsic fn) {
  switch (fn) {
#define KILN_INTRINSIC(E, N, A) \
  case Intrinsic::E:            \
    return A;
#include "ir/loop/intrinsics.def"
  }
  return 0;
}

const char* ReduceKindName(ReduceKind k) {
  switch (k) {
    case ReduceKind::kSum:
      return "sum";
    case ReduceKind::kProd:
      return "prod";
    case ReduceKind::kMax:
      return "max";
    case ReduceKind::kMin:
      return "min";
    case ReduceKind::kMaxOrdered:
      return "max_ordered";
  }
  return "?";
}

const char* ForKindName(ForKind k) {
  switch (k) {
    case ForKind::kSerial:
      return "serial";
    case ForKind::kParallel:
      return "parallel";
    case ForKind::kVectorized:
      return "vectorized";
    case ForKind::kUnrolled:
      return "unrolled";
    case ForKind::kGpuBlockX:
      return "gpu.block.x";
    case ForKind::kGpuBlockY:
      return "gpu.block.y";
    case ForKind::kGpuBlockZ:
      return "gpu.block.z";
    case ForKind::kGpuThreadX:
      return "gpu.thread.x";
    case ForKind::kGpuThreadY:
      return "gpu.thread.y";
    case ForKind::kGpuThreadZ:
      return "gpu.thread.z";
  }
  return "?";
}

Expr IntImm(int64_t v, DType t) {
  return std::make_shared<const IntImmNode>(v, t);
}
Expr FloatImm(double v, DType t) {
  return std::make_shared<const FloatImmNode>(v, t);
}
Expr BoolImm(bool v) {
  return IntImm(v ? 1 : 0, DType::kBool);
}
Expr MakeConst(double v, DType t) {
  if (IsFloat(t)) return FloatImm(v, t);
  if (t == DType::kBool) return BoolImm(v != 0);
  return IntImm(static_cast<int64_t>(v), t);
}
Var MakeVar(const std::string& name, DType t) {
  return std::make_shared<const VarNode>(name, t);
}

int64_t WrapToDType(int64_t v, DType t) {
  switch (t) {
    case DType::kInt8:
      return static_cast<int8_t>(v);
    case DType::kInt16:
      return static_cast<int16_t>(v);
    case DType::kInt32:
      return static_cast<int32_t>(v);
    case DType::kUInt8:
      return static_cast<uint8_t>(v);
    case DType::kUInt16:
      return static_cast<uint16_t>(v);
    case DType::kUInt32:
      return static_cast<uint32_t>(v);
    case DType::kBool:
      return v != 0;
    default:  // i64, and u64 held as its bit pattern
      return v;
  }
}

bool IsConstInt(const Expr& e, int64_t* value) {
  const IntImmNode* i = AsIntImm(e);
  if (!i) return false;
  if (value) *value = i->value;
  return true;
}

std::optional<int64_t> ExtentBound(const Expr& e) {
  int64_t c;
  if (IsConstInt(e, &c)) return c;
  const BinaryNode* b = AsBinary(e);
  if (b && b->op == BinaryOp::kFloorMod && IsConstInt(b->b, &c) && c > 0) return c - 1;
  if (b && b->op == BinaryOp::kMin) {
    std::optional<int64_t> x = ExtentBound(b->a), y = ExtentBound(b->b);
    if (x && y) return std::min(*x, *y);
    return x ? x : y;
  }
  return std::nullopt;
}

namespace {

// A float zero of the given sign: x + (-0.0) and x - (+0.0) are x for every x, but
// x + (+0.0) is not (-0.0 + 0.0 == +0.0).
bool IsFloatZero(const Expr& e, bool negative) {
  const FloatImmNode* f = AsFloatImm(e);
  return f && f->value == 0 && std::signbit(f->value) == negative;
}

bool IsConstValue(const Expr& e, double v) {
  if (const IntImmNode* i = AsIntImm(e)) return static_cast<double>(i->value) == v;
  if (const FloatImmNode* f = AsFloatImm(e)) return f->value == v;
  return false;
}

}  // namespace

int64_t IntDTypeMin(DType t) {
  switch (t) {
    case DType::kInt8:
      return std::numeric_limits<int8_t>::min();
    case DType::kInt16:
      return std::numeric_limits<int16_t>::min();
    case DType::kInt32:
      return std::numeric_limits<int32_t>::min();
    case DType::kInt64:
      return std::numeric_limits<int64_t>::min();
    default:  // unsigned and bool
      return 0;
  }
}

int64_t IntDTypeMax(DType t) {
  switch (t) {
    case DType::kInt8:
      return std::numeric_limits<int8_t>::max();
    case DType::kInt16:
      return std::numeric_limits<int16_t>::max();
    case DType::kInt32:
      return std::numeric_limits<int32_t>::max();
    case DType::kUInt8:
      return std::numeric_limits<uint8_t>::max();
    case DType::kUInt16:
      return std::numeric_limits<uint16_t>::max();
    case DType::kUInt32:
      return std::numeric_limits<uint32_t>::max();
    case DType::kBool:
      return 1;
    default:  // i64; u64's top half is not representable, callers leave u64 unfolded
      return std::numeric_limits<int64_t>::max();
  }
}

bool FoldIntBinary(BinaryOp op, int64_t a, int64_t b, DType t, int64_t* out) {
  bool div_traps = b == 0 || (a == IntDTypeMin(t) && b == -1 && IsSignedInteger(t));
  // u64 values are held as int64 bit patterns: only the wrapping ops and equality fold alike
  // for the top half.
  if (t == DType::kUInt64 && (a < 0 || b < 0) && op != BinaryOp::kAdd && op != BinaryOp::kSub &&
      op != BinaryOp::kMul && op != BinaryOp::kEQ && op != BinaryOp::kNE)
    return false;
  switch (op) {
    case BinaryOp::kAdd:
      *out = WrapToDType(WrapAdd(a, b), t);
      return true;
    case BinaryOp::kSub:
      *out = WrapToDType(WrapSub(a, b), t);
      return true;
    case BinaryOp::kMul:
      *out = WrapToDType(WrapMul(a, b), t);
      return true;
    case BinaryOp::kDiv:
      if (div_traps) return false;
      *out = WrapToDType(a / b, t);
      return true;
    case BinaryOp::kFloorDiv:
      if (div_traps) return false;
      *out = WrapToDType(FloorDivInt(a, b), t);
      return true;
    case BinaryOp::kFloorMod:
      if (div_traps) return false;
      *out = WrapToDType(FloorModInt(a, b), t);
      return true;
    case BinaryOp::kMin:
      *out = std::min(a, b);
      return true;
    case BinaryOp::kMax:
      *out = std::max(a, b);
      return true;
    case BinaryOp::kEQ:
      *out = a == b;
      return true;
    case BinaryOp::kNE:
      *out = a != b;
      return true;
    case BinaryOp::kLT:
      *out = a < b;
      return true;
    case BinaryOp::kLE:
      *out = a <= b;
      return true;
    case BinaryOp::kGT:
      *out = a > b;
      return true;
    case BinaryOp::kGE:
      *out = a >= b;
      return true;
    case BinaryOp::kAnd:
      *out = a && b;
      return true;
    case BinaryOp::kOr:
      *out = a || b;
      return true;
    case BinaryOp::kShl:
    case BinaryOp::kShr: {
      const int bits = DTypeSize(t) * 8;
      const bool out_of_range = b < 0 || b >= bits;
      if (op == BinaryOp::kShl) {
        *out =
            out_of_range ? 0 : WrapToDType(static_cast<int64_t>(static_cast<uint64_t>(a) << b), t);
      } else if (IsSignedInteger(t)) {
        *out = a >> (out_of_range ? bits - 1 : b);
      } else {  // unsigned values are nonnegative here (u64's top half is not folded)
        *out = out_of_range ? 0 : static_cast<int64_t>(static_cast<uint64_t>(a) >> b);
      }
      return true;
    }
  }
  return false;
}

namespace {

// `lookup(v)` gives a variable's value, or nullptr when it has none.
template <class Lookup>
int64_t EvalIndexWith(const Expr& e, const Lookup& lookup) {
  if (const auto* i = AsIntImm(e)) return i->value;
  if (const auto* v = AsVar(e)) {
    const int64_t* value = lookup(v);
    if (!value)
      Throw(ErrorCode::kInvalidArgument, "index expression: '", v->name, "' has no value");
    return *value;
  }
  if (const auto* c = AsCast(e)) return EvalIndexWith(c->value, lookup);
  if (const auto* b = AsBinary(e)) {
    int64_t x = EvalIndexWith(b->a, lookup), y = EvalIndexWith(b->b, lookup), r = 0;
    if (FoldIntBinary(b->op, x, y, DType::kInt64, &r)) return r;
    bool div = b->op == BinaryOp::kDiv || b->op == BinaryOp::kFloorDiv;
    if (div || b->op == BinaryOp::kFloorMod) return y == 0 || !div ? 0 : WrapSub(0, x);
  }
  Throw(ErrorCode::kInvalidArgument, "index expression: cannot evaluate a ", ExprKindName(e->kind));
}

}  // namespace

int64_t EvalIndex(const Expr& e, const std::map<const VarNode*, int64_t>& vars) {
  return EvalIndexWith(e, [&](const VarNode* v) -> const int64_t* {
    auto it = vars.find(v);
    return it == vars.end() ? nullptr : &it->second;
  });
}

int64_t EvalIndex(const Expr& e, const std::vector<Var>& params, const int64_t* values) {
  return EvalIndexWith(e, [&](const VarNode* v) -> const int64_t* {
    for (size_t i = 0; i < params.size(); ++i)
      if (params[i].get() == v) return &values[i];
    return nullptr;
  });
}

Expr MakeBinary(BinaryOp op, Expr a, Expr b) {
  KILN_CHECK(a && b, "binary ", BinaryOpName(op), " with a null operand");
  if (a->dtype != b->dtype || a->lanes != b->lanes)
    Throw(ErrorCode::kInvalidArgument, "loop IR: operands of '", BinaryOpName(op),
          "' differ: ", DTypeName(a->dtype), "x", a->lanes, " vs ", DTypeName(b->dtype), "x",
          b->lanes);
  if ((op == BinaryOp::kShl || op == BinaryOp::kShr) && !IsInteger(a->dtype))
    Throw(ErrorCode::kInvalidArgument, "loop IR: '", BinaryOpName(op), "' needs integers, not ",
          DTypeName(a->dtype));
  DType out = IsComparison(op) ? DType::kBool : a->dtype;
  int64_t x, y, r;
  if (IsConstInt(a, &x) && IsConstInt(b, &y) && FoldIntBinary(op, x, y, a->dtype, &r))
    return IntImm(r, out);
  bool is_float = IsFloat(a->dtype);
  // The identities that lowering produces constantly; everything else is Simplify's job.
  if (!IsComparison(op)) {
    switch (op) {
      case BinaryOp::kAdd:
        if (is_float ? IsFloatZero(b, true) : IsConstValue(b, 0)) return a;
        if (is_float ? IsFloatZero(a, true) : IsConstValue(a, 0)) return b;
        break;
      case BinaryOp::kSub:
        if (is_float ? IsFloatZero(b, false) : IsConstValue(b, 0)) return a;
        break;
      case BinaryOp::kMul:
        if (IsConstValue(b, 1)) return a;
        if (IsConstValue(a, 1)) return b;
        if (!IsFloat(a->dtype) && (IsConstValue(a, 0) || IsConstValue(b, 0))) return IntImm(0, out);
        break;
      case BinaryOp::kDiv:
      case BinaryOp::kFloorDiv:
        if (IsConstValue(b, 1)) return a;
        break;
      default:
        break;
    }
  }
  return std::make_shared<const BinaryNode>(op, std::move(a), std::move(b), out, a->lanes);
}

Expr Add(Expr a, Expr b) {
  return MakeBinary(BinaryOp::kAdd, std::move(a), std::move(b));
}
Expr Sub(Expr a, Expr b) {
  return MakeBinary(BinaryOp::kSub, std::move(a), std::move(b));
}
Expr Mul(Expr a, Expr b) {
  return MakeBinary(BinaryOp::kMul, std::move(a), std::move(b));
}
Expr Div(Expr a, Expr b) {
  return MakeBinary(BinaryOp::kDiv, std::move(a), std::move(b));
}
Expr FloorDiv(Expr a, Expr b) {
  return MakeBinary(BinaryOp::kFloorDiv, std::move(a), std::move(b));
}
Expr FloorMod(Expr a, Expr b) {
  return MakeBinary(BinaryOp::kFloorMod, std::move(a), std::move(b));
}
Expr Min(Expr a, Expr b) {
  return MakeBinary(BinaryOp::kMin, std::move(a), std::move(b));
}
Expr Max(Expr a, Expr b) {
  return MakeBinary(BinaryOp::kMax, std::move(a), std::move(b));
}

Expr Not(Expr a) {
  KILN_CHECK(a && a->dtype == DType::kBool, "not of a non-bool");
  return std::make_shared<const NotNode>(std::move(a));
}

Expr Select(Expr cond, Expr t, Expr f) {
  KILN_CHECK(cond && t && f, "select with a null operand");
  if (cond->dtype != DType::kBool || t->dtype != f->dtype || t->lanes != f->lanes)
    Throw(ErrorCode::kInvalidArgument, "loop IR: select(", DTypeName(cond->dtype), ", ",
          DTypeName(t->dtype), ", ", DTypeName(f->dtype), ") is ill-typed");
  int64_t c;
  if (IsConstInt(cond, &c)) return c ? t : f;
  return std::make_shared<const SelectNode>(std::move(cond), std::move(t), std::move(f));
}

Expr Cast(DType t, Expr v) {
  KILN_CHECK(v != nullptr, "cast of null");
  if (v->dtype == t) return v;
  if (const IntImmNode* i = AsIntImm(v); i && !IsFloat(t) && t != DType::kBool && v->lanes == 1)
    if (t == DType::kInt64 || t == DType::kInt32) return IntImm(WrapToDType(i->value, t), t);
  return std::make_shared<const CastNode>(t, std::move(v));
}

Expr Load(Buffer b, std::vector<Expr> indices) {
  KILN_CHECK(b != nullptr, "load from a null buffer");
  int lanes = 1;
  for (const Expr& i : indices) lanes = std::max(lanes, i->lanes);
  return std::make_shared<const LoadNode>(std::move(b), std::move(indices), lanes);
}

Expr Call(Intrinsic fn, std::vector<Expr> args) {
  if (static_cast<int>(args.size()) != IntrinsicArity(fn))
    Throw(ErrorCode::kInvalidArgument, "loop IR: ", IntrinsicName(fn), " takes ",
          IntrinsicArity(fn), " arguments, got ", args.size());
  for (const Expr& a : args) {
    if (a->dtype != args[0]->dtype || a->lanes != args[0]->lanes)
      Throw(ErrorCode::kInvalidArgument, "loop IR: arguments of ", IntrinsicName(fn),
            " differ in type");
  }
  DType t = args[0]->dtype;
  int lanes = args[0]->lanes;
  return std::make_shared<const CallNode>(fn, std::move(args), t, lanes);
}

Expr Ramp(Expr base, int64_t stride, int lanes) {
  KILN_CHECK(base && base->lanes == 1 && lanes > 1, "ramp needs a scalar base and lanes > 1");
  return std::make_shared<const RampNode>(std::move(base), stride, lanes);
}

Expr Broadcast(Expr v, int lanes) {
  KILN_CHECK(v && v->lanes == 1 && lanes >= 1, "broadcast needs a scalar");
  if (lanes == 1) return v;
  return std::make_shared<const BroadcastNode>(std::move(v), lanes);
}

Expr Reduce(ReduceKind k, Expr source, std::vector<IterVar> axes) {
  KILN_CHECK(source != nullptr, "reduce of null");
  return std::make_shared<const ReduceNode>(k, std::move(source), std::move(axes));
}

Buffer MakeBuffer(const std::string& name, DType t, std::vector<Expr> shape,
                  BufferNode::Scope scope, std::vector<Expr> strides) {
  auto b = std::make_shared<BufferNode>();
  b->name = name;
  b->dtype = t;
  b->shape = std::move(shape);
  b->strides = std::move(strides);
  b->scope = scope;
  return b;
}

Stmt LetStmt(Var v, Expr value, Stmt body) {
  return std::make_shared<const LetStmtNode>(std::move(v), std::move(value), std::move(body));
}
Stmt Store(Buffer b, std::vector<Expr> indices, Expr value) {
  KILN_CHECK(b && value, "store with a null operand");
  return std::make_shared<const StoreNode>(std::move(b), std::move(indices), std::move(value));
}
Stmt Alloc(Buffer b) {
  return std::make_shared<const AllocNode>(std::move(b));
}
Stmt Free(Buffer b) {
  return std::make_shared<const FreeNode>(std::move(b));
}
Stmt IfThenElse(Expr cond, Stmt then_case, Stmt else_case) {
  return std::make_shared<const IfThenElseNode>(std::move(cond), std::move(then_case),
                                                std::move(else_case));
}
Stmt For(Var v, Expr min, Expr extent, ForKind kind, Stmt body) {
  return std::make_shared<const ForNode>(std::move(v), std::move(min), std::move(extent), kind,
                                         std::move(body));
}
Stmt Evaluate(Expr v) {
  return std::make_shared<const EvaluateNode>(std::move(v));
}

Stmt Prefetch(Expr target) {
  KILN_CHECK(target && target->kind == ExprKind::kLoad && target->lanes == 1,
             "prefetch of something other than a scalar load");
  return std::make_shared<const PrefetchNode>(std::move(target));
}

std::pair<Expr, int64_t> SplitConstOffset(const Expr& e) {
  int64_t k = 0;
  if (const BinaryNode* b = AsBinary(e)) {
    if (b->op == BinaryOp::kAdd && IsConstInt(b->b, &k)) return {b->a, k};
    if (b->op == BinaryOp::kAdd && IsConstInt(b->a, &k)) return {b->b, k};
    if (b->op == BinaryOp::kSub && IsConstInt(b->b, &k) && k != std::numeric_limits<int64_t>::min())
      return {b->a, -k};
  }
  return {e, 0};
}

Stmt Seq(std::vector<Stmt> stmts) {
  std::vector<Stmt> flat;
  for (Stmt& s : stmts) {
    if (!s) continue;
    if (const SeqNode* inner = AsSeq(s)) {
      flat.insert(flat.end(), inner->stmts.begin(), inner->stmts.end());
    } else {
      flat.push_back(std::move(s));
    }
  }
  if (flat.size() == 1) return flat[0];
  return std::make_shared<const SeqNode>(std::move(flat));
}

}  // namespace kiln::loop
