// Ops whose result sizes depend on their arguments' values: nonzero, compress, unique and
// non_max_suppression (ONNX NonZero, Compress, Unique, NonMaxSuppression).
//
// Their type relations leave the dims the values decide unknown (TypeRelContext::UnknownDim)
// and their reference kernels allocate those outputs themselves (they arrive undefined: see
// OpDef::data_dependent_shape). They have no lowering. A model that holds one runs in segments
// (engine/segments.h): the graph before the op is compiled and run, the op runs on its values,
// and the graph after it is specialized on the sizes the op produced. Each runs compiled, as its
// bounded form (OpDef::bounded_op, ir/ops/bounded.cc: its results at their upper bounds and the
// count) in the graph before it, and the host keeps the first `count` entries.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <vector>

#include "ir/ops/data_dependent.h"
#include "ir/ops/op_util.h"

namespace kiln {
namespace {

// ---- nonzero ----

Type NonZeroRel(TypeRelContext& ctx) {
  const TensorTypeNode& x = ctx.tensor(0);
  // A scalar counts as one element of rank 1 (its one index is 0).
  return TensorType({Dim(std::max(1, x.ndim())), TypeRelContext::UnknownDim()}, DType::kInt64);
}

}  // namespace

// out[d, n]: index d of the n-th nonzero element, in row-major order.
void ops::NonZeroKernel(const std::vector<Tensor>& in, const Attrs&, std::vector<Tensor>& out) {
  const Tensor& x = in[0];
  std::vector<int64_t> shape = x.shape();
  if (shape.empty()) shape = {1};
  std::vector<int64_t> hits;
  for (int64_t i = 0; i < x.numel(); ++i)
    if (x.GetAsDouble(i) != 0.0) hits.push_back(i);
  const int64_t rank = static_cast<int64_t>(shape.size());
  const int64_t count = static_cast<int64_t>(hits.size());
  out[0] = Tensor::Empty(DType::kInt64, {rank, count});
  int64_t* y = out[0].data<int64_t>();
  std::vector<int64_t> idx;
  for (int64_t n = 0; n < count; ++n) {
    ops::Unravel(hits[n], shape, idx);
    for (int64_t d = 0; d < rank; ++d) y[d * count + n] = idx[d];
  }
}

// ---- compress ----

// The axis attribute: [] (flatten the input) or [axis].
std::optional<int> ops::CompressAxis(const TypeRelContext& ctx, int rank) {
  const std::vector<int64_t>& a = ctx.attrs().GetInts("axis");
  if (a.empty()) return std::nullopt;
  if (rank == 0) ctx.Fail(StrCat("axis ", a[0], " given for a scalar input"));
  return ctx.NormalizeAxis(a[0], rank);
}

std::string ops::CheckAtMostOne(const AttrValue& v) {
  return std::get<std::vector<int64_t>>(v).size() <= 1 ? "" : "must hold at most one axis";
}

namespace {

Type CompressRel(TypeRelContext& ctx) {
  const TensorTypeNode& x = ctx.tensor(0);
  const TensorTypeNode& cond = ctx.tensor(1);
  ops::RequireDType(ctx, cond.dtype, ops::DTypeClass::kBool, "condition");
  if (cond.ndim() != 1) ctx.Fail(StrCat("condition must have rank 1, got ", cond.ndim()));
  std::optional<int> axis = ops::CompressAxis(ctx, x.ndim());
  if (!axis) return TensorType({TypeRelContext::UnknownDim()}, x.dtype);
  Shape out = x.shape;
  out[*axis] = TypeRelContext::UnknownDim();
  return TensorType(out, x.dtype);
}

}  // namespace

// The slices (along the axis, or the elements of the flattened input) at which the condition
// holds; a condition shorter than them drops the rest, a longer one is an error.
void ops::CompressKernel(const std::vector<Tensor>& in, const Attrs& attrs,
                         std::vector<Tensor>& out) {
  const Tensor& x = in[0];
  const Tensor& cond = in[1];
  const std::vector<int64_t>& a = attrs.GetInts("axis");
  std::vector<int64_t> shape = a.empty() ? std::vector<int64_t>{x.numel()} : x.shape();
  int axis = 0;
  if (!a.empty()) axis = static_cast<int>(a[0] < 0 ? a[0] + x.ndim() : a[0]);
  ops::AxisSplit s = ops::SplitAtAxis(shape, axis);
  if (cond.numel() > s.len)
    Throw(ErrorCode::kInvalidArgument, "condition has ", cond.numel(), " elements, more than the ",
          s.len, " ", a.empty() ? "elements of the input" : "slices", " it selects from");
  std::vector<int64_t> kept;
  for (int64_t k = 0; k < cond.numel(); ++k)
    if (cond.GetAsDouble(k) != 0.0) kept.push_back(k);
  shape[axis] = static_cast<int64_t>(kept.size());
  out[0] = Tensor::Empty(x.dtype(), shape);
  for (int64_t o = 0; o < s.outer; ++o)
    for (size_t k = 0; k < kept.size(); ++k)
      ops::CopyElements(x, (o * s.len + kept[k]) * s.inner, out[0],
                        (o * static_cast<int64_t>(kept.size()) + static_cast<int64_t>(k)) * s.inner,
                        s.inner);
}

namespace {

// ---- unique ----

Type UniqueRel(TypeRelContext& ctx) {
  const TensorTypeNode& x = ctx.tensor(0);
  std::optional<int> axis = ops::CompressAxis(ctx, x.ndim());
  Shape y;
  Dim n;  // the inverse indices: one per element or slice
  if (!axis) {
    y = {TypeRelContext::UnknownDim()};
    n = ShapeNumel(x.shape);
  } else {
    y = x.shape;
    y[*axis] = TypeRelContext::UnknownDim();
    n = x.shape[*axis];
  }
  Dim u = axis ? y[*axis] : y[0];
  return TupleType({TensorType(y, x.dtype), TensorType({u}, DType::kInt64),
                    TensorType({n}, DType::kInt64), TensorType({u}, DType::kInt64)});
}

// A strict weak order on values: numbers ascending, NaN after every number and equal to NaN.
template <typename C>
int CompareValues(C u, C v) {
  if constexpr (std::is_floating_point_v<C>) {
    const bool nu = std::isnan(u), nv = std::isnan(v);
    if (nu || nv) return nu == nv ? 0 : (nu ? 1 : -1);
  }
  return u < v ? -1 : (v < u ? 1 : 0);
}

}  // namespace

// The distinct slices of x along an axis (or its distinct elements), in ascending
// lexicographic order (sorted) or in the order of their first occurrence, with the index of
// each one's first occurrence, each slice's position among them, and how often each occurs.
void ops::UniqueKernel(const std::vector<Tensor>& in, const Attrs& attrs,
                       std::vector<Tensor>& out) {
  const Tensor& x = in[0];
  const std::vector<int64_t>& a = attrs.GetInts("axis");
  const bool sorted = attrs.GetBool("sorted");
  std::vector<int64_t> shape = a.empty() ? std::vector<int64_t>{x.numel()} : x.shape();
  int axis = 0;
  if (!a.empty()) axis = static_cast<int>(a[0] < 0 ? a[0] + x.ndim() : a[0]);
  const ops::AxisSplit s = ops::SplitAtAxis(shape, axis);
  // Slice k is the elements (o, k, i) for every o and i, compared in that order.
  auto compare = [&](int64_t p, int64_t q) {
    return DispatchDType(x.dtype(), [&]<typename T>() {
      using C = ops::ComputeT<T>;
      const T* v = x.data<T>();
      for (int64_t o = 0; o < s.outer; ++o)
        for (int64_t i = 0; i < s.inner; ++i) {
          int c = CompareValues<C>(static_cast<C>(v[(o * s.len + p) * s.inner + i]),
                                   static_cast<C>(v[(o * s.len + q) * s.inner + i]));
          if (c != 0) return c;
        }
      return 0;
    });
  };
  std::vector<int64_t> order(static_cast<size_t>(s.len));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t p, int64_t q) { return compare(p, q) < 0; });
  // Runs of equal slices; stable, so each run starts at its first occurrence.
  std::vector<int64_t> first, counts, run_of(static_cast<size_t>(s.len));
  for (size_t r = 0; r < order.size(); ++r) {
    if (r == 0 || compare(order[r - 1], order[r]) != 0) {
      first.push_back(order[r]);
      counts.push_back(0);
    }
    counts.back() += 1;
    run_of[order[r]] = static_cast<int64_t>(first.size()) - 1;
  }
  const int64_t u = static_cast<int64_t>(first.size());
  std::vector<int64_t> rank_of_run(first.size());  // the run's place in the output
  std::iota(rank_of_run.begin(), rank_of_run.end(), 0);
  if (!sorted) {
    std::vector<int64_t> by_first(first.size());
    std::iota(by_first.begin(), by_first.end(), 0);
    std::sort(by_first.begin(), by_first.end(),
              [&](int64_t p, int64_t q) { return first[p] < first[q]; });
    for (int64_t r = 0; r < u; ++r) rank_of_run[by_first[r]] = r;
  }
  std::vector<int64_t> y_shape = shape;
  y_shape[axis] = u;
  out[0] = Tensor::Empty(x.dtype(), y_shape);
  out[1] = Tensor::Empty(DType::kInt64, {u});
  out[2] = Tensor::Empty(DType::kInt64, {s.len});
  out[3] = Tensor::Empty(DType::kInt64, {u});
  for (int64_t r = 0; r < u; ++r) {
    const int64_t at = rank_of_run[r];
    out[1].data<int64_t>()[at] = first[r];
    out[3].data<int64_t>()[at] = counts[r];
    for (int64_t o = 0; o < s.outer; ++o)
      ops::CopyElements(x, (o * s.len + first[r]) * s.inner, out[0], (o * u + at) * s.inner,
                        s.inner);
  }
  for (int64_t k = 0; k < s.len; ++k) out[2].data<int64_t>()[k] = rank_of_run[run_of[k]];
}

