// Reductions: sum, mean, max, min, prod, l2, log_sum, log_sum_exp, sum_square, l1 over a set of
// axes, and argmax/argmin over one.
//
// Semantics follow ONNX (ReduceSum with `axes` as an attribute, ArgMax):
// - `axes` empty means every axis, unless `noop_with_empty_axes`, which makes the op identity.
// - Reducing over an empty set gives the reduction's identity: sum 0, prod 1, max -inf (or the
//   lowest integer), min +inf (or the highest integer), l2 0; mean is 0/0 = NaN.
// - Integer sum and prod wrap around (two's complement), as a fixed-width accumulator does.
// - max/min propagate NaN: a NaN anywhere in the reduced set gives NaN.
// - argmax/argmin treat NaN as the extreme value (as NumPy does): the first NaN wins, or the
//   last with `select_last_index`. Taking argmax over an empty axis is an error.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "ir/ops/op_util.h"

namespace kiln {
namespace {

bool IsFloatOrInt(DType t) {
  return IsFloat(t) || IsInteger(t);
}

void RequireDType(TypeRelContext& ctx, const TensorTypeNode& x, bool floats_only) {
  bool ok = floats_only ? IsFloat(x.dtype) : IsFloatOrInt(x.dtype);
  if (!ok)
    ctx.Fail(StrCat("expects a ", floats_only ? "float" : "float or integer", " tensor, got ",
                    TypeToString(TensorType(x.shape, x.dtype))));
}

// Which input axes are reduced; an empty result with `identity` set means the op is a copy.
struct ReducePlan {
  std::vector<bool> reduced;
  bool identity = false;
};

ReducePlan PlanFromAttrs(const Attrs& attrs, int rank) {
  ReducePlan plan;
  const std::vector<int64_t>& axes = attrs.GetInts("axes");
  plan.reduced.assign(rank, axes.empty());
  if (axes.empty() && attrs.GetBool("noop_with_empty_axes")) {
    plan.reduced.assign(rank, false);
    plan.identity = true;
  }
  for (int64_t a : axes) plan.reduced[ops::WrapAxis(a, rank)] = true;
  return plan;
}

Type ReduceRel(TypeRelContext& ctx, bool floats_only) {
  const TensorTypeNode& x = ctx.tensor(0);
  RequireDType(ctx, x, floats_only);
  const std::vector<int64_t>& axes = ctx.attrs().GetInts("axes");
  if (axes.empty() && ctx.attrs().GetBool("noop_with_empty_axes")) return ctx.arg(0);
  ops::NormalizeAxes(ctx, axes, x.ndim());  // checks range and repeats
  ReducePlan plan = PlanFromAttrs(ctx.attrs(), x.ndim());
  bool keepdims = ctx.attrs().GetBool("keepdims");
  Shape out;
  for (int i = 0; i < x.ndim(); ++i) {
    if (!plan.reduced[i])
      out.push_back(x.shape[i]);
    else if (keepdims)
      out.push_back(Dim(1));
  }
  return TensorType(out, x.dtype);
}

// Accumulates every input element into the output element it reduces into, starting each
// accumulator at `init`. With keepdims or without, the output's row-major layout is that of
// the kept dims, so one stride table serves both.
template <typename T, typename Acc, typename Step>
std::vector<Acc> Accumulate(const Tensor& x, const std::vector<bool>& reduced, int64_t out_numel,
                            Acc init, Step step) {
  const std::vector<int64_t>& shape = x.shape();
  std::vector<int64_t> out_strides(shape.size(), 0);
  int64_t acc_stride = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    if (reduced[i]) continue;
    out_strides[i] = acc_stride;
    acc_stride *= shape[i];
  }
  std::vector<Acc> acc(out_numel, init);
  const T* data = x.data<T>();
  std::vector<int64_t> idx;
  for (int64_t i = 0; i < x.numel(); ++i) {
    ops::Unravel(i, shape, idx);
    int64_t o = 0;
    for (size_t d = 0; d < shape.size(); ++d) o += idx[d] * out_strides[d];
    acc[o] = step(acc[o], data[i]);
  }
  return acc;
}

int64_t ReducedCount(const Tensor& x, const std::vector<bool>& reduced) {
  int64_t n = 1;
  for (int i = 0; i < x.ndim(); ++i)
    if (reduced[i]) n *= x.shape()[i];
  return n;
}

// Integers accumulate in uint64_t, whose arithmetic wraps without undefined behaviour and
// truncates to the same bits as a wrapping T would hold; floats accumulate in double.
template <typename T>
using WideT = std::conditional_t<std::is_integral_v<T>, uint64_t, double>;

template <typename T, typename V>
T StoreAs(V v) {
  return static_cast<T>(static_cast<ops::ComputeT<T>>(v));
}

enum class ReduceKind { kSum, kMean, kMax, kMin, kProd, kL2, kLogSum, kLogSumExp, kSumSquare, kL1 };

bool TransformsElements(ReduceKind k) {
  return k == ReduceKind::kLogSum || k == ReduceKind::kLogSumExp || k == ReduceKind::kSumSquare ||
         k == ReduceKind::kL1;
}

template <typename T>
void ReduceTyped(ReduceKind kind, const Tensor& x, const ReducePlan& plan, Tensor& out) {
  using W = WideT<T>;
  using C = ops::ComputeT<T>;
  int64_t n = out.numel();
  T* y = out.data<T>();
  auto write = [&](const auto& acc, auto finish) {
    for (int64_t i = 0; i < n; ++i) y[i] = StoreAs<T>(finish(acc[i]));
  };
  auto same = [](auto v) { return v; };
  switch (kind) {
    case ReduceKind::kSum:
    case ReduceKind::kMean: {
      auto acc = Accumulate<T>(x, plan.reduced, n, W{0},
                               [](W a, T v) { return a + static_cast<W>(static_cast<C>(v)); });
      if (kind == ReduceKind::kSum) return write(acc, same);
      double count = static_cast<double>(ReducedCount(x, plan.reduced));
      return write(acc, [&](W a) { return static_cast<double>(a) / count; });
    }
    case ReduceKind::kProd: {
      auto acc = Accumulate<T>(x, plan.reduced, n, W{1},
                               [](W a, T v) { return a * static_cast<W>(static_cast<C>(v)); });
      return write(acc, same);
    }
    case ReduceKind::kL2: {
      auto acc = Accumulate<T>(x, plan.reduced, n, 0.0, [](double a, T v) {
        double d = static_cast<double>(static_cast<C>(v));
        return a + d * d;
      });
      return write(acc, [](double a) { return std::sqrt(a); });
    }
    case ReduceKind::kLogSum: {
      auto acc = Accumulate<T>(x, plan.reduced, n, 0.0, [](double a, T v) {
        return a + static_cast<double>(static_cast<C>(v));
      });
      return write(acc, [](double a) { return std::log(a); });
    }
    case ReduceKind::kLogSumExp: {
      // Shifted by the set's maximum so that exp cannot overflow; a non-finite maximum
      // (inf, -inf for an empty or all -inf set, NaN) is not subtracted, since inf - inf is NaN.
      auto m = Accumulate<T>(
          x, plan.reduced, n, -std::numeric_limits<double>::infinity(), [](double a, T t) {
            double v = static_cast<double>(static_cast<C>(t));
            return std::isnan(a) || std::isnan(v) ? std::nan("") : std::max(a, v);
          });
      for (double& v : m)
        if (!std::isfinite(v)) v = 0;
      std::vector<double> acc(n, 0.0);
      const std::vector<int64_t>& shape = x.shape();
      std::vector<int64_t> out_strides(shape.size(), 0);
      int64_t stride = 1;
      for (size_t i = shape.size(); i-- > 0;) {
        if (plan.reduced[i]) continue;
        out_strides[i] = stride;
        stride *= shape[i];
      }
      const T* data = x.data<T>();
      std::vector<int64_t> idx;
      for (int64_t i = 0; i < x.numel(); ++i) {
        ops::Unravel(i, shape, idx);
        int64_t o = 0;
        for (size_t d = 0; d < shape.size(); ++d) o += idx[d] * out_strides[d];
        acc[o] += std::exp(static_cast<double>(static_cast<C>(data[i])) - m[o]);
      }
      for (int64_t i = 0; i < n; ++i) y[i] = StoreAs<T>(std::log(acc[i]) + m[i]);
      return;
    }
    case ReduceKind::kSumSquare:
    case ReduceKind::kL1: {
      bool square = kind == ReduceKind::kSumSquare;
      if constexpr (std::is_integral_v<T>) {
        // Wrapping, as sum: |MIN| is 2^(n-1), whose low n bits are MIN again.
        auto acc = Accumulate<T>(x, plan.reduced, n, W{0}, [square](W a, T t) {
          W v = static_cast<W>(t);
          if (square) return a + v * v;
          if constexpr (std::is_signed_v<T>) {
            if (t < T{0}) return a + (W{0} - v);
          }
          return a + v;
        });
        return write(acc, same);
      } else {
        auto acc = Accumulate<T>(x, plan.reduced, n, 0.0, [square](double a, T t) {
          double d = static_cast<double>(static_cast<C>(t));
          return a + (square ? d * d : std::fabs(d));
        });
        return write(acc, same);
      }
    }
    case ReduceKind::kMax:
    case ReduceKind::kMin: {
      bool is_max = kind == ReduceKind::kMax;
      C init;
      if constexpr (std::is_floating_point_v<C>) {
        init = is_max ? -std::numeric_limits<C>::infinity() : std::numeric_limits<C>::infinity();
      } else {
        init = is_max ? std::numeric_limits<C>::lowest() : std::numeric_limits<C>::max();
      }
      auto acc = Accumulate<T>(x, plan.reduced, n, init, [is_max](C a, T t) {
        C v = static_cast<C>(t);
        if constexpr (std::is_floating_point_v<C>) {
          if (std::isnan(a)) return a;
          if (std::isnan(v)) return v;
        }
        return is_max ? (v > a ? v : a) : (v < a ? v : a);
      });
      return write(acc, same);
    }
  }
}

void ReduceKernel(ReduceKind kind, const std::vector<Tensor>& in, const Attrs& attrs,
                  std::vector<Tensor>& out) {
  const Tensor& x = in[0];
  ReducePlan plan = PlanFromAttrs(attrs, x.ndim());
  // The ops that transform each element reduce sets of one element instead of copying:
  // log_sum(x) over no axes is log(x), l1 is |x|, sum_square x^2, log_sum_exp x.
  if (plan.identity && !TransformsElements(kind)) {
    ops::CopyElements(x, 0, out[0], 0, x.numel());
    return;
  }
  DispatchDType(x.dtype(), [&]<typename T>() {
    if constexpr (std::is_same_v<T, bool>) {
      KILN_CHECK(false, "reduction on bool should have been rejected by the type relation");
    } else {
      ReduceTyped<T>(kind, x, plan, out[0]);
    }
  });
}

// argmax/argmin.

Type ArgRel(TypeRelContext& ctx, const char* name) {
  const TensorTypeNode& x = ctx.tensor(0);
  RequireDType(ctx, x, /*floats_only=*/false);
  int rank = x.ndim();
  if (rank == 0) {
    ctx.NormalizeAxis(ctx.attrs().GetInt("axis"), rank);
    return TensorType({}, DType::kInt64);
  }
  int axis = ctx.NormalizeAxis(ctx.attrs().GetInt("axis"), rank);
  const Dim& d = x.shape[axis];
  if (d.is_const() && d.value() == 0)
    ctx.Fail(StrCat("cannot take ", name, " over the empty axis ", axis, " of ",
                    ShapeToString(x.shape)));
  ctx.AssertAtMost(Dim(1), d, StrCat("the length of axis ", axis, " (", name, " needs one)"));
  bool keepdims = ctx.attrs().GetBool("keepdims");
  Shape out;
  for (int i = 0; i < rank; ++i) {
    if (i != axis)
      out.push_back(x.shape[i]);
    else if (keepdims)
      out.push_back(Dim(1));
  }
  return TensorType(out, DType::kInt64);
}

// True when `v` should replace `best` as the extreme value seen so far.
template <typename C>
bool Replaces(C v, C best, bool is_max, bool last) {
  if constexpr (std::is_floating_point_v<C>) {
    if (std::isnan(best)) return last && std::isnan(v);
    if (std::isnan(v)) return true;
  }
  if (v == best) return last;
  return is_max ? v > best : v < best;
}

void ArgKernel(bool is_max, const char* name, const std::vector<Tensor>& in, const Attrs& attrs,
               std::vector<Tensor>& out) {
  const Tensor& x = in[0];
  int rank = x.ndim();
  int axis = rank == 0 ? 0 : ops::WrapAxis(attrs.GetInt("axis"), rank);
  // Plain variables, not structured bindings: clang before 16 cannot capture those in a lambda.
  ops::AxisSplit split = ops::SplitAtAxis(x.shape(), axis);
  int64_t outer = split.outer, n = split.len, inner = split.inner;
  int64_t* y = out[0].data<int64_t>();
  if (outer * inner == 0) return;
  if (n == 0)
    Throw(ErrorCode::kInvalidArgument, name, ": cannot take it over the empty axis ", axis, " of ",
          IntsToString(x.shape()));
  bool last = attrs.GetBool("select_last_index");
  DispatchDType(x.dtype(), [&]<typename T>() {
    using C = ops::ComputeT<T>;
    const T* data = x.data<T>();
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < inner; ++i) {
        const T* row = data + o * n * inner + i;
        int64_t best_k = 0;
        C best = static_cast<C>(row[0]);
        for (int64_t k = 1; k < n; ++k) {
          C v = static_cast<C>(row[k * inner]);
          if (Replaces(v, best, is_max, last)) {
            best = v;
            best_k = k;
          }
        }
        y[o * inner + i] = best_k;
      }
    }
  });
}

