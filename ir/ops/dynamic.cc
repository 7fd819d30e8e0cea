// Shapes as values (ir/dynamic.h): `shape` and `size`, which read only their argument's type,
// and the dynamic variants `dyn.<op>` of the ops whose attributes can arrive as tensors.
//
//   shape(x: f32[2, batch, 4], start=1)  -> i64[2]: [batch, 4]
//   size(x: f32[2, batch])               -> i64[]: 2 * batch
//   dyn.reshape(x: f32[6], s: i64[2])    -> f32[_v0, _v1]; with s = [2, 3] after
//                                           specialization: reshape(x, shape=[2, 3])
//
// A dynamic variant's schema is its static op's minus the attributes its value arguments carry;
// its relation knows the rank (and whatever else does not depend on the values) and makes the
// other dims unknown. It has no kernel: specialization always rewrites it to the static op.
#include <algorithm>
#include <limits>
#include <utility>

#include "ir/dynamic.h"
#include "ir/ops/op_util.h"
#include "ir/sequence.h"

namespace kiln {

namespace {

using V = std::vector<int64_t>;

// ONNX Shape-15's [start, end) over the dims: negative counts from the back, both clamp to
// [0, rank].
std::pair<int, int> ShapeRange(const Attrs& attrs, int rank) {
  auto clamp = [&](int64_t v) {
    if (v < 0) v += rank;
    return static_cast<int>(std::clamp<int64_t>(v, 0, rank));
  };
  int start = clamp(attrs.GetInt("start"));
  int end = clamp(attrs.GetInt("end"));
  return {start, std::max(start, end)};
}

Tensor ShapeValue(const std::vector<Type>& types, const Attrs& attrs) {
  const TensorTypeNode* t = AsTensor(types.at(0));
  KILN_CHECK(t && IsConstShape(t->shape), "shape: folded from a non-concrete type");
  auto [start, end] = ShapeRange(attrs, t->ndim());
  std::vector<int64_t> dims = ConstShape(t->shape);
  return Tensor::FromVector<int64_t>({end - start}, V(dims.begin() + start, dims.begin() + end));
}

Tensor SizeValue(const std::vector<Type>& types, const Attrs&) {
  const TensorTypeNode* t = AsTensor(types.at(0));
  KILN_CHECK(t && IsConstShape(t->shape), "size: folded from a non-concrete type");
  return Tensor::Scalar<int64_t>(CheckedNumel(ConstShape(t->shape), "size"));
}

// The static length of a 1-D value argument (shape, axes): what decides a result's rank.
int64_t ValueLength(TypeRelContext& ctx, int arg, const char* what) {
  const TensorTypeNode& t = ctx.tensor(arg);
  if (t.ndim() == 0) return 1;
  if (t.ndim() != 1)
    ctx.Fail(StrCat(what, " must be a 1-D tensor, got ", TypeToString(ctx.arg(arg))));
  if (!t.shape[0].is_const())
    ctx.Fail(StrCat(what, " has a symbolic length ", t.shape[0].ToString(),
                    ": the result's rank must be known"));
  return t.shape[0].value();
}

Shape UnknownShape(int64_t rank) {
  Shape s;
  for (int64_t i = 0; i < rank; ++i) s.push_back(TypeRelContext::UnknownDim());
  return s;
}

// Relations of the dynamic variants (arguments: the data, then the values).
Type SameRankUnknown(TypeRelContext& ctx) {
  const TensorTypeNode& x = ctx.tensor(0);
  return TensorType(UnknownShape(x.ndim()), x.dtype);
}

Type DynReshape(TypeRelContext& ctx) {
  return TensorType(UnknownShape(ValueLength(ctx, 1, "shape")), ctx.tensor(0).dtype);
}

Type DynSqueeze(TypeRelContext& ctx) {
  const TensorTypeNode& x = ctx.tensor(0);
  int64_t n = ValueLength(ctx, 1, "axes");
  if (ctx.tensor(1).ndim() == 1 && n == 0)
    ctx.Fail("axes is empty: which dims are removed depends on the shape, so the rank is unknown");
  if (n > x.ndim()) ctx.Fail(StrCat(n, " axes for rank ", x.ndim()));
  return TensorType(UnknownShape(x.ndim() - n), x.dtype);
}

Type DynUnsqueeze(TypeRelContext& ctx) {
  const TensorTypeNode& x = ctx.tensor(0);
  return TensorType(UnknownShape(x.ndim() + ValueLength(ctx, 1, "axes")), x.dtype);
}

Type DynExpand(TypeRelContext& ctx) {
  const TensorTypeNode& x = ctx.tensor(0);
  return TensorType(UnknownShape(std::max<int64_t>(x.ndim(), ValueLength(ctx, 1, "shape"))),
                    x.dtype);
}

// Reductions whose axes are a value: keepdims keeps the rank; else the axes go (none given:
// all of them, unless noop_with_empty_axes).
Type DynReduce(TypeRelContext& ctx) {
  const TensorTypeNode& x = ctx.tensor(0);
  int64_t n = ValueLength(ctx, 1, "axes");
  int64_t rank = x.ndim();
  if (!ctx.attrs().GetBool("keepdims")) {
    if (n == 0)
      rank = ctx.attrs().GetBool("noop_with_empty_axes") ? rank : 0;
    else
      rank -= n;
  }
  if (rank < 0) ctx.Fail(StrCat(n, " axes for rank ", x.ndim()));
  return TensorType(UnknownShape(rank), x.dtype);
}

Type DynCumsum(TypeRelContext& ctx) {
  return ctx.arg(0);  // the axis only picks the loops
}

Type DynRange(TypeRelContext& ctx) {
  return TensorType(UnknownShape(1), ctx.attrs().GetDType("dtype"));
}

Type DynSplit(TypeRelContext& ctx) {
  const TensorTypeNode& x = ctx.tensor(0);
  if (x.ndim() == 0) ctx.Fail("cannot split a scalar (rank 0)");
  int64_t n = ValueLength(ctx, 1, "split");
  int axis = ctx.NormalizeAxis(ctx.attrs().GetInt("axis"), x.ndim());
  std::vector<Type> parts;
  for (int64_t i = 0; i < n; ++i) {
    Shape s = x.shape;
    s[axis] = TypeRelContext::UnknownDim();
    parts.push_back(TensorType(s, x.dtype));
  }
  return TupleType(std::move(parts));
}

Type DynOneHot(TypeRelContext& ctx) {
  return TensorType(UnknownShape(ctx.tensor(0).ndim() + 1), ctx.tensor(1).dtype);
}

Type DynTopK(TypeRelContext& ctx) {
  const TensorTypeNode& x = ctx.tensor(0);
  if (x.ndim() == 0) ctx.Fail("input must have rank 1 or more, got a scalar");
  int axis = ctx.NormalizeAxis(ctx.attrs().GetInt("axis"), x.ndim());
  Shape s = x.shape;
  s[axis] = TypeRelContext::UnknownDim();
  return TupleType({TensorType(s, x.dtype), TensorType(s, DType::kInt64)});
}

// dyn.branch(then, else, cond): ONNX If before its condition is known. The two values must
// agree in dtype and rank; a dim where they differ is unknown until the branch is taken. Two
// sequences give a sequence of what their elements share (ir/sequence.h).
Type DynBranch(TypeRelContext& ctx) {
  const TensorTypeNode* seq_a = SequenceElement(ctx.arg(0));
  const TensorTypeNode* seq_b = SequenceElement(ctx.arg(1));
  if (seq_a || seq_b) {
    Type element;
    std::string why = seq_a && seq_b ? JoinElements(*seq_a, *seq_b, &element) : "";
    if (!seq_a || !seq_b || !why.empty())
      ctx.Fail(StrCat("the then and else branches disagree: ", TypeToString(ctx.arg(0)), " and ",
                      TypeToString(ctx.arg(1)), why.empty() ? "" : StrCat(" (", why, ")")));
    return SequenceType(element);
  }
  const TensorTypeNode& a = ctx.tensor(0);
  const TensorTypeNode& b = ctx.tensor(1);
  if (a.dtype != b.dtype || a.ndim() != b.ndim())
    ctx.Fail(StrCat("the then and else branches disagree: ", TypeToString(ctx.arg(0)), " and ",
                    TypeToString(ctx.arg(1))));
  Shape s = a.shape;
  for (int64_t i = 0; i < a.ndim(); ++i)
    if (!(a.shape[i] == b.shape[i])) s[i] = TypeRelContext::UnknownDim();
  return TensorType(std::move(s), a.dtype);
}

// dyn.loop(body, carried..., captured..., trip_count, cond): ONNX Loop whose trip count is known
// only at specialization (ir/dynamic.h). The body's outputs give each result's dtype and rank;
// its dims, and the iteration count that scan outputs stack, are unknown until it unrolls.
Type DynLoop(TypeRelContext& ctx) {
  const FuncTypeNode* f = AsFunc(ctx.arg(0));
  const TupleTypeNode* ret = f ? AsTuple(f->ret) : nullptr;
  const int64_t carried = ctx.attrs().GetInt("num_carried"),
                scans = ctx.attrs().GetInt("num_scans");
  // Arguments: the body, the carried values, the captured ones, the trip count, the condition;
  // the body's parameters: the iteration, the condition, the carried and the captured values.
  // Compared without sums that could overflow: the counts are attributes, any int64.
  if (carried < 0 || scans < 0 || carried > ctx.num_args() - 3)
    ctx.Fail(StrCat("num_carried = ", carried, " and num_scans = ", scans, " for ", ctx.num_args(),
                    " arguments (the body, the carried values, the captured ones, "
                    "the trip count, the condition)"));
  if (f && static_cast<int>(f->params.size()) != ctx.num_args() - 1)
    ctx.Fail(StrCat("the body takes ", f->params.size(), " parameters; it needs ",
                    ctx.num_args() - 1, " (the iteration, the condition, ", carried,
                    " carried and ", ctx.num_args() - 3 - carried, " captured values)"));
  if (!ret || static_cast<int64_t>(ret->fields.size()) - 1 - carried != scans)
    ctx.Fail(StrCat("the body must be a function returning the condition, ", carried,
                    " carried values and ", scans, " scan values"));
  std::vector<Type> outs;
  for (int64_t k = 0; k < carried + scans; ++k) {
    // A carried sequence (ir/sequence.h): what the elements of every iteration share, known
    // once the loop unrolls.
    if (const TensorTypeNode* e = SequenceElement(ret->fields[1 + k]); e && k < carried) {
      Type element = NoElementYet(e->dtype);
      for (const TensorTypeNode* x : {SequenceElement(ctx.arg(1 + k)), e}) {
        if (!x) continue;
        Type joined;
        std::string why = JoinElements(*AsTensor(element), *x, &joined);
        if (!why.empty()) ctx.Fail(StrCat("carried value ", k, " holds ", why));
        element = joined;
      }
      const TensorTypeNode& j = *AsTensor(element);
      outs.push_back(
          SequenceType(IsNoElementYet(j) ? element : TensorType(UnknownShape(j.ndim()), j.dtype)));
      continue;
    }
    const TensorTypeNode* t = AsTensor(ret->fields[1 + k]);
    if (!t) ctx.Fail(StrCat("body output ", 1 + k, " is not a tensor"));
    // A carried value whose type the body keeps (its output's type is its parameter's) keeps
    // it through every iteration.
    if (k < carried && f->params.size() > static_cast<size_t>(2 + k) &&
        TypeToString(f->params[2 + k]) == TypeToString(ret->fields[1 + k])) {
      outs.push_back(ret->fields[1 + k]);
      continue;
    }
    Shape s = UnknownShape(t->ndim());
    if (k >= carried) s.insert(s.begin(), TypeRelContext::UnknownDim());
    outs.push_back(TensorType(std::move(s), t->dtype));
  }
  return TupleType(std::move(outs));
}

Type DynConstantOfShape(TypeRelContext& ctx) {
  return TensorType(UnknownShape(ValueLength(ctx, 0, "shape")), ctx.attrs().GetDType("dtype"));
}

// STFT: signal and window; [batch, frames, bins, 2] with frames and bins set by the values.
Type DynStft(TypeRelContext& ctx) {
  const TensorTypeNode& signal = ctx.tensor(0);
  if (signal.ndim() != 3)
    ctx.Fail(StrCat("signal must be [batch, length, 1 or 2], got ", TypeToString(ctx.arg(0))));
  return TensorType(
      {signal.shape[0], TypeRelContext::UnknownDim(), TypeRelContext::UnknownDim(), 2},
      signal.dtype);
}

Type DynMelWeightMatrix(TypeRelContext& ctx) {
  return TensorType({TypeRelContext::UnknownDim(), TypeRelContext::UnknownDim()},
                    ctx.attrs().GetDType("dtype"));
}

struct Variant {
  const char* op;
  int num_data_args;
  std::vector<std::string> value_attrs;
  TypeRelFn rel;
};

// Registers `dyn.<op>` when `op` is registered (the families before this one in ops.def).
void RegisterVariant(OpRegistry& r, const Variant& v) {
  const OpDef* st = r.Find(v.op);
  if (!st) return;
  OpDef def;
  def.name = StrCat("dyn.", v.op);
  def.doc =
      StrCat(v.op, " whose ", v.value_attrs.front(), (v.value_attrs.size() > 1 ? ", ..." : ""),
             " arrive as tensor arguments; resolved to ", v.op, " at specialization");
  def.min_inputs = v.num_data_args + 1;
  def.max_inputs = v.num_data_args + static_cast<int>(v.value_attrs.size());
  for (const AttrSpec& a : st->attrs)
    if (std::find(v.value_attrs.begin(), v.value_attrs.end(), a.name) == v.value_attrs.end())
      def.attrs.push_back(a);
  def.pattern = OpPattern::kOpaque;
  def.type_rel = v.rel;
  def.static_op = v.op;
  def.value_attrs = v.value_attrs;
  def.num_data_args = v.num_data_args;
  r.Register(std::move(def));
}

}  // namespace

void RegisterDynamicOps(OpRegistry& r) {
  r.Register(OpDef{
      .name = "shape",
      .doc = "the dims [start, end) of the argument as i64 (ONNX Shape)",
      .min_inputs = 1,
      .max_inputs = 1,
      .attrs = {{"start", AttrKind::kInt, AttrValue{int64_t{0}}},
                {"end", AttrKind::kInt, AttrValue{std::numeric_limits<int64_t>::max()}}},
      .pattern = OpPattern::kInjective,
      .type_rel =
          [](TypeRelContext& ctx) {
            auto [start, end] = ShapeRange(ctx.attrs(), ctx.tensor(0).ndim());
            return TensorType({Dim(end - start)}, DType::kInt64);
          },
      .ref_kernel =
          [](const std::vector<Tensor>& in, const Attrs& attrs, std::vector<Tensor>& out) {
            out[0] = ShapeValue({TypeOfTensor(in[0])}, attrs);
          },
      .lower =
          [](LowerContext&, const std::vector<LTensor>& in, const Attrs& attrs,
             const std::vector<Type>&) {
            auto [start, end] = ShapeRange(attrs, in[0].ndim());
            std::vector<loop::Expr> dims(in[0].shape.begin() + start, in[0].shape.begin() + end);
            LTensor t;
            t.dtype = DType::kInt64;
            t.shape = {loop::IntImm(end - start)};
            t.at = [dims](const std::vector<loop::Expr>& idx) {
              // A select chain over the few dims: the kernel is specialized, so they are known.
              loop::Expr v = dims.empty() ? loop::IntImm(0) : dims.back();
              for (size_t k = dims.size(); k-- > 1;)
                v = loop::Select(loop::MakeBinary(loop::BinaryOp::kEQ, idx[0],
                                                  loop::IntImm(static_cast<int64_t>(k - 1))),
                                 dims[k - 1], v);
              return v;
            };
            return std::vector<LTensor>{t};
          },
      .fold_from_types = ShapeValue,
  });
  r.Register(OpDef{
      .name = "size",
      .doc = "the number of elements of the argument as an i64 scalar (ONNX Size)",
      .min_inputs = 1,
      .max_inputs = 1,
      .attrs = {},
      .pattern = OpPattern::kInjective,
      .type_rel = [](TypeRelContext&) { return TensorType({}, DType::kInt64); },
      .ref_kernel =
          [](const std::vector<Tensor>& in, const Attrs& attrs, std::vector<Tensor>& out) {
            out[0] = SizeValue({TypeOfTensor(in[0])}, attrs);
          },
      .lower =
          [](LowerContext&, const std::vector<LTensor>& in, const Attrs&,
             const std::vector<Type>&) {
            loop::Expr n = loop::IntImm(1);
            for (const loop::Expr& d : in[0].shape) n = loop::Mul(n, d);
            LTensor t;
            t.dtype = DType::kInt64;
            t.at = [n](const std::vector<loop::Expr>&) { return n; };
            return std::vector<LTensor>{t};
          },
      .fold_from_types = SizeValue,
  });

  // ONNX If once its condition is known (dyn.branch below until then). ResolveDynamic replaces
  // the call by the taken value, so the other branch is not computed; the kernels serve a graph
  // built by hand.
  r.Register(OpDef{
      .name = "branch",
      .doc = "the first value when taken, else the second (ONNX If with a known condition; "
             "specialization inlines the taken value)",
      .min_inputs = 2,
      .max_inputs = 2,
      .attrs = {{"taken", AttrKind::kBool, std::nullopt}},
      .pattern = OpPattern::kOpaque,
      .type_rel = [](TypeRelContext& ctx) { return ctx.arg(ctx.attrs().GetBool("taken") ? 0 : 1); },
      .ref_kernel =
          [](const std::vector<Tensor>& in, const Attrs& attrs, std::vector<Tensor>& out) {
            out[0] = in[attrs.GetBool("taken") ? 0 : 1].Clone();
          },
      .lower =
          [](LowerContext&, const std::vector<LTensor>& in, const Attrs& attrs,
             const std::vector<Type>&) {
            return std::vector<LTensor>{in[attrs.GetBool("taken") ? 0 : 1]};
          },
  });

  // ONNX Loop whose trip count is known only at specialization: ResolveDynamic unrolls it
  // (ir/dynamic.h). Its first argument is the body, a function; its last two are values.
  r.Register(OpDef{
      .name = std::string(kDynLoopOp),
      .doc = "ONNX Loop (body function, carried values, captured values, trip count, condition); "
             "unrolled at specialization once the trip count is known",
      .min_inputs = 3,
      .max_inputs = -1,
      .attrs = {{"num_carried", AttrKind::kInt, std::nullopt},
                {"num_scans", AttrKind::kInt, std::nullopt},
                {"scan_reverse", AttrKind::kInts, AttrValue{std::vector<int64_t>{}}}},
      .pattern = OpPattern::kOpaque,
      .type_rel = DynLoop,
      .ref_kernel = nullptr,
      .static_op = "loop",
      .value_attrs = {"trip_count", "cond"},
  });

  const std::vector<Variant> variants = {
      {"branch", 2, {"taken"}, DynBranch},
      {"reshape", 1, {"shape"}, DynReshape},
      {"squeeze", 1, {"axes"}, DynSqueeze},
      {"unsqueeze", 1, {"axes"}, DynUnsqueeze},
      {"expand", 1, {"shape"}, DynExpand},
      {"tile", 1, {"repeats"}, SameRankUnknown},
      {"slice", 1, {"starts", "ends", "axes", "steps"}, SameRankUnknown},
      {"split", 1, {"split"}, DynSplit},
      {"pad", 1, {"pads", "value"}, SameRankUnknown},
      {"sum", 1, {"axes"}, DynReduce},
      {"cumsum", 1, {"axis"}, DynCumsum},
      {"range", 0, {"start", "limit", "delta"}, DynRange},
      {"resize", 1, {"roi", "scales", "sizes"}, SameRankUnknown},
      {"one_hot", 2, {"depth"}, DynOneHot},
      {"topk", 1, {"k"}, DynTopK},
      {"constant_of_shape", 0, {"shape"}, DynConstantOfShape},
      {"max_unpool", 2, {"output_shape"}, SameRankUnknown},
      {"stft", 2, {"frame_step", "frame_length"}, DynStft},
      {"mel_weight_matrix",
       0,
       {"num_mel_bins", "dft_length", "sample_rate", "lower_edge_hertz", "upper_edge_hertz"},
       DynMelWeightMatrix},
  };
  for (const Variant& v : variants) RegisterVariant(r, v);
}

}  // namespace kiln