// ---- non_max_suppression ----

Type ops::NmsRel(TypeRelContext& ctx) {
  const TensorTypeNode& boxes = ctx.tensor(0);
  const TensorTypeNode& scores = ctx.tensor(1);
  ops::RequireDType(ctx, boxes.dtype, ops::DTypeClass::kFloat, "boxes");
  ops::RequireDType(ctx, scores.dtype, ops::DTypeClass::kFloat, "scores");
  if (boxes.ndim() != 3)
    ctx.Fail(StrCat("boxes must be [batches, boxes, 4], got rank ", boxes.ndim()));
  if (scores.ndim() != 3)
    ctx.Fail(StrCat("scores must be [batches, classes, boxes], got rank ", scores.ndim()));
  ctx.AssertEqual(boxes.shape[2], Dim(4), "boxes' last dim");
  ctx.AssertEqual(boxes.shape[0], scores.shape[0], "the batches of boxes and scores");
  ctx.AssertEqual(boxes.shape[1], scores.shape[2], "the boxes of boxes and scores");
  const char* names[] = {"max_output_boxes_per_class", "iou_threshold", "score_threshold"};
  for (int i = 2; i < ctx.num_args(); ++i) {
    const TensorTypeNode& t = ctx.tensor(i);
    if (t.ndim() > 1 || (t.ndim() == 1 && !(t.shape[0].is_const() && t.shape[0].value() == 1)))
      ctx.Fail(
          StrCat(names[i - 2], " must be a scalar (or one element), got ", ShapeToString(t.shape)));
    ops::RequireDType(ctx, t.dtype, i == 2 ? ops::DTypeClass::kNumeric : ops::DTypeClass::kFloat,
                      names[i - 2]);
  }
  return TensorType({TypeRelContext::UnknownDim(), Dim(3)}, DType::kInt64);
}