// ---- Lowering ----
//
// Float sum, mean, prod and l2 accumulate in f64 as the reference does; each accumulator sees
// the elements in the reference's order (the reduced axes nested outermost first), so generated
// kernels match it bit for bit. max and min are exact in the input type. Integer sum and prod
// wrap in their own width, which leaves the bits the reference's 64-bit accumulator truncates to.

loop::Expr ToF64(const loop::Expr& e) {
  return loop::Cast(DType::kFloat64, e);
}

// `r` (whose elements may be of another dtype, e.g. an f64 accumulator) with `finish` applied to
// each element and the result cast to `t`.
LTensor FinishAs(const LTensor& r, DType t, std::function<loop::Expr(const loop::Expr&)> finish) {
  return LTensor{t, r.shape, [r, t, finish](const std::vector<loop::Expr>& idx) {
                   loop::Expr v = r.at(idx);
                   return loop::Cast(t, finish ? finish(v) : v);
                 }};
}

// A reduction over no axes (noop_with_empty_axes): each element alone, in f64 for floats as
// the reference computes it.
LTensor LowerElementwiseReduce(ReduceKind kind, const LTensor& x) {
  DType t = x.dtype;
  bool wide = IsFloat(t);
  return LTensor{t, x.shape, [x, t, kind, wide](const std::vector<loop::Expr>& idx) {
                   loop::Expr v = wide ? ToF64(x.at(idx)) : x.at(idx);
                   loop::Expr r = v;
                   if (kind == ReduceKind::kLogSum) r = loop::Call(loop::Intrinsic::kLog, {v});
                   if (kind == ReduceKind::kSumSquare) r = loop::Mul(v, v);
                   if (kind == ReduceKind::kL1) r = loop::Call(loop::Intrinsic::kFabs, {v});
                   // log_sum_exp of one element is the element (inf and NaN included).
                   return loop::Cast(t, r);
                 }};
}

