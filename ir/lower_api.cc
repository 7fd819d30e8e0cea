#include "ir/lower_api.h"

#include "ir/error.h"
#include "ir/loop/loop_text.h"

namespace kiln::lower {

loop::Expr Const(double v, DType t) {
  return loop::MakeConst(v, t);
}

std::vector<loop::Expr> BroadcastIndex(const LTensor& in,
                                       const std::vector<loop::Expr>& out_index) {
  return BroadcastIndex(in, out_index, {});
}

std::vector<loop::Expr> BroadcastIndex(const LTensor& in, const std::vector<loop::Expr>& out_index,
                                       const std::vector<loop::Expr>& out_shape) {
  size_t n = out_index.size(), r = in.shape.size();
  KILN_CHECK(r <= n, "broadcast of rank ", r, " to rank ", n);
  std::vector<loop::Expr> idx(r);
  for (size_t i = 0; i < r; ++i) {
    const loop::Expr& dim = in.shape[i];
    const loop::Expr& o = out_index[n - r + i];
    const size_t from_end = r - i;  // the output dim this one aligns with, counted from the end
    int64_t c;
    if (loop::IsConstInt(dim, &c)) {
      idx[i] = c == 1 ? loop::IntImm(0) : o;
    } else if (from_end <= out_shape.size() &&
               loop::StructuralEqual(dim, out_shape[out_shape.size() - from_end])) {
      idx[i] = o;
    } else {
      // Shape-generic kernels: the dim is only known at run time and may be 1.
      idx[i] = loop::Select(loop::MakeBinary(loop::BinaryOp::kEQ, dim, loop::IntImm(1)),
                            loop::IntImm(0), o);
    }
  }
  return idx;
}

LTensor Map(const LTensor& like, DType dtype,
            std::function<loop::Expr(const std::vector<loop::Expr>&)> at) {
  return LTensor{dtype, like.shape, std::move(at)};
}

LTensor ReduceAxes(LowerContext& ctx, const LTensor& in, const std::vector<int>& axes,
                   bool keepdims, loop::ReduceKind kind,
                   const std::function<loop::Expr(const loop::Expr&)>& source) {
  std::vector<bool> reduced(in.shape.size(), false);
  for (int a : axes) reduced.at(a) = true;
  std::vector<loop::Expr> out_shape;
  for (size_t i = 0; i < in.shape.size(); ++i) {
    if (!reduced[i]) {
      out_shape.push_back(in.shape[i]);
    } else if (keepdims) {
      out_shape.push_back(loop::IntImm(1));
    }
  }
  LTensor input = in;
  auto at = [&ctx, input, reduced, keepdims, kind, source](const std::vector<loop::Expr>& out_idx) {
    std::vector<loop::Expr> idx;
    std::vector<loop::IterVar> axes;
    size_t o = 0;
    for (size_t i = 0; i < input.shape.size(); ++i) {
      if (reduced[i]) {
        loop::Var k = ctx.NewVar("k");
        axes.push_back(loop::IterVar{k, input.shape[i]});
        idx.push_back(k);
        if (keepdims) ++o;
      } else {
        idx.push_back(out_idx[o++]);
      }
    }
    loop::Expr element = input.at(idx);
    return loop::Reduce(kind, source ? source(element) : element, std::move(axes));
  };
  return LTensor{in.dtype, std::move(out_shape), at};
}

LTensor ComputeOnce(LowerContext& ctx, const LTensor& t, const std::string& name) {
  std::vector<loop::Expr> idx;
  for (size_t i = 0; i < t.shape.size(); ++i) idx.push_back(ctx.NewVar("c"));
  loop::Expr e = t.at(idx);
  while (e->kind == loop::ExprKind::kCast) e = loop::AsCast(e)->value;
  if (e->kind == loop::ExprKind::kLoad) return t;
  return ctx.Materialize(t, name);
}

}  // namespace kiln::lower
