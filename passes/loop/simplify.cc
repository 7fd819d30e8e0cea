// LoopSimplify: constant folding and canonicalization of the loop IR's arithmetic, above all the
// index math that lowering, unrolling and flattening leave behind.
//
//   before:  out[(i + 1) * 16 + j - 16] = select(2 < 3, x[(i * 4) // 4] * 1.0f, 0.0f)
//   after:   out[i * 16 + j] = x[i]
//
// An expression pass: every rule rewrites one node whose operands the post-order adaptor has
// already simplified, and none needs to know where the node is. That is also its limit: an
// expression seen without context does not know the range of a loop variable, so rules that need
// bounds (`i // 16 -> 0` for i in [0, 16), `min(i, 16) -> i`) are out of scope here; they need a
// pass that carries loop ranges down. The only range facts used come from the expression itself:
// a floor modulo by c > 0 lies in [0, c).
//
// Rules (c, c1, c2: constants, or broadcasts of one; x, a, b: anything; == is structural):
//  Integers, any width. Generated code wraps, so every rule here holds with wrapping too, and
//  constants fold wrapped to their dtype (the loop.h helpers fold in i64 and do not wrap):
//   - folding of every operator on constants, except x / 0, x // 0, x % 0 and MIN / -1, which
//     are left to the code generator's defined behaviour;
//   - constants go right (c + x, c * x, min/max/==/!=/&&/|| likewise; c < x -> x > c) and
//     outward: (a + c1) + c2 -> a + (c1 + c2), (a + c) + b -> (a + b) + c, (a * c1) * c2 ->
//     a * (c1 * c2), (a * c) * b -> (a * b) * c, (a + c1) * c2 -> a * c2 + c1 * c2; a sum with
//     a constant prints as `a + c` or `a - c` with c > 0;
//   - x + 0, x - 0, x * 1, x * 0, x // 1, x / 1 -> x or 0; x % 1 -> 0; x - x -> 0;
//     (a + b) - b -> a; (a - b) + b -> a; c1 - (a + c2) -> (c1 - c2) - a;
//   - min/max(x, x) -> x; min(min(x, c1), c2) -> min(x, min(c1, c2)) (and max);
//     max(x % c1, c) -> x % c1 for c <= 0 and min(x % c1, c) -> x % c1 for c >= c1 - 1;
//   - x == x, x <= x, x >= x -> true; x != x, x < x, x > x -> false;
//   - (x % c) % c -> x % c, and (x % c1) % c2 -> x % c2 when c2 divides c1;
//     for 0 < c1 <= c2: (x % c1) // c2 -> 0 and (x % c1) % c2 -> x % c1 (the range of a modulo).
//  Index math (i64) also assumes that nothing overflows, as every offset into a buffer that fits
//  in memory does; these rules are exact only then, so narrower integers (data, not indices) do
//  not get them:
//   - (x * c) // c -> x, (x * c) % c -> 0, (x * c) / c -> x; generally, for a multiple m of c
//     (a constant, a product with a constant multiple of c, a sum of multiples):
//     (m + b) // c -> m/c + b // c, (m + b) % c -> b % c, (a - m) // c -> a // c - m/c;
//   - (a + k) // c -> (a + k % c) // c + k // c and (a + k) % c -> (a + k % c) % c for k >= c > 0;
//   - (x // c1) // c2 -> x // (c1 * c2) for c1, c2 > 0;
//   - min(a + c1, a + c2) -> a + min(c1, c2) (and max); (a + c1) < c2 -> a < c2 - c1 (every
//     comparison); (a + c1) < (a + c2) -> c1 < c2.
//  Floats: only rewrites that give the same bits for every input, NaN, infinities and -0.0
//  included:
//   - x * 1.0, 1.0 * x, x / 1.0, x + (-0.0), (-0.0) + x, x - 0.0 -> x; min/max(x, x) -> x;
//   - f32 and f64 constants fold (+ - * / min max, as IEEE rounds them, which is what the
//     generated code computes; f16/bf16 arithmetic runs in f32 without rounding in between, so
//     its constants do not fold to an f16 value); comparisons of constants fold for every dtype;
//     c < x -> x > c.
//   - NOT: x + 0.0 (-0.0 + 0.0 is +0.0), x * 0.0 (NaN, infinity, the sign), x - x (NaN,
//     infinity), reassociation (rounding), moving a constant right in + and * (which NaN payload
//     wins).
//  Logic and select: !c, !!x -> x, !(a < b) -> a >= b (integer operands only: NaN); c && x,
//  c || x, x && x, x || x; select(c, t, f) with a constant c, select(c, x, x) -> x,
//  select(c, true, false) -> c, select(c, false, true) -> !c.
//  Casts: of constants, with the code generator's conversions (integers wrap; float -> int
//  truncates and saturates, NaN -> 0; i64 -> f32 rounds through f64; f16/bf16 round from f32);
//  cast(t, cast(t1, x)) -> cast(t, x) when t1 holds every value of x's dtype exactly.
//  Vectors: broadcast(a) op broadcast(b) -> broadcast(a op b); ramp(a, s) + broadcast(b) ->
//  ramp(a + b, s) (and -); ramp(a, s1) + ramp(b, s2) -> ramp(a + b, s1 + s2); ramp(a, s) *
//  broadcast(c) -> ramp(a * c, s * c); ramp(a, 0) -> broadcast(a).
//
// Nodes that no rule changes are returned as they are, so an unchanged kernel stays the same
// object.
#include <cmath>
#include <cstdint>
#include <limits>