// log(sum(exp(x - m))) + m with m the set's maximum (materialized, read at each element's row),
// replaced by 0 where it is not finite, exactly as the reference; all in f64.
LTensor LowerLogSumExp(LowerContext& ctx, const LTensor& x, const std::vector<int>& axes,
                       bool keepdims) {
  LTensor max = lower::ReduceAxes(ctx, x, axes, /*keepdims=*/true, loop::ReduceKind::kMax);
  LTensor shift_src{DType::kFloat64, max.shape, [max](const std::vector<loop::Expr>& idx) {
                      loop::Expr m = ToF64(max.at(idx));
                      // m - m is 0 exactly when m is finite.
                      loop::Expr finite = loop::MakeBinary(loop::BinaryOp::kEQ, loop::Sub(m, m),
                                                           lower::Const(0, DType::kFloat64));
                      return loop::Select(finite, m, lower::Const(0, DType::kFloat64));
                    }};
  LTensor shift = ctx.Materialize(shift_src, "log_sum_exp_shift");
  auto row_of = [axes](std::vector<loop::Expr> idx) {
    for (int a : axes) idx[a] = loop::IntImm(0);
    return idx;
  };
  LTensor terms{DType::kFloat64, x.shape, [x, shift, row_of](const std::vector<loop::Expr>& idx) {
                  loop::Expr d = loop::Sub(ToF64(x.at(idx)), shift.at(row_of(idx)));
                  return loop::Call(loop::Intrinsic::kExp, {d});
                }};
  LTensor sum = lower::ReduceAxes(ctx, terms, axes, keepdims, loop::ReduceKind::kSum);
  int rank = x.ndim();
  DType t = x.dtype;
  return LTensor{
      t, sum.shape, [sum, shift, axes, keepdims, rank, t](const std::vector<loop::Expr>& idx) {
        // The output index as an index of the keepdims-shaped shift.
        std::vector<loop::Expr> row;
        if (keepdims) {
          row = idx;
        } else {
          size_t k = 0;
          for (int i = 0; i < rank; ++i) {
            bool reduced = std::find(axes.begin(), axes.end(), i) != axes.end();
            row.push_back(reduced ? loop::IntImm(0) : idx[k++]);
          }
        }
        loop::Expr r = loop::Add(loop::Call(loop::Intrinsic::kLog, {sum.at(idx)}), shift.at(row));
        return loop::Cast(t, r);
      }};
}