namespace {

// A box as its corners, min before max on each axis.
struct Box {
  double y0, x0, y1, x1;
};

Box ReadBox(const Tensor& boxes, int64_t at, bool center) {
  double v[4];
  for (int i = 0; i < 4; ++i) v[i] = boxes.GetAsDouble(at * 4 + i);
  if (center)  // [x_center, y_center, width, height]
    return {v[1] - v[3] / 2, v[0] - v[2] / 2, v[1] + v[3] / 2, v[0] + v[2] / 2};
  return {std::min(v[0], v[2]), std::min(v[1], v[3]), std::max(v[0], v[2]), std::max(v[1], v[3])};
}

// Whether a and b overlap by more than `threshold` (intersection over union); boxes of no area
// overlap nothing.
bool Overlaps(const Box& a, const Box& b, double threshold) {
  const double area_a = (a.y1 - a.y0) * (a.x1 - a.x0), area_b = (b.y1 - b.y0) * (b.x1 - b.x0);
  if (area_a <= 0 || area_b <= 0) return false;
  const double h = std::min(a.y1, b.y1) - std::max(a.y0, b.y0);
  const double w = std::min(a.x1, b.x1) - std::max(a.x0, b.x0);
  if (h <= 0 || w <= 0) return false;
  const double inter = h * w, uni = area_a + area_b - inter;
  return uni > 0 && inter / uni > threshold;
}

}  // namespace

