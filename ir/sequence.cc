#include "ir/sequence.h"

#include <algorithm>

#include "ir/dynamic.h"
#include "ir/error.h"
#include "ir/type_infer.h"

namespace kiln {

namespace {

// The Shape variable that stands for "no element yet" (NoElementYet): never a type parameter
// of any function, so it cannot be confused with one.
constexpr char kNoElement[] = "_";

bool StartsWith(const std::string& s, const char* prefix) {
  return s.rfind(prefix, 0) == 0;
}

}  // namespace

bool IsSequenceOp(const OpDef* op) {
  return op && (StartsWith(op->name, "seq.") || StartsWith(op->name, "dyn.seq."));
}

Type SequenceType(Type element) {
  return TypeCall(ListAdt()->name, {std::move(element)});
}

const TensorTypeNode* SequenceElement(const Type& t) {
  const TypeCallNode* c = AsTypeCall(t);
  if (!c || c->adt != ListAdt()->name || c->args.size() != 1) return nullptr;
  return AsTensor(c->args[0]);
}

Type NoElementYet(DType dtype) {
  return TensorTypeOf(TypeVar(kNoElement, ParamKind::kShape), nullptr, {}, dtype);
}

bool IsNoElementYet(const TensorTypeNode& t) {
  const TypeVarNode* v = AsTypeVar(t.shape_var);
  return v && v->name == kNoElement;
}

std::string JoinElements(const TensorTypeNode& a, const TensorTypeNode& b, Type* out) {
  auto str = [](const TensorTypeNode& t) {
    return IsNoElementYet(t) ? StrCat(DTypeName(t.dtype), "[no element]")
                             : TypeToString(TensorType(t.shape, t.dtype));
  };
  if (a.dtype != b.dtype) return StrCat("elements of different dtypes: ", str(a), " and ", str(b));
  if (IsNoElementYet(a)) {
    *out = TensorType(b.shape, b.dtype);
    if (IsNoElementYet(b)) *out = NoElementYet(b.dtype);
    return "";
  }
  if (IsNoElementYet(b)) {
    *out = TensorType(a.shape, a.dtype);
    return "";
  }
  if (a.ndim() != b.ndim())
    return StrCat("elements of different ranks: ", str(a), " and ", str(b),
                  " (kiln needs one rank per sequence)");
  Shape s = a.shape;
  for (int i = 0; i < a.ndim(); ++i)
    if (!(a.shape[i] == b.shape[i])) s[i] = TypeRelContext::UnknownDim();
  *out = TensorType(std::move(s), a.dtype);
  return "";
}

namespace {

// The elements of the sequence argument `arg` of `e`, which resolution has made a Tuple.
const std::vector<Expr>& Elements(const Expr& e, const Expr& arg) {
  const TupleNode* t = AsTuple(arg);
  if (!t)
    Throw(ErrorCode::kUnsupported, DescribeNode(e),
          ": its sequence is not known at specialization (it comes from ", DescribeNode(arg),
          "); kiln resolves every sequence from shapes and shape inputs");
  return t->fields;
}

// A position attribute ([] when absent, else one value) in [-n, n - 1], or [-n, n] where
// `past_end` (an insert), normalized; `absent` when none was given.
int64_t Position(const Expr& e, const Attrs& attrs, int64_t n, bool past_end, int64_t absent) {
  const std::vector<int64_t>& p = attrs.GetInts("position");
  if (p.empty()) return absent;
  if (p.size() != 1)
    Throw(ErrorCode::kInvalidArgument, DescribeNode(e), ": the position must be one value, got ",
          p.size());
  const int64_t hi = past_end ? n : n - 1;
  if (p[0] < -n || p[0] > hi)
    Throw(ErrorCode::kInvalidArgument, DescribeNode(e), ": position ", p[0],
          " is out of range for a sequence of ", n, " elements (allowed: [", -n, ", ", hi, "])");
  return p[0] < 0 ? p[0] + n : p[0];
}

// Slices [start, end) of `x` along `axis`, each squeezed there where `squeeze`.
Expr Pieces(const Expr& x, int64_t axis, const std::vector<int64_t>& sizes, bool squeeze,
            const std::string& name) {
  std::vector<Expr> parts;
  int64_t start = 0;
  for (int64_t size : sizes) {
    Expr part = MakeCall("slice", {x},
                         Attrs{{"starts", std::vector<int64_t>{start}},
                               {"ends", std::vector<int64_t>{start + size}},
                               {"axes", std::vector<int64_t>{axis}}},
                         name);
    if (squeeze)
      part = MakeCall("squeeze", {part}, Attrs{{"axes", std::vector<int64_t>{axis}}}, name);
    parts.push_back(std::move(part));
    start += size;
  }
  return MakeTuple(std::move(parts));
}

Expr Split(const Expr& e, const OpDef& op, const Expr& x, const Type& x_type, const Attrs& attrs) {
  const TensorTypeNode* t = AsTensor(x_type);
  if (!t || !IsConstShape(t->shape))
    Throw(ErrorCode::kUnsupported, DescribeNode(e), ": the shape of the tensor it splits is ",
          x_type ? TypeToString(x_type) : std::string("unknown"), " at specialization");
  if (t->ndim() == 0)
    Throw(ErrorCode::kInvalidArgument, DescribeNode(e), ": cannot split a scalar");
  const std::vector<int64_t> shape = ConstShape(t->shape);
  int64_t axis = attrs.GetInt("axis");
  if (axis < -t->ndim() || axis >= t->ndim())
    Throw(ErrorCode::kInvalidArgument, DescribeNode(e), ": axis ", axis,
          " is out of range for rank ", t->ndim());
  if (axis < 0) axis += t->ndim();
  const int64_t dim = shape[axis];
  std::vector<int64_t> sizes;
  bool squeeze = false;
  if (op.name == "seq.split") {
    sizes.assign(std::min(dim, kMaxUnrolledIterations + 1), 1);
    squeeze = attrs.GetInt("keepdims") == 0;
  } else if (op.name == "seq.split_chunk") {
    const int64_t chunk = attrs.GetInt("chunk");
    if (chunk <= 0)
      Throw(ErrorCode::kInvalidArgument, DescribeNode(e), ": the split size ", chunk,
            " must be positive");
    for (int64_t at = 0; at < dim && static_cast<int64_t>(sizes.size()) <= kMaxUnrolledIterations;
         at += chunk)
      sizes.push_back(std::min(chunk, dim - at));
  } else {
    sizes = attrs.GetInts("split");
    int64_t sum = 0;
    for (int64_t s : sizes) {
      if (s < 0 || s > dim - sum)
        Throw(ErrorCode::kInvalidArgument, DescribeNode(e), ": split ", IntsToString(sizes),
              " does not sum to axis ", axis, "'s size ", dim);
      sum += s;
    }
    if (sum != dim)
      Throw(ErrorCode::kInvalidArgument, DescribeNode(e), ": split ", IntsToString(sizes),
            " sums to ", sum, ", not to axis ", axis, "'s size ", dim);
  }
  // Each piece is a slice that is compiled: as many as a loop unrolls at most.
  if (static_cast<int64_t>(sizes.size()) > kMaxUnrolledIterations)
    Throw(ErrorCode::kUnsupported, DescribeNode(e), ": it makes ", sizes.size(),
          " pieces, more than the ", kMaxUnrolledIterations, " kiln resolves at specialization");
  return Pieces(x, axis, sizes, squeeze, e->name);
}

Expr Concat(const Expr& e, const std::vector<Expr>& elements,
            const std::vector<Type>& element_types, const Attrs& attrs) {
  if (elements.empty())
    Throw(ErrorCode::kInvalidArgument, DescribeNode(e),
          ": cannot concatenate an empty sequence (its result would have no shape)");
  const TensorTypeNode* first = AsTensor(element_types.at(0));
  if (!first)
    Throw(ErrorCode::kUnsupported, DescribeNode(e),
          ": the type of the first element is unknown at specialization");
  const bool stack = attrs.GetInt("new_axis") != 0;
  const int64_t rank = first->ndim() + (stack ? 1 : 0);
  int64_t axis = attrs.GetInt("axis");
  if (axis < -rank || axis >= rank || rank == 0)
    Throw(ErrorCode::kInvalidArgument, DescribeNode(e), ": axis ", axis,
          " is out of range for elements of rank ", first->ndim(),
          stack ? " stacked along a new axis" : "");
  if (axis < 0) axis += rank;
  if (stack) return StackIterations(elements, axis, e->name);
  return MakeCall("concat", elements, Attrs{{"axis", axis}}, e->name);
}

}  // namespace

Expr ResolveSequenceCall(const Expr& e, const OpDef& op, const std::vector<Expr>& args,
                         const std::vector<Type>& arg_types, const Attrs& attrs) {
  if (!op.static_op.empty())  // a dyn.seq.* whose value argument did not become a constant
    Throw(ErrorCode::kUnsupported, DescribeNode(e), ": its ", op.value_attrs.at(0),
          " is computed from input data, not from shapes or shape inputs, "
          "so the sequence is not known at specialization");
  const std::string& name = op.name;
  if (name == "seq.construct") return MakeTuple(args);
  if (name == "seq.empty") return MakeTuple({});
  if (name == "seq.split" || name == "seq.split_chunk" || name == "seq.split_sizes")
    return Split(e, op, args.at(0), arg_types.at(0), attrs);

  const std::vector<Expr>& elements = Elements(e, args.at(0));
  const int64_t n = static_cast<int64_t>(elements.size());
  if (name == "seq.length") return MakeConstant(Tensor::Scalar<int64_t>(n), e->name);
  if (name == "seq.at") {
    if (n == 0)
      Throw(ErrorCode::kInvalidArgument, DescribeNode(e), ": reading from an empty sequence");
    return elements.at(Position(e, attrs, n, false, n - 1));
  }
  if (name == "seq.insert") {
    std::vector<Expr> now = elements;
    now.insert(now.begin() + Position(e, attrs, n, true, n), args.at(1));
    return MakeTuple(std::move(now));
  }
  if (name == "seq.erase") {
    if (n == 0)
      Throw(ErrorCode::kInvalidArgument, DescribeNode(e), ": erasing from an empty sequence");
    std::vector<Expr> now = elements;
    now.erase(now.begin() + Position(e, attrs, n, false, n - 1));
    return MakeTuple(std::move(now));
  }
  if (name == "seq.concat") {
    const TupleTypeNode* tt = AsTuple(arg_types.at(0));
    std::vector<Type> types(elements.size());
    if (tt && tt->fields.size() == elements.size()) types = tt->fields;
    return Concat(e, elements, types, attrs);
  }
  Throw(ErrorCode::kInternal, DescribeNode(e), ": no resolution for sequence op ", name);
}

}  // namespace kiln