std::vector<LTensor> LowerReduce(ReduceKind kind, LowerContext& ctx, const std::vector<LTensor>& in,
                                 const Attrs& attrs) {
  const LTensor& x = in[0];
  ReducePlan plan = PlanFromAttrs(attrs, x.ndim());
  if (plan.identity && !TransformsElements(kind)) return {x};
  if (plan.identity) return {LowerElementwiseReduce(kind, x)};
  std::vector<int> axes;
  loop::Expr count = loop::IntImm(1);  // elements per reduced set, for mean
  for (int i = 0; i < x.ndim(); ++i) {
    if (!plan.reduced[i]) continue;
    axes.push_back(i);
    count = loop::Mul(count, x.shape[i]);
  }
  bool keepdims = attrs.GetBool("keepdims");
  DType t = x.dtype;
  bool wide = IsFloat(t);
  auto reduce = [&](loop::ReduceKind k, std::function<loop::Expr(const loop::Expr&)> source) {
    return lower::ReduceAxes(ctx, x, axes, keepdims, k, std::move(source));
  };
  switch (kind) {
    case ReduceKind::kSum:
    case ReduceKind::kProd: {
      loop::ReduceKind k =
          kind == ReduceKind::kSum ? loop::ReduceKind::kSum : loop::ReduceKind::kProd;
      if (!wide) return {reduce(k, nullptr)};
      return {FinishAs(reduce(k, ToF64), t, nullptr)};
    }
    case ReduceKind::kMean:
      // An empty reduced set gives 0 / 0 = NaN, as in the reference.
      return {FinishAs(reduce(loop::ReduceKind::kSum, ToF64), t,
                       [count](const loop::Expr& s) { return loop::Div(s, ToF64(count)); })};
    case ReduceKind::kL2: {
      auto square = [](const loop::Expr& e) {
        loop::Expr d = ToF64(e);
        return loop::Mul(d, d);
      };
      return {FinishAs(reduce(loop::ReduceKind::kSum, square), t, [](const loop::Expr& s) {
        return loop::Call(loop::Intrinsic::kSqrt, {s});
      })};
    }
    case ReduceKind::kLogSum:
      return {FinishAs(reduce(loop::ReduceKind::kSum, ToF64), t,
                       [](const loop::Expr& s) { return loop::Call(loop::Intrinsic::kLog, {s}); })};
    case ReduceKind::kLogSumExp:
      return {LowerLogSumExp(ctx, x, axes, keepdims)};
    case ReduceKind::kSumSquare:
    case ReduceKind::kL1: {
      bool square = kind == ReduceKind::kSumSquare;
      auto term = [square, wide](const loop::Expr& e) {
        loop::Expr v = wide ? ToF64(e) : e;
        return square ? loop::Mul(v, v) : loop::Call(loop::Intrinsic::kFabs, {v});
      };
      if (!wide) return {reduce(loop::ReduceKind::kSum, term)};
      return {FinishAs(reduce(loop::ReduceKind::kSum, term), t, nullptr)};
    }
    case ReduceKind::kMax:
      // The code generators' float max propagates NaN, as the reference does.
      return {reduce(loop::ReduceKind::kMax, nullptr)};
    case ReduceKind::kMin:
      return {reduce(loop::ReduceKind::kMin, nullptr)};
  }
  KILN_CHECK(false, "unknown reduction");
  return {};
}

