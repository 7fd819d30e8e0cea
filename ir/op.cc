#include "ir/op.h"

#include <algorithm>
#include <atomic>

#include "ir/error.h"

namespace kiln {

#define KILN_OP_FAMILY(F) void Register##F##Ops(OpRegistry& r);
#include "ir/ops/ops.def"
#undef KILN_OP_FAMILY

const char* OpPatternName(OpPattern p) {
  switch (p) {
    case OpPattern::kElementwise:
      return "elementwise";
    case OpPattern::kBroadcast:
      return "broadcast";
    case OpPattern::kInjective:
      return "injective";
    case OpPattern::kReduction:
      return "reduction";
    case OpPattern::kOutputFusable:
      return "output-fusable";
    case OpPattern::kOpaque:
      return "opaque";
  }
  return "?";
}

std::string DimConstraint::ToString() const {
  if (kind == Kind::kEqual) return where + ": " + a.ToString() + " == " + b.ToString();
  if (kind == Kind::kAtMost) return where + ": " + a.ToString() + " <= " + b.ToString();
  return where + ": " + a.ToString() + " and " + b.ToString() + " must broadcast";
}

const TensorTypeNode& TypeRelContext::tensor(int i) const {
  const TensorTypeNode* t = AsTensor(args_.at(i));
  if (!t) Fail(StrCat("argument ", i, " must be a tensor, got ", TypeToString(args_[i])));
  return *t;
}

void TypeRelContext::Fail(const std::string& message) const {
  throw Error(ErrorCode::kTypeError, message);
}

void TypeRelContext::AssertEqual(const Dim& a, const Dim& b, const std::string& what) {
  if (a == b) return;
  Dim diff = a - b;
  if (diff.is_const()) Fail(StrCat(what, ": ", a.ToString(), " != ", b.ToString()));
  if (constraints_)
    constraints_->push_back({DimConstraint::Kind::kEqual, a, b, where_ + ", " + what});
}

void TypeRelContext::AssertAtMost(const Dim& a, const Dim& b, const std::string& what) {
  Dim slack = b - a;
  if (slack.is_const()) {
    if (slack.value() < 0) Fail(StrCat(what, ": ", a.ToString(), " > ", b.ToString()));
    return;
  }
  if (constraints_)
    constraints_->push_back({DimConstraint::Kind::kAtMost, a, b, where_ + ", " + what});
}

Dim TypeRelContext::BroadcastDim(const Dim& a, const Dim& b, const std::string& what) {
  if (a == b) return a;
  if (a.is_const() && a.value() == 1) return b;
  if (b.is_const() && b.value() == 1) return a;
  if (a.is_const() && b.is_const()) Fail(StrCat(what, ": ", a.ToString(), " vs ", b.ToString()));
  if (constraints_)
    constraints_->push_back({DimConstraint::Kind::kBroadcast, a, b, where_ + ", " + what});
  // Valid bindings make a == b, or one of them 1: in each case the result is the larger.
  if (a.is_const()) return a;
  if (b.is_const()) return b;
  return Max(a, b);
}

Shape TypeRelContext::BroadcastShapes(const Shape& a, const Shape& b) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    // Align from the right, as NumPy does.
    Dim da = i < n - a.size() ? Dim(1) : a[i - (n - a.size())];
    Dim db = i < n - b.size() ? Dim(1) : b[i - (n - b.size())];
    out[i] = BroadcastDim(da, db,
                          StrCat("cannot broadcast ", ShapeToString(a), " and ", ShapeToString(b)));
  }
  return out;
}

Dim TypeRelContext::UnknownDim() {
  static std::atomic<int64_t> next{0};
  return Dim::Symbol(StrCat("_v", next.fetch_add(1, std::memory_order_relaxed)));
}

bool TypeRelContext::IsUnknownDim(const Dim& d) {
  return d.is_symbol() && d.name().size() > 2 && d.name().compare(0, 2, "_v") == 0;
}

// Rank 0 accepts axis 0 or -1 and returns it as is, for ops that treat a scalar whole: a
// caller that indexes the shape with the result must refuse rank 0 first.
int TypeRelContext::NormalizeAxis(int64_t axis, int rank, const std::string& what) const {
  if (axis < -rank || axis >= std::max(rank, 1)) {
    if (!(rank == 0 && (axis == 0 || axis == -1)))
      Fail(StrCat(what, " ", axis, " is out of range for rank ", rank));
  }
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

OpRegistry& OpRegistry::Global() {
  static OpRegistry* registry = [] {
    auto* r = new OpRegistry();  // never destroyed: OpDef pointers outlive static teardown
#define KILN_OP_FAMILY(F) Register##F##Ops(*r);
#include "ir/ops/ops.def"
#undef KILN_OP_FAMILY
    return r;
  }();
  return *registry;
}

const OpDef* OpRegistry::Register(OpDef def) {
  std::lock_guard<std::mutex> lock(mu_);
  if (def.name.empty()) Throw(ErrorCode::kInvalidArgument, "op registration: the op has no name");
  if (ops_.count(def.name))
    Throw(ErrorCode::kInvalidArgument, "op '", def.name, "' is already registered");
  if (!def.type_rel) Throw(ErrorCode::kInvalidArgument, "op '", def.name, "' has no type relation");
  auto owned = std::make_unique<OpDef>(std::move(def));
  const OpDef* p = owned.get();
  ops_.emplace(p->name, std::move(owned));
  return p;
}

const OpDef* OpRegistry::Find(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = ops_.find(name);
  return it == ops_.end() ? nullptr : it->second.get();
}

const OpDef& OpRegistry::Get(const std::string& name) const {
  const OpDef* op = Find(name);
  if (!op) Throw(ErrorCode::kNotFound, "unknown op '", name, "'");
  return *op;
}

std::vector<std::string> OpRegistry::Names() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> names;
  for (const auto& [name, op] : ops_) names.push_back(name);
  return names;
}