#include "ir/loop/loop_text.h"
#include "passes/loop/loop_analysis.h"
#include "passes/loop_pass.h"

namespace kiln {

namespace {

using loop::BinaryNode;
using loop::BinaryOp;
using loop::Expr;
using loop::WrapAdd;
using loop::WrapMul;
using loop::WrapSub;
using loop::WrapToDType;

// ---- constants ----

// Integers and bool share IntImm; bool takes part in ==, !=, && and ||.
bool IsIntLike(DType t) {
  return IsInteger(t) || t == DType::kBool;
}

// The integer constant `e` is, looking through a broadcast.
bool IntConst(const Expr& e, int64_t* v) {
  if (const loop::BroadcastNode* b = loop::AsBroadcast(e)) return loop::IsConstInt(b->value, v);
  return loop::IsConstInt(e, v);
}

bool FloatConst(const Expr& e, double* v) {
  const Expr& s = loop::AsBroadcast(e) ? loop::AsBroadcast(e)->value : e;
  const loop::FloatImmNode* f = loop::AsFloatImm(s);
  if (!f) return false;
  *v = f->value;
  return true;
}

bool IsConst(const Expr& e) {
  int64_t i;
  double f;
  return IntConst(e, &i) || FloatConst(e, &f);
}

// A constant of dtype `t` (wrapped into it) with the lanes of `like`.
Expr IntLike(int64_t v, DType t, const Expr& like) {
  return loop::Broadcast(loop::IntImm(WrapToDType(v, t), t), like->lanes);
}
Expr IntLike(int64_t v, const Expr& like) {
  return IntLike(v, like->dtype, like);
}
Expr BoolLike(bool v, const Expr& like) {
  return IntLike(v ? 1 : 0, DType::kBool, like);
}
Expr FloatLike(double v, DType t, const Expr& like) {
  return loop::Broadcast(loop::FloatImm(v, t), like->lanes);
}

bool Same(const Expr& a, const Expr& b) {
  return a == b || loop::StructuralEqual(a, b);
}

// ---- folding ----

// `v` rounded to what a value of float dtype `t` holds.
double RoundToFloat(double v, DType t) {
  switch (t) {
    case DType::kFloat32:
      return static_cast<float>(v);
    case DType::kFloat16:
      return static_cast<float>(Half(static_cast<float>(v)));
    case DType::kBFloat16:
      return static_cast<float>(BFloat16(static_cast<float>(v)));
    default:
      return v;
  }
}

// a op b on float constants of dtype t, the way generated code computes it.
bool FoldFloat(BinaryOp op, DType t, double a, double b, Expr* out, const Expr& like) {
  bool arith_ok = t == DType::kFloat32 || t == DType::kFloat64;
  double r;
  switch (op) {
    case BinaryOp::kAdd:
      r = a + b;
      break;
    case BinaryOp::kSub:
      r = a - b;
      break;
    case BinaryOp::kMul:
      r = a * b;
      break;
    case BinaryOp::kDiv:
      r = a / b;
      break;
    // NaN-propagating, otherwise `a < b ? b : a` (max) and `b < a ? b : a` (min).
    case BinaryOp::kMax:
      r = std::isnan(b) || a < b ? b : a;
      arith_ok = true;
      break;
    case BinaryOp::kMin:
      r = std::isnan(b) || b < a ? b : a;
      arith_ok = true;
      break;
    case BinaryOp::kEQ:
    case BinaryOp::kNE:
    case BinaryOp::kLT:
    case BinaryOp::kLE:
    case BinaryOp::kGT:
    case BinaryOp::kGE: {
      bool c = op == BinaryOp::kEQ   ? a == b
               : op == BinaryOp::kNE ? a != b
               : op == BinaryOp::kLT ? a < b
               : op == BinaryOp::kLE ? a <= b
               : op == BinaryOp::kGT ? a > b
                                     : a >= b;
      *out = BoolLike(c, like);
      return true;
    }
    default:  // floor division and modulo of floats: rare, and not worth matching libm's fmod
      return false;
  }
  if (!arith_ok) return false;
  *out = FloatLike(RoundToFloat(r, t), t, like);
  return true;
}

// The node a op b folds to when both are constants; null otherwise.
Expr FoldConstants(BinaryOp op, const Expr& a, const Expr& b) {
  if (a->dtype != b->dtype || a->lanes != b->lanes) return nullptr;
  int64_t x, y, r;
  if (IntConst(a, &x) && IntConst(b, &y) && IsIntLike(a->dtype)) {
    if (!loop::FoldIntBinary(op, x, y, a->dtype, &r)) return nullptr;
    return IntLike(r, loop::IsComparison(op) ? DType::kBool : a->dtype, a);
  }
  double fx, fy;
  Expr out;
  if (FloatConst(a, &fx) && FloatConst(b, &fy) && IsFloat(a->dtype) &&
      FoldFloat(op, a->dtype, fx, fy, &out, a))
    return out;
  return nullptr;
}

// How many value bits (sign excluded) an integer dtype has, and how many significand bits a
// float dtype has: an integer converts exactly when its bits fit.
int ValueBits(DType t) {
  switch (t) {
    case DType::kBool:
      return 1;
    case DType::kInt8:
      return 7;
    case DType::kUInt8:
      return 8;
    case DType::kUInt16:
      return 16;
    case DType::kUInt32:
      return 32;
    case DType::kUInt64:
      return 64;
    case DType::kInt16:
      return 15;
    case DType::kInt32:
      return 31;
    default:
      return 63;
  }
}
int SignificandBits(DType t) {
  switch (t) {
    case DType::kFloat16:
      return 11;
    case DType::kBFloat16:
      return 8;
    case DType::kFloat32:
      return 24;
    default:
      return 53;
  }
}

// Whether every value of `from` converts to `to` exactly (so the cast loses nothing).
bool Lossless(DType from, DType to) {
  if (from == to || from == DType::kBool) return true;
  if (to == DType::kBool) return false;
  if (IsInteger(from) && IsInteger(to)) {
    // A signed `from` has negatives, which no unsigned `to` holds.
    if (IsUnsignedInteger(to) && !IsUnsignedInteger(from)) return false;
    return ValueBits(to) >= ValueBits(from);
  }
  if (IsInteger(from) && IsFloat(to)) return ValueBits(from) <= SignificandBits(to);
  if (IsFloat(from) && IsFloat(to)) {
    if (to == DType::kFloat64) return true;
    return to == DType::kFloat32 && from != DType::kFloat64;
  }
  return false;  // float -> integer
}

// A float converted to integer dtype `t`: truncated and saturated, NaN -> 0.
int64_t FloatToInt(double v, DType t) {
  if (std::isnan(v)) return 0;
  double lo = static_cast<double>(loop::IntDTypeMin(t)),
         hi = static_cast<double>(loop::IntDTypeMax(t));
  if (v <= lo) return loop::IntDTypeMin(t);
  if (v >= hi) return loop::IntDTypeMax(t);
  return static_cast<int64_t>(v);
}

// cast(t, constant), the way generated code converts.
Expr FoldCast(DType t, const Expr& value) {
  DType from = value->dtype;
  int64_t i;
  double f;
  // u64 constants of the top half are negative int64 patterns, and u64's range is not an
  // int64 one: those conversions are left to the generated code.
  if ((from == DType::kUInt64 || t == DType::kUInt64) && !IsIntLike(t)) return nullptr;
  if (t == DType::kUInt64 && IsFloat(from)) return nullptr;
  if (IntConst(value, &i) && IsIntLike(from)) {
    if (IsIntLike(t)) return IntLike(i, t, value);
    double d;
    if (t == DType::kFloat64) {
      d = static_cast<double>(i);
    } else if (from == DType::kInt64) {
      d = static_cast<float>(static_cast<double>(i));  // through f64, as the code generator does
    } else {
      d = static_cast<float>(i);
    }
    return FloatLike(RoundToFloat(d, t), t, value);
  }
  if (FloatConst(value, &f) && IsFloat(from)) {
    if (t == DType::kBool) return BoolLike(f != 0, value);  // NaN is true
    if (IsInteger(t)) return IntLike(FloatToInt(f, t), t, value);
    if (t == DType::kFloat64) return FloatLike(f, t, value);
    return FloatLike(RoundToFloat(static_cast<float>(f), t), t, value);
  }
  return nullptr;
}

// ---- the rewrite ----

Expr Rewrite(const Expr& e);

// A binary node without the identities of loop::MakeBinary, which treats +0.0 as an additive
// identity of floats (wrong for x = -0.0) and folds narrow integers without wrapping.
Expr NewBinary(BinaryOp op, const Expr& a, const Expr& b) {
  if (a->dtype != b->dtype || a->lanes != b->lanes) return loop::MakeBinary(op, a, b);  // throws
  DType t = loop::IsComparison(op) ? DType::kBool : a->dtype;
  return std::make_shared<const BinaryNode>(op, a, b, t, a->lanes);
}

// a op b, simplified (both operands already are).
Expr Bin(BinaryOp op, const Expr& a, const Expr& b) {
  if (Expr folded = FoldConstants(op, a, b)) return folded;
  return Rewrite(NewBinary(op, a, b));
}

// e == rest + c for an integer e; rest is null when e is the constant c.
struct SumParts {
  Expr rest;
  int64_t c;
};
SumParts SplitSum(const Expr& e) {
  int64_t v;
  if (IntConst(e, &v)) return {nullptr, v};
  if (const BinaryNode* b = loop::AsBinary(e); b && IsInteger(e->dtype) && IntConst(b->b, &v)) {
    if (b->op == BinaryOp::kAdd) return {b->a, v};
    if (b->op == BinaryOp::kSub) return {b->a, WrapToDType(WrapSub(0, v), e->dtype)};
  }
  return {e, 0};
}

Expr AddConst(const Expr& e, int64_t c);

// rest + c in canonical form: `rest + c` or `rest - c` with the smaller constant; `like` gives
// the dtype and lanes. `rest` must be simplified and have no constant term of its own.
Expr MakeSum(const Expr& rest, int64_t c, const Expr& like) {
  DType t = like->dtype;
  c = WrapToDType(c, t);
  if (!rest) return IntLike(c, like);
  if (c == 0) return rest;
  if (const loop::RampNode* r = loop::AsRamp(rest))  // the constant goes into the base
    return loop::Ramp(AddConst(r->base, c), r->stride, r->lanes);
  int64_t neg = WrapToDType(WrapSub(0, c), t);
  bool use_sub = IsSignedInteger(t) ? c < 0 && neg > 0 : neg < c;
  if (use_sub) return NewBinary(BinaryOp::kSub, rest, IntLike(neg, like));
  return NewBinary(BinaryOp::kAdd, rest, IntLike(c, like));
}

// e + c for a simplified e.
Expr AddConst(const Expr& e, int64_t c) {
  SumParts p = SplitSum(e);
  return MakeSum(p.rest, WrapAdd(p.c, c), e);
}

// Whether c divides v exactly (c != 0), with the quotient; MIN / -1, which overflows, does not
// count.
bool Divides(int64_t c, int64_t v, int64_t* q) {
  if (c == 0 || (c == -1 && v == std::numeric_limits<int64_t>::min())) return false;
  if (v % c != 0) return false;
  *q = v / c;
  return true;
}

// Whether `e` is an integer multiple of c (c != 0) that the rules can see: a constant, a product
// with a constant multiple of c, a sum or difference of such. Sets *quotient to e / c.
bool DivideExact(const Expr& e, int64_t c, Expr* quotient) {
  int64_t v;
  if (IntConst(e, &v)) {
    int64_t q;
    if (!Divides(c, v, &q)) return false;
    *quotient = IntLike(q, e);
    return true;
  }
  const BinaryNode* b = loop::AsBinary(e);
  if (!b) return false;
  int64_t q;
  if (b->op == BinaryOp::kMul && IntConst(b->b, &v) && Divides(c, v, &q)) {
    *quotient = Bin(BinaryOp::kMul, b->a, IntLike(q, e));
    return true;
  }
  Expr qa, qb;
  if ((b->op == BinaryOp::kAdd || b->op == BinaryOp::kSub) && DivideExact(b->a, c, &qa) &&
      DivideExact(b->b, c, &qb)) {
    *quotient = Bin(b->op, qa, qb);
    return true;
  }
  return false;
}

BinaryOp SwapSides(BinaryOp op) {
  switch (op) {
    case BinaryOp::kLT:
      return BinaryOp::kGT;
    case BinaryOp::kLE:
      return BinaryOp::kGE;
    case BinaryOp::kGT:
      return BinaryOp::kLT;
    case BinaryOp::kGE:
      return BinaryOp::kLE;
    default:
      return op;  // commutative
  }
}

BinaryOp Negated(BinaryOp op) {
  switch (op) {
    case BinaryOp::kEQ:
      return BinaryOp::kNE;
    case BinaryOp::kNE:
      return BinaryOp::kEQ;
    case BinaryOp::kLT:
      return BinaryOp::kGE;
    case BinaryOp::kLE:
      return BinaryOp::kGT;
    case BinaryOp::kGT:
      return BinaryOp::kLE;
    default:
      return BinaryOp::kLT;  // kGE
  }
}

// Vector forms: broadcast op broadcast, and affine ramps.
Expr RewriteVector(const BinaryNode* n) {
  const loop::BroadcastNode* ba = loop::AsBroadcast(n->a);
  const loop::BroadcastNode* bb = loop::AsBroadcast(n->b);
  if (ba && bb) return loop::Broadcast(Bin(n->op, ba->value, bb->value), n->lanes);
  const loop::RampNode* ra = loop::AsRamp(n->a);
  const loop::RampNode* rb = loop::AsRamp(n->b);
  int64_t s, c;
  switch (n->op) {
    case BinaryOp::kAdd:
      if (ra && bb)
        return loop::Ramp(Bin(BinaryOp::kAdd, ra->base, bb->value), ra->stride, n->lanes);
      if (ba && rb)
        return loop::Ramp(Bin(BinaryOp::kAdd, rb->base, ba->value), rb->stride, n->lanes);
      if (ra && rb && !__builtin_add_overflow(ra->stride, rb->stride, &s))
        return Rewrite(loop::Ramp(Bin(BinaryOp::kAdd, ra->base, rb->base), s, n->lanes));
      break;
    case BinaryOp::kSub:
      if (ra && bb)
        return loop::Ramp(Bin(BinaryOp::kSub, ra->base, bb->value), ra->stride, n->lanes);
      break;
    case BinaryOp::kMul:
      if (ra && bb && loop::IsConstInt(bb->value, &c) && !__builtin_mul_overflow(ra->stride, c, &s))
        return Rewrite(loop::Ramp(Bin(BinaryOp::kMul, ra->base, bb->value), s, n->lanes));
      if (ba && rb && loop::IsConstInt(ba->value, &c) && !__builtin_mul_overflow(rb->stride, c, &s))
        return Rewrite(loop::Ramp(Bin(BinaryOp::kMul, rb->base, ba->value), s, n->lanes));
      break;
    default:
      break;
  }
  return nullptr;
}

Expr RewriteFloatBinary(const BinaryNode* n, const Expr& e) {
  const Expr& a = n->a;
  const Expr& b = n->b;
  double c;
  bool bc = FloatConst(b, &c);
  switch (n->op) {
    case BinaryOp::kAdd:  // only -0.0 is an additive identity for every x
      if (bc && c == 0 && std::signbit(c)) return a;
      if (FloatConst(a, &c) && c == 0 && std::signbit(c)) return b;
      break;
    case BinaryOp::kSub:
      if (bc && c == 0 && !std::signbit(c)) return a;
      break;
    case BinaryOp::kMul:
      if (bc && c == 1) return a;
      if (FloatConst(a, &c) && c == 1) return b;
      break;
    case BinaryOp::kDiv:
      if (bc && c == 1) return a;
      break;
    case BinaryOp::kMin:
    case BinaryOp::kMax:
      if (Same(a, b)) return a;
      break;
    default:
      // Comparisons: the constant goes right; `c < x` and `x > c` agree even for NaN.
      if (loop::IsComparison(n->op) && IsConst(a) && !IsConst(b))
        return Bin(SwapSides(n->op), b, a);
      break;
  }
  return e;
}

Expr RewriteIntAdd(const BinaryNode* n, const Expr& e) {
  const Expr& a = n->a;
  const Expr& b = n->b;
  SumParts pa = SplitSum(a), pb = SplitSum(b);
  if (!pb.rest) {  // a + c: fold into a's constant, in canonical form
    Expr sum = MakeSum(pa.rest, WrapAdd(pa.c, pb.c), e);
    return Same(sum, e) ? e : sum;
  }
  if (!pa.rest) return Bin(BinaryOp::kAdd, b, a);
  if (pa.c != 0 || pb.c != 0)
    return AddConst(Bin(BinaryOp::kAdd, pa.rest, pb.rest), WrapAdd(pa.c, pb.c));
  // (x - y) + y -> x, y + (x - y) -> x
  const BinaryNode* sa = loop::AsBinary(a);
  if (sa && sa->op == BinaryOp::kSub && Same(sa->b, b)) return sa->a;
  const BinaryNode* sb = loop::AsBinary(b);
  if (sb && sb->op == BinaryOp::kSub && Same(sb->b, a)) return sb->a;
  return e;
}

Expr RewriteIntSub(const BinaryNode* n, const Expr& e) {
  const Expr& a = n->a;
  const Expr& b = n->b;
  if (Same(a, b)) return IntLike(0, e);
  SumParts pa = SplitSum(a), pb = SplitSum(b);
  if (!pb.rest) {  // a - c: as a + (-c), in canonical form
    Expr sum = MakeSum(pa.rest, WrapSub(pa.c, pb.c), e);
    return Same(sum, e) ? e : sum;
  }
  if (!pa.rest) {  // c1 - (x + c2) -> (c1 - c2) - x
    if (pb.c == 0) return e;
    return Bin(BinaryOp::kSub, IntLike(WrapSub(pa.c, pb.c), e), pb.rest);
  }
  if (pa.c != 0 || pb.c != 0)
    return AddConst(Bin(BinaryOp::kSub, pa.rest, pb.rest), WrapSub(pa.c, pb.c));
  // (x + y) - y -> x, (x + y) - x -> y
  if (const BinaryNode* sa = loop::AsBinary(a); sa && sa->op == BinaryOp::kAdd) {
    if (Same(sa->b, b)) return sa->a;
    if (Same(sa->a, b)) return sa->b;
  }
  return e;
}

Expr RewriteIntMul(const BinaryNode* n, const Expr& e) {
  const Expr& a = n->a;
  const Expr& b = n->b;
  int64_t c, c1;
  if (IntConst(a, &c) && !IsConst(b)) return Bin(BinaryOp::kMul, b, a);
  const BinaryNode* ma = loop::AsBinary(a);
  bool a_scaled = ma && ma->op == BinaryOp::kMul && IntConst(ma->b, &c1);
  if (IntConst(b, &c)) {
    if (c == 0) return IntLike(0, e);
    if (c == 1) return a;
    if (a_scaled) return Bin(BinaryOp::kMul, ma->a, IntLike(WrapMul(c1, c), e));
    SumParts pa = SplitSum(a);
    if (pa.c != 0) return AddConst(Bin(BinaryOp::kMul, pa.rest, b), WrapMul(pa.c, c));
    return e;
  }
  if (a_scaled) return Bin(BinaryOp::kMul, Bin(BinaryOp::kMul, ma->a, b), ma->b);
  const BinaryNode* mb = loop::AsBinary(b);
  if (mb && mb->op == BinaryOp::kMul && IntConst(mb->b, &c1))
    return Bin(BinaryOp::kMul, Bin(BinaryOp::kMul, a, mb->a), mb->b);
  return e;
}

// //, % and / by a constant.
Expr RewriteIntDivision(const BinaryNode* n, const Expr& e) {
  const Expr& a = n->a;
  int64_t c;
  if (!IntConst(n->b, &c) || c == 0) return e;
  bool div = n->op != BinaryOp::kFloorMod;
  if (c == 1) return div ? a : IntLike(0, e);
  const BinaryNode* ba = loop::AsBinary(a);
  int64_t c1;
  bool a_mod = ba && ba->op == BinaryOp::kFloorMod && IntConst(ba->b, &c1) && c1 != 0;
  if (n->op != BinaryOp::kDiv && a_mod) {
    if (c1 > 0 && c > 0 && c1 <= c) return div ? IntLike(0, e) : a;  // a lies in [0, c1)
    int64_t q;
    if (!div && Divides(c, c1, &q)) return Bin(BinaryOp::kFloorMod, ba->a, n->b);
  }
  if (e->dtype != DType::kInt64) return e;  // the rules below assume no overflow
  Expr q;
  if (DivideExact(a, c, &q)) return div ? q : IntLike(0, e);
  if (n->op == BinaryOp::kDiv) return e;  // truncation does not distribute over sums
  int64_t prod;
  if (div && ba && ba->op == BinaryOp::kFloorDiv && IntConst(ba->b, &c1) && c1 > 0 && c > 0 &&
      !__builtin_mul_overflow(c1, c, &prod))
    return Bin(BinaryOp::kFloorDiv, ba->a, IntLike(prod, e));
  if (ba && (ba->op == BinaryOp::kAdd || ba->op == BinaryOp::kSub)) {
    Expr qa, qb;
    bool a_exact = ba->op == BinaryOp::kAdd && DivideExact(ba->a, c, &qa);
    bool b_exact = !a_exact && DivideExact(ba->b, c, &qb);
    if (a_exact) {  // (m + b) // c -> m/c + b // c; (m + b) % c -> b % c
      Expr rest = Bin(n->op, ba->b, n->b);
      return div ? Bin(BinaryOp::kAdd, qa, rest) : rest;
    }
    if (b_exact) {  // (a ± m) // c -> a // c ± m/c; (a ± m) % c -> a % c
      Expr rest = Bin(n->op, ba->a, n->b);
      return div ? Bin(ba->op, rest, qb) : rest;
    }
  }
  // (a + k) // c -> (a + k % c) // c + k // c for k >= c > 0 (and %): the constant shrinks below
  // the divisor. Not for k < 0, where it would turn `x - 1` into `x + 15`.
  SumParts pa = SplitSum(a);
  if (pa.rest && c > 0 && pa.c >= c) {
    Expr reduced = Bin(n->op, AddConst(pa.rest, pa.c % c), n->b);
    return div ? AddConst(reduced, pa.c / c) : reduced;
  }
  return e;
}

Expr RewriteIntMinMax(const BinaryNode* n, const Expr& e) {
  const Expr& a = n->a;
  const Expr& b = n->b;
  if (Same(a, b)) return a;
  if (IsConst(a) && !IsConst(b)) return Bin(n->op, b, a);
  int64_t c, c1, r;
  const BinaryNode* ba = loop::AsBinary(a);
  if (IntConst(b, &c) && ba && ba->op == n->op && IntConst(ba->b, &c1)) {
    loop::FoldIntBinary(n->op, c1, c, e->dtype, &r);
    return Bin(n->op, ba->a, IntLike(r, e));
  }
  // The range of a modulo: max(x % c1, c) -> x % c1 for c <= 0, min(x % c1, c) -> x % c1 for
  // c >= c1 - 1 (c1 > 0). TileLoops writes a tail's extent as max(n % 64, 0).
  if (const BinaryNode* m = loop::AsBinary(a);
      IntConst(b, &c) && m && m->op == BinaryOp::kFloorMod && IntConst(m->b, &c1) && c1 > 0 &&
      (n->op == BinaryOp::kMax ? c <= 0 : c >= c1 - 1))
    return a;
  if (e->dtype == DType::kInt64) {  // min(x + c1, x + c2) -> x + min(c1, c2)
    SumParts pa = SplitSum(a), pb = SplitSum(b);
    if (pa.rest && pb.rest && Same(pa.rest, pb.rest)) {
      loop::FoldIntBinary(n->op, pa.c, pb.c, e->dtype, &r);
      return AddConst(pa.rest, r);
    }
  }
  return e;
}

Expr RewriteIntCompare(const BinaryNode* n, const Expr& e) {
  const Expr& a = n->a;
  const Expr& b = n->b;
  BinaryOp op = n->op;
  if (IsConst(a) && !IsConst(b)) return Bin(SwapSides(op), b, a);
  if (Same(a, b))
    return BoolLike(op == BinaryOp::kEQ || op == BinaryOp::kLE || op == BinaryOp::kGE, e);
  if (a->dtype != DType::kInt64) return e;  // the rules below assume no overflow
  SumParts pa = SplitSum(a), pb = SplitSum(b);
  int64_t diff;
  if (pa.c != 0 && !pb.rest && !__builtin_sub_overflow(pb.c, pa.c, &diff))
    return Bin(op, pa.rest, IntLike(diff, a));  // (x + c1) < c2 -> x < c2 - c1
  if (pa.rest && pb.rest && Same(pa.rest, pb.rest))
    return Bin(op, IntLike(pa.c, a), IntLike(pb.c, a));  // (x + c1) < (x + c2) -> c1 < c2
  return e;
}

Expr RewriteLogic(const BinaryNode* n, const Expr& e) {
  const Expr& a = n->a;
  const Expr& b = n->b;
  if (IsConst(a) && !IsConst(b)) return Bin(n->op, b, a);
  if (Same(a, b)) return a;
  int64_t c;
  if (!IntConst(b, &c)) return e;
  bool is_and = n->op == BinaryOp::kAnd;
  // x && true -> x, x && false -> false, x || true -> true, x || false -> x
  if ((c != 0) == is_and) return a;
  return b;
}

Expr RewriteBinary(const BinaryNode* n, const Expr& e) {
  if (Expr folded = FoldConstants(n->op, n->a, n->b)) return folded;
  if (n->lanes > 1) {
    if (Expr v = RewriteVector(n)) return v;
  }
  DType t = n->a->dtype;
  if (IsFloat(t)) return RewriteFloatBinary(n, e);
  if (n->op == BinaryOp::kAnd || n->op == BinaryOp::kOr) return RewriteLogic(n, e);
  if (loop::IsComparison(n->op)) {
    if (IsIntLike(t)) return RewriteIntCompare(n, e);
    return e;
  }
  if (!IsInteger(t)) return e;
  switch (n->op) {
    case BinaryOp::kAdd:
      return RewriteIntAdd(n, e);
    case BinaryOp::kSub:
      return RewriteIntSub(n, e);
    case BinaryOp::kMul:
      return RewriteIntMul(n, e);
    case BinaryOp::kDiv:
    case BinaryOp::kFloorDiv:
    case BinaryOp::kFloorMod:
      return RewriteIntDivision(n, e);
    case BinaryOp::kMin:
    case BinaryOp::kMax:
      return RewriteIntMinMax(n, e);
    default:
      return e;
  }
}

Expr RewriteNot(const loop::NotNode* n, const Expr& e) {
  int64_t c;
  if (IntConst(n->a, &c)) return BoolLike(c == 0, e);
  if (const loop::NotNode* inner = loop::AsNot(n->a)) return inner->a;
  const BinaryNode* cmp = loop::AsBinary(n->a);
  if (cmp && loop::IsComparison(cmp->op) && IsIntLike(cmp->a->dtype))
    return Bin(Negated(cmp->op), cmp->a, cmp->b);
  return e;
}

Expr RewriteSelect(const loop::SelectNode* n, const Expr& e) {
  int64_t c;
  if (IntConst(n->cond, &c)) return c ? n->true_value : n->false_value;
  if (Same(n->true_value, n->false_value)) return n->true_value;
  int64_t t, f;
  if (e->dtype == DType::kBool && n->cond->lanes == e->lanes && IntConst(n->true_value, &t) &&
      IntConst(n->false_value, &f)) {
    if (t && !f) return n->cond;
    if (!t && f) return Rewrite(loop::Not(n->cond));
  }
  return e;
}

Expr RewriteCast(const loop::CastNode* n, const Expr& e) {
  if (Expr folded = FoldCast(n->dtype, n->value)) return folded;
  const loop::CastNode* inner = loop::AsCast(n->value);
  if (inner && Lossless(inner->value->dtype, inner->dtype))
    return Rewrite(loop::Cast(n->dtype, inner->value));
  return e;
}

Expr Rewrite(const Expr& e) {
  if (!e) return e;
  switch (e->kind) {
    case loop::ExprKind::kBinary:
      return RewriteBinary(loop::AsBinary(e), e);
    case loop::ExprKind::kNot:
      return RewriteNot(loop::AsNot(e), e);
    case loop::ExprKind::kSelect:
      return RewriteSelect(loop::AsSelect(e), e);
    case loop::ExprKind::kCast:
      return RewriteCast(loop::AsCast(e), e);
    case loop::ExprKind::kRamp: {
      const loop::RampNode* r = loop::AsRamp(e);
      return r->stride == 0 ? loop::Broadcast(r->base, r->lanes) : e;
    }
    default:
      return e;
  }
}

}  // namespace

loop::Expr loop::SimplifyExpr(const loop::Expr& e) {
  struct PostOrder : loop::Mutator {
    Expr MutateExpr(const Expr& x) override { return Rewrite(loop::Mutator::MutateExpr(x)); }
  };
  return PostOrder().MutateExpr(e);
}

void RegisterLoopSimplifyPass(PassRegistry& r) {
  r.Register(PassRegistration{
      .name = "LoopSimplify",
      .opt_level = 0,
      .required = {},
      .options = {},
      .doc = "fold constants and canonicalize index arithmetic in loop kernels",
      .create =
          [](const Attrs& o) {
            return CreateLoopExprPass(
                PassInfo{"LoopSimplify", 0, {}},
                [](const loop::Expr& e, const PassContext&) { return Rewrite(e); }, o);
          },
  });
}

}  // namespace kiln