// argmax/argmin in two passes, because loop::Reduce combines values and carries no index:
// first the extreme value of each row, materialized (NaN when the row holds a NaN, since max and
// min propagate it); then the smallest index holding it (the largest with select_last_index).
// Where the extreme is NaN, the indices holding it are those of the NaNs, so the first (last) NaN
// wins, as in the reference; -0 and +0 compare equal there as well.
//
// A row of length 0 only reaches a shape-generic kernel whose axis turns out empty at run time
// (the type relation rejects a constant 0): the reference throws, the kernel cannot, and it
// writes INT64_MAX (-1 with select_last_index), the identity of the index reduction.
std::vector<LTensor> LowerArg(bool is_max, LowerContext& ctx, const std::vector<LTensor>& in,
                              const Attrs& attrs) {
  const LTensor& x = in[0];
  int rank = x.ndim();
  if (rank == 0)
    return {
        LTensor{DType::kInt64, {}, [](const std::vector<loop::Expr>&) { return loop::IntImm(0); }}};
  int axis = ops::WrapAxis(attrs.GetInt("axis"), rank);
  bool last = attrs.GetBool("select_last_index");
  LTensor best =
      ctx.Materialize(lower::ReduceAxes(ctx, x, {axis}, /*keepdims=*/true,
                                        is_max ? loop::ReduceKind::kMax : loop::ReduceKind::kMin),
                      is_max ? "argmax_value" : "argmin_value");
  bool is_float = IsFloat(x.dtype);
  LTensor candidate{DType::kInt64, x.shape,
                    [x, best, axis, last, is_float](const std::vector<loop::Expr>& idx) {
                      std::vector<loop::Expr> row = idx;
                      row[axis] = loop::IntImm(0);
                      loop::Expr v = x.at(idx);
                      loop::Expr hit = loop::MakeBinary(loop::BinaryOp::kEQ, v, best.at(row));
                      if (is_float)
                        hit = loop::MakeBinary(loop::BinaryOp::kOr, hit,
                                               loop::MakeBinary(loop::BinaryOp::kNE, v, v));
                      int64_t miss = last ? -1 : std::numeric_limits<int64_t>::max();
                      return loop::Select(hit, idx[axis], loop::IntImm(miss));
                    }};
  return {lower::ReduceAxes(ctx, candidate, {axis}, attrs.GetBool("keepdims"),
                            last ? loop::ReduceKind::kMax : loop::ReduceKind::kMin)};
}