// Per batch and class: the boxes scoring above score_threshold, best first (equal scores by
// box index), each kept unless it overlaps one kept before it by more than iou_threshold, at
// most max_output_boxes_per_class of them; rows [batch, class, box] in that order.
void ops::NmsKernel(const std::vector<Tensor>& in, const Attrs& attrs, std::vector<Tensor>& out) {
  const Tensor& boxes = in[0];
  const Tensor& scores = in[1];
  auto scalar = [&](size_t i, double fallback) {
    return in.size() > i && in[i].numel() > 0 ? in[i].GetAsDouble(0) : fallback;
  };
  // An integer count read as one (exporters pass INT64_MAX for "no limit"), negative as none.
  int64_t max_out = 0;
  if (in.size() > 2 && in[2].numel() > 0) {
    const Tensor& m = in[2];
    if (m.dtype() == DType::kInt64) {
      max_out = m.data<int64_t>()[0];
    } else {
      const double v = m.GetAsDouble(0);
      max_out = std::isnan(v) || v <= 0 ? 0
                : v >= 9.0e18           ? std::numeric_limits<int64_t>::max()
                                        : static_cast<int64_t>(v);
    }
  }
  const double iou = scalar(3, 0);
  const bool has_score_threshold = in.size() > 4 && in[4].numel() > 0;
  const double score_threshold = scalar(4, 0);
  const bool center = attrs.GetInt("center_point_box") == 1;
  const int64_t batches = scores.shape()[0], classes = scores.shape()[1], count = scores.shape()[2];
  std::vector<int64_t> rows;
  for (int64_t b = 0; b < batches && max_out > 0; ++b) {
    std::vector<Box> bx(static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i) bx[i] = ReadBox(boxes, b * count + i, center);
    for (int64_t c = 0; c < classes; ++c) {
      const int64_t base = (b * classes + c) * count;
      std::vector<int64_t> cand;
      for (int64_t i = 0; i < count; ++i)
        if (!has_score_threshold || scores.GetAsDouble(base + i) > score_threshold)
          cand.push_back(i);
      // Best first; a NaN score (kept only without a threshold) counts as the lowest.
      auto score = [&](int64_t i) {
        const double v = scores.GetAsDouble(base + i);
        return std::isnan(v) ? -std::numeric_limits<double>::infinity() : v;
      };
      std::stable_sort(cand.begin(), cand.end(),
                       [&](int64_t p, int64_t q) { return score(p) > score(q); });
      std::vector<int64_t> kept;
      for (int64_t i : cand) {
        if (static_cast<int64_t>(kept.size()) >= max_out) break;
        bool suppressed = false;
        for (int64_t k : kept) suppressed = suppressed || Overlaps(bx[k], bx[i], iou);
        if (!suppressed) kept.push_back(i);
      }
      for (int64_t i : kept) rows.insert(rows.end(), {b, c, i});
    }
  }
  const int64_t n = static_cast<int64_t>(rows.size() / 3);
  out[0] = Tensor::Empty(DType::kInt64, {n, 3});
  std::copy(rows.begin(), rows.end(), out[0].data<int64_t>());
}

