// einsum (ONNX Einsum): sums of products of its operands over the subscript letters missing
// from the output. One parse of the equation serves the type relation, the reference kernel
// and the lowering.
#include <algorithm>
#include <cctype>
#include <map>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "ir/loop/loop.h"
#include "ir/ops/op_util.h"

namespace kiln {
namespace {

using ops::OutShape;
using ops::SameExtent;

// An einsum equation resolved against the ranks of its operands. Each subscript letter is a
// label, and so is each dim that an ellipsis stands for; operand and output dims are lists of
// labels. The same parse serves the relation, the reference kernel and the lowering.
struct EinsumSpec {
  // Labels [0, ellipsis_dims) are the dims ellipses stand for, aligned from the right across
  // operands and broadcast as NumPy does; label ellipsis_dims + c is the letter letters[c].
  int ellipsis_dims = 0;
  std::string letters;
  std::vector<std::vector<int>> operands;
  std::vector<int> output;
  std::vector<int> reduced;  // the labels not in the output, summed over
  int num_labels() const { return ellipsis_dims + static_cast<int>(letters.size()); }
  bool IsEllipsis(int label) const { return label < ellipsis_dims; }
  std::string LabelName(int label) const {
    return IsEllipsis(label) ? StrCat("ellipsis dim ", label)
                             : StrCat("letter '", letters.substr(label - ellipsis_dims, 1), "'");
  }
};

// One term of an equation: its letters, and where among them its ellipsis is (-1: none).
struct EinsumTerm {
  std::string letters;
  int ellipsis_at = -1;
};

// Parses `equation` for operands of `ranks`: explicit (`ij,jk->ik`) or implicit output (the
// letters that occur once, alphabetically, after the ellipsis dims), spaces ignored. `fail`
// reports an error, naming the equation, and does not return.
template <typename FailFn>
EinsumSpec ParseEinsum(const std::string& equation, const std::vector<int>& ranks,
                       FailFn fail_with) {
  auto fail = [&](const std::string& m) { fail_with(StrCat("equation \"", equation, "\": ", m)); };
  std::string eq;
  for (char ch : equation)
    if (!std::isspace(static_cast<unsigned char>(ch))) eq += ch;
  std::string lhs = eq, rhs;
  const size_t arrow = eq.find("->");
  const bool explicit_output = arrow != std::string::npos;
  if (explicit_output) {
    lhs = eq.substr(0, arrow);
    rhs = eq.substr(arrow + 2);
  }
  auto parse_term = [&](const std::string& text, const std::string& what) {
    EinsumTerm t;
    for (size_t i = 0; i < text.size();) {
      if (std::isalpha(static_cast<unsigned char>(text[i]))) {
        t.letters += text[i++];
      } else if (text.compare(i, 3, "...") == 0) {
        if (t.ellipsis_at >= 0) fail(StrCat(what, " has two ellipses"));
        t.ellipsis_at = static_cast<int>(t.letters.size());
        i += 3;
      } else {
        fail(StrCat(what, " has '", text.substr(i, 1),
                    "', which is neither a letter nor part of '...'"));
      }
    }
    return t;
  };
  std::vector<std::string> parts(1);
  for (char ch : lhs) {
    if (ch == ',')
      parts.emplace_back();
    else
      parts.back() += ch;
  }
  if (parts.size() != ranks.size())
    fail(StrCat("has ", parts.size(), " operand term", parts.size() == 1 ? "" : "s",
                " but the op has ", ranks.size(), " input", ranks.size() == 1 ? "" : "s"));
  EinsumSpec s;
  std::vector<EinsumTerm> terms;
  for (size_t i = 0; i < parts.size(); ++i) {
    std::string what = StrCat("operand ", i, " \"", parts[i], "\"");
    terms.push_back(parse_term(parts[i], what));
    const int n = static_cast<int>(terms[i].letters.size());
    const bool ellipsis = terms[i].ellipsis_at >= 0;
    if (ellipsis ? n > ranks[i] : n != ranks[i])
      fail(StrCat(what, " has ", n, " subscript", n == 1 ? "" : "s", " but input ", i, " has rank ",
                  ranks[i]));
    if (ellipsis) s.ellipsis_dims = std::max(s.ellipsis_dims, ranks[i] - n);
  }
  // Letters become labels in order of first occurrence; the ellipsis labels come first.
  std::map<char, int> count;
  auto label_of = [&](char ch) {
    size_t p = s.letters.find(ch);
    if (p == std::string::npos) {
      p = s.letters.size();
      s.letters += ch;
    }
    return s.ellipsis_dims + static_cast<int>(p);
  };
  bool any_ellipsis = false;
  for (size_t i = 0; i < terms.size(); ++i) {
    const EinsumTerm& t = terms[i];
    std::vector<int>& labels = s.operands.emplace_back();
    const int n = static_cast<int>(t.letters.size());
    for (int j = 0; j <= n; ++j) {
      if (j == t.ellipsis_at) {
        any_ellipsis = true;
        for (int e = s.ellipsis_dims - (ranks[i] - n); e < s.ellipsis_dims; ++e)
          labels.push_back(e);
      }
      if (j < n) {
        labels.push_back(label_of(t.letters[j]));
        ++count[t.letters[j]];
      }
    }
  }
  std::vector<bool> in_output(s.num_labels(), false);
  auto add_output = [&](int label) {
    s.output.push_back(label);
    in_output[label] = true;
  };
  if (explicit_output) {
    EinsumTerm t = parse_term(rhs, StrCat("the output \"", rhs, "\""));
    const int n = static_cast<int>(t.letters.size());
    if (t.ellipsis_at < 0 && s.ellipsis_dims > 0)
      fail(StrCat("the operands' ellipses stand for ", s.ellipsis_dims,
                  " dims, so the output needs '...' too"));
    for (int j = 0; j <= n; ++j) {
      if (j == t.ellipsis_at)
        for (int e = 0; e < s.ellipsis_dims; ++e) add_output(e);
      if (j == n) break;
      const char ch = t.letters[j];
      if (!count.count(ch))
        fail(StrCat("output letter '", std::string(1, ch), "' is in no operand"));
      const int label = label_of(ch);
      if (in_output[label])
        fail(StrCat("letter '", std::string(1, ch), "' appears twice in the output"));
      add_output(label);
    }
  } else {
    if (any_ellipsis)
      for (int e = 0; e < s.ellipsis_dims; ++e) add_output(e);
    for (const auto& [ch, n] : count)  // std::map: alphabetical (ASCII) order
      if (n == 1) add_output(label_of(ch));
  }
  for (int l = 0; l < s.num_labels(); ++l)
    if (!in_output[l]) s.reduced.push_back(l);
  return s;
}

Type EinsumRel(TypeRelContext& ctx) {
  const std::string& equation = ctx.attrs().GetString("equation");
  std::vector<int> ranks;
  const TensorTypeNode& first = ctx.tensor(0);
  ops::RequireDType(ctx, first.dtype, ops::DTypeClass::kNumeric);
  for (int i = 0; i < ctx.num_args(); ++i) {
    const TensorTypeNode& t = ctx.tensor(i);
    if (t.dtype != first.dtype)
      ctx.Fail(StrCat("input ", i, " has dtype ", DTypeName(t.dtype), " but input 0 has ",
                      DTypeName(first.dtype)));
    ranks.push_back(t.ndim());
  }
  EinsumSpec s = ParseEinsum(equation, ranks, [&](const std::string& m) { ctx.Fail(m); });
  // The size of each label: a letter's dims must agree; ellipsis dims broadcast.
  std::vector<std::optional<Dim>> size(s.num_labels());
  std::vector<int> first_operand(s.num_labels(), -1);
  for (int i = 0; i < ctx.num_args(); ++i) {
    const TensorTypeNode& t = ctx.tensor(i);
    for (int d = 0; d < t.ndim(); ++d) {
      const int l = s.operands[i][d];
      if (!size[l]) {
        size[l] = t.shape[d];
        first_operand[l] = i;
      } else if (s.IsEllipsis(l)) {
        size[l] = ctx.BroadcastDim(
            *size[l], t.shape[d],
            StrCat("equation \"", equation, "\": the dims under '...' do not broadcast"));
      } else {
        const TensorTypeNode& f = ctx.tensor(first_operand[l]);
        ctx.AssertEqual(
            *size[l], t.shape[d],
            StrCat("equation \"", equation, "\": ", s.LabelName(l),
                   " has different sizes in input ", first_operand[l], " ", ShapeToString(f.shape),
                   " and input ", i, " ", ShapeToString(t.shape)));
      }
    }
  }
  Shape out;
  for (int l : s.output) out.push_back(*size[l]);
  return TensorType(std::move(out), first.dtype);
}

// The accumulator of a sum of products over T: double for floats, wrapping 64-bit for
// integers (as matmul's reference).
template <typename T>
using EinsumAcc = std::conditional_t<std::is_integral_v<T>, uint64_t, double>;

// For every output element, the sum over the reduced labels of the product of the operands,
// each read at the labels' values (a dim of size 1 under an ellipsis broadcasts).
template <typename T>
void EinsumTyped(const EinsumSpec& s, const std::vector<Tensor>& in,
                 const std::vector<int64_t>& size, Tensor& y) {
  using Acc = EinsumAcc<T>;
  auto to_acc = [](T v) -> Acc {
    if constexpr (std::is_integral_v<T>)
      return static_cast<uint64_t>(static_cast<int64_t>(v));
    else
      return static_cast<double>(static_cast<ops::ComputeT<T>>(v));
  };
  const int labels = s.num_labels();
  // stride[i][l]: how far operand i's offset moves per step of label l (a label repeated in
  // one operand, a diagonal, adds up its dims' strides; a broadcast dim moves nothing).
  std::vector<std::vector<int64_t>> stride(in.size(), std::vector<int64_t>(labels, 0));
  for (size_t i = 0; i < in.size(); ++i) {
    std::vector<int64_t> st = in[i].strides();
    for (int d = 0; d < in[i].ndim(); ++d)
      if (in[i].shape()[d] != 1) stride[i][s.operands[i][d]] += st[d];
  }
  std::vector<int64_t> out_sizes, red_sizes;
  for (int l : s.output) out_sizes.push_back(size[l]);
  int64_t reductions = 1;
  for (int l : s.reduced) {
    red_sizes.push_back(size[l]);
    reductions *= size[l];
  }
  std::vector<int64_t> value(labels, 0), out_idx, red_idx;
  T* dst = y.data<T>();
  for (int64_t e = 0; e < y.numel(); ++e) {
    ops::Unravel(e, out_sizes, out_idx);
    for (size_t j = 0; j < s.output.size(); ++j) value[s.output[j]] = out_idx[j];
    Acc acc{0};
    for (int64_t r = 0; r < reductions; ++r) {
      ops::Unravel(r, red_sizes, red_idx);
      for (size_t j = 0; j < s.reduced.size(); ++j) value[s.reduced[j]] = red_idx[j];
      Acc product{1};
      for (size_t i = 0; i < in.size(); ++i) {
        int64_t off = 0;
        for (int l = 0; l < labels; ++l) off += value[l] * stride[i][l];
        product *= to_acc(in[i].data<T>()[off]);
      }
      acc += product;
    }
    if constexpr (std::is_integral_v<T>)
      dst[e] = static_cast<T>(static_cast<int64_t>(acc));
    else if constexpr (ops::kIsHalf<T>)
      dst[e] = T(static_cast<float>(acc));
    else
      dst[e] = static_cast<T>(acc);
  }
}

// The concrete size of each label (the relation has checked that they agree or broadcast).
std::vector<int64_t> EinsumSizes(const EinsumSpec& s,
                                 const std::vector<std::vector<int64_t>>& shapes) {
  std::vector<int64_t> size(s.num_labels(), 1);
  for (size_t i = 0; i < shapes.size(); ++i)
    for (size_t d = 0; d < shapes[i].size(); ++d) {
      const int l = s.operands[i][d];
      if (shapes[i][d] != 1) size[l] = shapes[i][d];
    }
  return size;
}

std::vector<int> TensorRanks(const std::vector<Tensor>& in) {
  std::vector<int> ranks;
  for (const Tensor& t : in) ranks.push_back(t.ndim());
  return ranks;
}

void EinsumKernel(const std::vector<Tensor>& in, const Attrs& attrs, std::vector<Tensor>& out) {
  EinsumSpec s =
      ParseEinsum(attrs.GetString("equation"), TensorRanks(in),
                  [](const std::string& m) { Throw(ErrorCode::kInvalidArgument, "einsum: ", m); });
  std::vector<std::vector<int64_t>> shapes;
  for (const Tensor& t : in) shapes.push_back(t.shape());
  std::vector<int64_t> size = EinsumSizes(s, shapes);
  DispatchDType(out[0].dtype(), [&]<typename T>() {
    if constexpr (!std::is_same_v<T, bool>) EinsumTyped<T>(s, in, size, out[0]);
  });
}

// The index into an operand's dim of extent `extent` under an ellipsis, for the label value
// `v` of broadcast extent `full`: a dim of 1 broadcasts (reads 0).
loop::Expr EllipsisIndex(const loop::Expr& extent, const loop::Expr& full, const loop::Expr& v) {
  int64_t c;
  if (loop::IsConstInt(extent, &c)) return c == 1 ? loop::IntImm(0) : v;
  if (SameExtent(extent, full)) return v;
  return loop::Select(loop::MakeBinary(loop::BinaryOp::kEQ, extent, loop::IntImm(1)),
                      loop::IntImm(0), v);
}

// einsum: one reduction over the labels not in the output, of the product of the operands
// read at the labels' values; no reduction when every label is in the output (a transpose, a
// diagonal, an outer product). Accumulates as matmul does: i64 for integers (wrapping, as the
// reference), f64 for f64, f32 for the other floats.
std::vector<LTensor> LowerEinsum(LowerContext& ctx, const std::vector<LTensor>& in,
                                 const Attrs& attrs, const std::vector<Type>& out_types) {
  std::vector<int> ranks;
  for (const LTensor& t : in) ranks.push_back(t.ndim());
  const EinsumSpec s = ParseEinsum(attrs.GetString("equation"), ranks, [](const std::string& m) {
    Throw(ErrorCode::kInvalidArgument, "einsum: ", m);
  });
  // Each label's extent: an output label's is its output dim (for the dims under an ellipsis,
  // the broadcast the relation computed); a summed letter's, its dim in any operand that has it
  // (they agree). The parse puts every ellipsis dim in the output.
  const std::vector<loop::Expr> shape = OutShape(ctx, out_types[0]);
  std::vector<loop::Expr> extent(s.num_labels());
  for (size_t j = 0; j < s.output.size(); ++j) extent[s.output[j]] = shape[j];
  for (size_t i = 0; i < in.size(); ++i)
    for (int d = 0; d < in[i].ndim(); ++d)
      if (!extent[s.operands[i][d]]) extent[s.operands[i][d]] = in[i].shape[d];
  const DType dtype = in[0].dtype;
  const DType acc = !IsFloat(dtype)            ? DType::kInt64
                    : dtype == DType::kFloat64 ? DType::kFloat64
                                               : DType::kFloat32;
  auto at = [&ctx, s, in, extent, dtype, acc](const std::vector<loop::Expr>& idx) {
    std::vector<loop::Expr> value(s.num_labels());
    for (size_t j = 0; j < s.output.size(); ++j) value[s.output[j]] = idx[j];
    std::vector<loop::IterVar> axes;
    for (int l : s.reduced) {
      loop::Var v = ctx.NewVar("r");
      value[l] = v;
      axes.push_back(loop::IterVar{v, extent[l]});
    }
    loop::Expr product;
    for (size_t i = 0; i < in.size(); ++i) {
      std::vector<loop::Expr> op_idx;
      for (int d = 0; d < in[i].ndim(); ++d) {
        const int l = s.operands[i][d];
        op_idx.push_back(s.IsEllipsis(l) ? EllipsisIndex(in[i].shape[d], extent[l], value[l])
                                         : value[l]);
      }
      loop::Expr term = loop::Cast(acc, in[i].at(op_idx));
      product = product ? loop::Mul(product, term) : term;
    }
    if (!axes.empty()) product = loop::Reduce(loop::ReduceKind::kSum, product, axes);
    return loop::Cast(dtype, product);
  };
  return {LTensor{dtype, shape, at}};
}

}  // namespace

void RegisterEinsumOps(OpRegistry& r) {
  r.Register(OpDef{
      .name = "einsum",
      .doc = "ONNX Einsum: `equation` names each operand's dims by letters (`...` for "
             "broadcast leading dims) and the output's after `->` (implicit: the letters that "
             "occur once, alphabetically); letters missing from the output are summed over. "
             "Integers accumulate in wrapping i64; compiled f32/f16/bf16 accumulate in f32.",
      .min_inputs = 1,
      .max_inputs = -1,
      .attrs = {{"equation", AttrKind::kString, std::nullopt}},
      .pattern = OpPattern::kOutputFusable,
      .type_rel = EinsumRel,
      .ref_kernel = EinsumKernel,
      .lower = LowerEinsum,
  });
}

}  // namespace kiln