std::vector<AttrSpec> ReduceAttrs() {
  return {
      AttrSpec{"axes", AttrKind::kInts, AttrValue{std::vector<int64_t>{}}},
      AttrSpec{"keepdims", AttrKind::kBool, AttrValue{true}},
      AttrSpec{"noop_with_empty_axes", AttrKind::kBool, AttrValue{false}},
  };
}

std::vector<AttrSpec> ArgAttrs() {
  return {
      AttrSpec{"axis", AttrKind::kInt, AttrValue{int64_t{0}}},
      AttrSpec{"keepdims", AttrKind::kBool, AttrValue{true}},
      AttrSpec{"select_last_index", AttrKind::kBool, AttrValue{false}},
  };
}

void RegisterReduce(OpRegistry& r, const char* name, const char* doc, ReduceKind kind,
                    bool floats_only) {
  r.Register(OpDef{
      .name = name,
      .doc = doc,
      .min_inputs = 1,
      .max_inputs = 1,
      .attrs = ReduceAttrs(),
      .pattern = OpPattern::kReduction,
      .type_rel = [floats_only](TypeRelContext& ctx) { return ReduceRel(ctx, floats_only); },
      .ref_kernel = [kind](const std::vector<Tensor>& in, const Attrs& attrs,
                           std::vector<Tensor>& out) { ReduceKernel(kind, in, attrs, out); },
      .lower = [kind](LowerContext& ctx, const std::vector<LTensor>& in, const Attrs& attrs,
                      const std::vector<Type>&) { return LowerReduce(kind, ctx, in, attrs); },
  });
}