std::string ops::CheckCenterPointBox(const AttrValue& v) {
  int64_t c = std::get<int64_t>(v);
  return c == 0 || c == 1 ? "" : "must be 0 (corners) or 1 (center and size)";
}

void RegisterDataDependentOps(OpRegistry& r) {
  r.Register(OpDef{
      .name = "nonzero",
      .doc = "ONNX NonZero: the indices of the nonzero elements of x, i64[rank, count], one "
             "column per element in row-major order (a scalar counts as rank 1). count depends "
             "on the values: the model runs in segments.",
      .attrs = {},
      .pattern = OpPattern::kOpaque,
      .type_rel = NonZeroRel,
      .ref_kernel = ops::NonZeroKernel,
      .data_dependent_shape = true,
      .bounded_op = "nonzero_bounded",
  });
  r.Register(OpDef{
      .name = "compress",
      .doc = "ONNX Compress: the slices of x along `axis` (axis = []: the elements of x "
             "flattened) at which the 1-D bool condition holds; a shorter condition drops the "
             "slices past it, a longer one is an error. The size depends on the values: the "
             "model runs in segments.",
      .min_inputs = 2,
      .max_inputs = 2,
      .attrs = {{"axis", AttrKind::kInts, AttrValue{std::vector<int64_t>{}}, ops::CheckAtMostOne}},
      .pattern = OpPattern::kOpaque,
      .type_rel = CompressRel,
      .ref_kernel = ops::CompressKernel,
      .data_dependent_shape = true,
      .bounded_op = "compress_bounded",
  });
  r.Register(OpDef{
      .name = "unique",
      .doc = "ONNX Unique: the distinct slices of x along `axis` (axis = []: its distinct "
             "elements, flattened), ascending (sorted, lexicographic for slices; NaN last) or "
             "in order of first occurrence, as a tuple (values, index of each one's first "
             "occurrence, each input slice's index among the values, counts). Sizes depend on "
             "the values: the model runs in segments.",
      .attrs = {{"sorted", AttrKind::kBool, AttrValue{true}},
                {"axis", AttrKind::kInts, AttrValue{std::vector<int64_t>{}}, ops::CheckAtMostOne}},
      .pattern = OpPattern::kOpaque,
      .type_rel = UniqueRel,
      .ref_kernel = ops::UniqueKernel,
      .data_dependent_shape = true,
      .bounded_op = "unique_bounded",
  });
  r.Register(OpDef{
      .name = "non_max_suppression",
      .doc = "ONNX NonMaxSuppression(boxes [B, N, 4], scores [B, C, N], max_output_boxes_per_"
             "class = 0, iou_threshold = 0, score_threshold = none): per batch and class, the "
             "boxes scoring above score_threshold, best first (ties by index), each kept unless "
             "its IoU with a kept one exceeds iou_threshold, at most max_output_boxes_per_class; "
             "i64[selected, 3] rows (batch, class, box). center_point_box: 0 corners [y1, x1, "
             "y2, x2] (either diagonal), 1 [x_center, y_center, width, height]. The count "
             "depends on the values: the model runs in segments.",
      .min_inputs = 2,
      .max_inputs = 5,
      .attrs = {{"center_point_box", AttrKind::kInt, AttrValue{int64_t{0}},
                 ops::CheckCenterPointBox}},
      .pattern = OpPattern::kOpaque,
      .type_rel = ops::NmsRel,
      .ref_kernel = ops::NmsKernel,
      .data_dependent_shape = true,
      .bounded_op = "non_max_suppression_bounded",
  });
}

}  // namespace kiln