namespace {

// Converts `v` to `kind` where the conversion loses nothing; false otherwise.
bool CoerceAttr(AttrValue& v, AttrKind kind) {
  AttrKind have = KindOf(v);
  if (have == kind) return true;
  if (kind == AttrKind::kFloat && have == AttrKind::kInt) {
    v = static_cast<double>(std::get<int64_t>(v));
    return true;
  }
  if (kind == AttrKind::kFloats && have == AttrKind::kInts) {
    const auto& xs = std::get<std::vector<int64_t>>(v);
    v = std::vector<double>(xs.begin(), xs.end());
    return true;
  }
  if (kind == AttrKind::kInts && have == AttrKind::kFloats &&
      std::get<std::vector<double>>(v).empty()) {
    v = std::vector<int64_t>{};
    return true;
  }
  if (kind == AttrKind::kBool && have == AttrKind::kInt) {
    int64_t i = std::get<int64_t>(v);
    if (i != 0 && i != 1) return false;
    v = i == 1;
    return true;
  }
  return false;
}

}  // namespace

Attrs NormalizeAttrs(const OpDef& op, const Attrs& given) {
  Attrs out;
  for (const auto& [name, value] : given.values()) {
    auto spec = std::find_if(op.attrs.begin(), op.attrs.end(),
                             [&](const AttrSpec& s) { return s.name == name; });
    if (spec == op.attrs.end()) {
      std::string known;
      for (const AttrSpec& s : op.attrs) {
        if (!known.empty()) known += ", ";
        known += s.name;
      }
      Throw(ErrorCode::kInvalidArgument, "op '", op.name, "' has no attribute '", name,
            "' (known: ", known.empty() ? "none" : known, ")");
    }
    AttrValue v = value;
    if (!CoerceAttr(v, spec->kind))
      Throw(ErrorCode::kInvalidArgument, "op '", op.name, "': attribute '", name, "' must be ",
            AttrKindName(spec->kind), ", got ", AttrKindName(KindOf(value)), " ",
            AttrValueToString(value));
    if (spec->check) {
      std::string msg = spec->check(v);
      if (!msg.empty())
        Throw(ErrorCode::kInvalidArgument, "op '", op.name, "': attribute '", name,
              "' = ", AttrValueToString(v), ": ", msg);
    }
    out.Set(name, std::move(v));
  }
  for (const AttrSpec& s : op.attrs) {
    if (out.Has(s.name)) continue;
    if (!s.default_value)
      Throw(ErrorCode::kInvalidArgument, "op '", op.name, "': required attribute '", s.name,
            "' is missing");
    out.Set(s.name, *s.default_value);
  }
  return out;
}

Type TypeOfTensor(const Tensor& t) {
  return TensorType(ShapeFromInts(t.shape()), t.dtype());
}

Type InferOpType(const std::string& op_name, const std::vector<Type>& arg_types, const Attrs& attrs,
                 std::vector<DimConstraint>* constraints) {
  const OpDef& op = OpRegistry::Global().Get(op_name);
  int n = static_cast<int>(arg_types.size());
  if (n < op.min_inputs || (op.max_inputs >= 0 && n > op.max_inputs))
    Throw(ErrorCode::kTypeError, op.name, ": expects ", op.min_inputs,
          op.max_inputs == op.min_inputs
              ? ""
              : (op.max_inputs < 0 ? " or more" : StrCat(" to ", op.max_inputs)),
          " inputs, got ", n);
  Attrs normalized = NormalizeAttrs(op, attrs);
  TypeRelContext ctx(arg_types, normalized, op.name, constraints);
  try {
    return op.type_rel(ctx);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::kTypeError) throw;
    throw Error(ErrorCode::kTypeError, StrCat(op.name, ": ", e.what()));
  }
}

std::vector<Tensor> RunOpReference(const std::string& op_name, const std::vector<Tensor>& inputs,
                                   const Attrs& attrs) {
  const OpDef& op = OpRegistry::Global().Get(op_name);
  std::vector<Type> types;
  for (const Tensor& t : inputs) types.push_back(TypeOfTensor(t));
  Type out_type = InferOpType(op_name, types, attrs);
  std::vector<Tensor> outputs;
  auto alloc = [&](const Type& t) {
    const TensorTypeNode* tt = AsTensor(t);
    if (tt && op.data_dependent_shape && !IsConstShape(tt->shape)) {
      outputs.emplace_back();  // the kernel allocates it
      return;
    }
    KILN_CHECK(tt && IsConstShape(tt->shape), op_name, ": output type ", TypeToString(t),
               " is not a concrete tensor");
    outputs.push_back(Tensor::Empty(tt->dtype, ConstShape(tt->shape)));
  };
  if (const TupleTypeNode* tup = AsTuple(out_type)) {
    for (const Type& f : tup->fields) alloc(f);
  } else {
    alloc(out_type);
  }
  if (!op.ref_kernel) Throw(ErrorCode::kUnsupported, "op '", op_name, "' has no reference kernel");
  op.ref_kernel(inputs, NormalizeAttrs(op, attrs), outputs);
  for (size_t i = 0; i < outputs.size(); ++i)
    KILN_CHECK(outputs[i].defined(), op_name, ": the kernel left output ", i, " unallocated");
  return outputs;
}

}  // namespace kiln