void RegisterArg(OpRegistry& r, const char* name, const char* doc, bool is_max) {
  r.Register(OpDef{
      .name = name,
      .doc = doc,
      .min_inputs = 1,
      .max_inputs = 1,
      .attrs = ArgAttrs(),
      .pattern = OpPattern::kReduction,
      .type_rel = [name](TypeRelContext& ctx) { return ArgRel(ctx, name); },
      .ref_kernel = [is_max, name](
                        const std::vector<Tensor>& in, const Attrs& attrs,
                        std::vector<Tensor>& out) { ArgKernel(is_max, name, in, attrs, out); },
      .lower = [is_max](LowerContext& ctx, const std::vector<LTensor>& in, const Attrs& attrs,
                        const std::vector<Type>&) { return LowerArg(is_max, ctx, in, attrs); },
  });
}

}  // namespace

void RegisterReduceOps(OpRegistry& r) {
  RegisterReduce(r, "sum", "Sum over `axes` (all when empty); floats and integers.",
                 ReduceKind::kSum, false);
  RegisterReduce(r, "mean", "Mean over `axes` (all when empty); floats.", ReduceKind::kMean, true);
  RegisterReduce(r, "max", "Maximum over `axes`, NaN-propagating; floats and integers.",
                 ReduceKind::kMax, false);
  RegisterReduce(r, "min", "Minimum over `axes`, NaN-propagating; floats and integers.",
                 ReduceKind::kMin, false);
  RegisterReduce(r, "prod", "Product over `axes` (all when empty); floats and integers.",
                 ReduceKind::kProd, false);
  RegisterReduce(r, "l2", "sqrt(sum(x * x)) over `axes` (all when empty); floats.", ReduceKind::kL2,
                 true);
  RegisterReduce(r, "log_sum", "log(sum(x)) over `axes` (all when empty); floats.",
                 ReduceKind::kLogSum, true);
  RegisterReduce(r, "log_sum_exp",
                 "log(sum(exp(x))) over `axes`, shifted by the maximum so exp cannot overflow; "
                 "floats.",
                 ReduceKind::kLogSumExp, true);
  RegisterReduce(r, "sum_square", "sum(x * x) over `axes`; floats and integers (wrapping).",
                 ReduceKind::kSumSquare, false);
  RegisterReduce(r, "l1", "sum(|x|) over `axes`; floats and integers (wrapping).", ReduceKind::kL1,
                 false);
  RegisterArg(r, "argmax", "Index (i64) of the largest value along `axis`; NaN counts largest.",
              true);
  RegisterArg(r, "argmin", "Index (i64) of the smallest value along `axis`; NaN counts smallest.",
              false);
}

}  // namespace kiln
