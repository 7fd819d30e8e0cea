#include "passes/lower_to_loops.h"

#include <cmath>
#include <limits>
#include <unordered_map>

#include "ir/error.h"
#include "ir/loop/loop_text.h"
#include "ir/loop/loop_visitor.h"
#include "ir/type_infer.h"

namespace kiln {

namespace {

using loop::Buffer;
using loop::BufferNode;

// A lowered value: the tensor and whether computing one element is expensive (it contains a
// reduction), which decides whether consumers may inline it.
struct Lowered {
  LTensor t;
  bool expensive = false;
};

class GroupLowerer : public LowerContext {
 public:
  explicit GroupLowerer(std::string name) : name_(std::move(name)) {}

  LoweredKernel Run(const Function& fn) {
    if (!IsComplete(fn->type))
      Throw(ErrorCode::kInvalidArgument, "@", name_, ": lowering needs a typed function");
    LoweredKernel out;
    auto func = std::make_shared<loop::PrimFuncNode>();
    func->name = name_;

    // Parameters become input buffers.
    std::unordered_map<const ExprNode*, std::vector<Lowered>> values;
    for (const Var& p : fn->params) {
      const TensorTypeNode* tt = AsTensor(p->type);
      if (!tt)
        Throw(ErrorCode::kUnsupported, "@", name_, ": parameter %", p->name, " is not a tensor");
      Buffer b = loop::MakeBuffer(p->name.empty() ? "p" : p->name, tt->dtype, ShapeExpr(tt->shape));
      func->buffer_params.push_back(b);
      values[p.get()] = {Lowered{LoadFrom(b), false}};
    }
    out.num_params = static_cast<int>(fn->params.size());

    body_ = fn->body.get();
    std::vector<Expr> order = PostOrder(fn->body);
    for (const Expr& e : order) CountUses(e);

    for (const Expr& e : order) {
      if (values.count(e.get())) continue;
      std::vector<Lowered> v;
      switch (e->kind) {
        case ExprKind::kConstant:
          v.push_back(LowerConstant(AsConstant(e)->value, func.get(), &out));
          break;
        case ExprKind::kTuple:
          for (const Expr& f : AsTuple(e)->fields) v.push_back(values.at(f.get()).at(0));
          break;
        case ExprKind::kTupleGetItem: {
          const TupleGetItemNode* g = AsTupleGetItem(e);
          v.push_back(values.at(g->tuple.get()).at(g->index));
          break;
        }
        case ExprKind::kCall:
          v = LowerCall(e, values);
          break;
        case ExprKind::kVar:
          Throw(ErrorCode::kInvalidArgument, "@", name_, ": variable %", e->name,
                " is not a parameter");
        case ExprKind::kFunction:
          Throw(ErrorCode::kUnsupported, "@", name_, ": nested functions cannot be lowered");
        case ExprKind::kGlobalVar:
        case ExprKind::kConstructor:
        case ExprKind::kMatch:
          Throw(ErrorCode::kUnsupported, "@", name_, ": ", DescribeNode(e),
                " cannot be lowered to loops (module calls, ADTs and matches run on the "
                "interpreter)");
      }
      values[e.get()] = std::move(v);
    }

    // Outputs: one buffer per result tensor, written by one loop nest each.
    std::vector<Lowered> results = values.at(fn->body.get());
    std::vector<Type> out_types;
    if (const TupleTypeNode* tup = AsTuple(fn->body->type)) {
      out_types = tup->fields;
    } else {
      out_types = {fn->body->type};
    }
    KILN_CHECK(out_types.size() == results.size(), "result count");
    func->num_inputs = static_cast<int>(func->buffer_params.size());
    std::vector<loop::Stmt> body = std::move(stmts_);
    for (size_t i = 0; i < results.size(); ++i) {
      const TensorTypeNode* tt = AsTensor(out_types[i]);
      if (!tt) Throw(ErrorCode::kUnsupported, "@", name_, ": result ", i, " is not a tensor");
      Buffer ob = loop::MakeBuffer(StrCat("out", i), tt->dtype, ShapeExpr(tt->shape));
      func->buffer_params.push_back(ob);
      body.push_back(StoreAll(ob, results[i].t));
    }
    std::vector<loop::Stmt> full;
    for (const Buffer& b : locals_) full.push_back(loop::Alloc(b));
    full.insert(full.end(), body.begin(), body.end());
    for (auto it = locals_.rbegin(); it != locals_.rend(); ++it) full.push_back(loop::Free(*it));
    func->body = loop::Seq(std::move(full));
    for (const auto& [sym, var] : symbols_) {
      func->scalar_params.push_back(var);
      out.symbols.push_back(sym);
    }
    out.func = func;
    return out;
  }

  loop::Expr DimExpr(const Dim& d) override {
    return lower::DimToExpr(d, [this](const std::string& s) -> loop::Expr {
      auto it = symbols_.find(s);
      if (it == symbols_.end()) it = symbols_.emplace(s, loop::MakeVar(s)).first;
      return it->second;
    });
  }

  LTensor Materialize(const LTensor& t, const std::string& name) override {
    Buffer b = loop::MakeBuffer(name, t.dtype, t.shape, BufferNode::Scope::kLocal);
    locals_.push_back(b);
    stmts_.push_back(StoreAll(b, t));
    return LoadFrom(b);
  }

  LTensor MaterializeUnless(const LTensor& t, const std::string& name, const loop::Expr& empty,
                            const loop::Expr& fill) override {
    Buffer b = loop::MakeBuffer(name, t.dtype, t.shape, BufferNode::Scope::kLocal);
    locals_.push_back(b);
    // The branch inside the outermost loop (once per batch image, say), which FuseLoops then
    // fuses with the consumer's as it would the plain nest: around the whole nest, it kept the
    // copy a separate pass over the whole batch (a generic conv's first layer, 2 threads: up to
    // 1.7x its time).
    auto store = [&](const std::vector<loop::Expr>& idx, const loop::Expr& value) {
      return loop::Store(b, idx, loop::Cast(t.dtype, value));
    };
    if (t.shape.empty()) {
      stmts_.push_back(loop::IfThenElse(empty, store({}, fill), store({}, t.at({}))));
      return LoadFrom(b);
    }
    const loop::Var outer = NewVar("i");
    const std::vector<loop::Expr> inner(t.shape.begin() + 1, t.shape.end());
    auto nest = [&](bool filled) {
      return LoopNest(inner, [&](const std::vector<loop::Expr>& rest) {
        std::vector<loop::Expr> idx = {outer};
        idx.insert(idx.end(), rest.begin(), rest.end());
        return store(idx, filled ? fill : t.at(idx));
      });
    };
    stmts_.push_back(loop::For(outer, loop::IntImm(0), t.shape[0], loop::ForKind::kSerial,
                               loop::IfThenElse(empty, nest(true), nest(false))));
    return LoadFrom(b);
  }

  LTensor MaterializeFill(DType dtype, const std::vector<loop::Expr>& shape,
                          const std::string& name,
                          const std::function<loop::Stmt(const Buffer&)>& fill) override {
    Buffer b = loop::MakeBuffer(name, dtype, shape, BufferNode::Scope::kLocal);
    locals_.push_back(b);
    stmts_.push_back(fill(b));
    return LoadFrom(b);
  }

  loop::Var NewVar(const std::string& name) override {
    return loop::MakeVar(StrCat(name, next_var_++));
  }

 private:
  static LTensor LoadFrom(const Buffer& b) {
    return LTensor{b->dtype, b->shape,
                   [b](const std::vector<loop::Expr>& idx) { return loop::Load(b, idx); }};
  }

  // Stores every element of `t` into `b` (of t's shape and b's dtype). A boxed tensor
  // (LTensor::box) takes one nest for the box, storing its inner tensor at an offset, and up to
  // two per dim for the border: the slabs before and after the box along dim d, over the box's
  // range in the dims before d and the whole range in the dims after it (each border element
  // once; all of `b` when the box is empty).
  loop::Stmt StoreAll(const Buffer& b, const LTensor& t) {
    const DType dtype = b->dtype;
    if (!t.box) {
      return LoopNest(t.shape, [&](const std::vector<loop::Expr>& idx) {
        return loop::Store(b, idx, loop::Cast(dtype, t.at(idx)));
      });
    }
    const BoxedTensor& box = *t.box;
    const int rank = t.ndim();
    std::vector<loop::Expr> begin(rank), end(rank);  // the box's range along each dim
    for (int d = 0; d < rank; ++d) {
      begin[d] = loop::IntImm(box.lo[d]);
      end[d] = loop::Add(begin[d], box.inner.shape[d]);
    }
    std::vector<loop::Stmt> nests;
    for (int d = 0; d < rank; ++d) {
      for (auto [from, to] :
           {std::pair{loop::IntImm(0), begin[d]}, std::pair{end[d], t.shape[d]}}) {
        int64_t width = -1;
        if (loop::IsConstInt(loop::Sub(to, from), &width) && width == 0) continue;
        std::vector<loop::Expr> first(rank), extent(rank);
        for (int e = 0; e < rank; ++e) {
          if (e < d) {
            first[e] = begin[e];
            extent[e] = box.inner.shape[e];
          } else if (e == d) {
            first[e] = from;
            extent[e] = loop::Sub(to, from);
          } else {
            first[e] = loop::IntImm(0);
            extent[e] = t.shape[e];
          }
        }
        nests.push_back(OffsetNest(first, extent, [&](const std::vector<loop::Expr>& idx) {
          return loop::Store(b, idx, loop::Cast(dtype, box.fill));
        }));
      }
    }
    nests.push_back(LoopNest(box.inner.shape, [&](const std::vector<loop::Expr>& idx) {
      std::vector<loop::Expr> at(rank);
      for (int d = 0; d < rank; ++d) at[d] = loop::Add(idx[d], begin[d]);
      return loop::Store(b, at, loop::Cast(dtype, box.inner.at(idx)));
    }));
    return loop::Seq(std::move(nests));
  }

  // A nest over the box of `extent` at `first`; `body` gets the absolute indices.
  loop::Stmt OffsetNest(const std::vector<loop::Expr>& first, const std::vector<loop::Expr>& extent,
                        const std::function<loop::Stmt(const std::vector<loop::Expr>&)>& body) {
    return LoopNest(extent, [&](const std::vector<loop::Expr>& idx) {
      std::vector<loop::Expr> at(idx.size());
      for (size_t d = 0; d < idx.size(); ++d) at[d] = loop::Add(idx[d], first[d]);
      return body(at);
    });
  }

  loop::Stmt LoopNest(const std::vector<loop::Expr>& shape,
                      const std::function<loop::Stmt(const std::vector<loop::Expr>&)>& body) {
    std::vector<loop::Var> vars;
    std::vector<loop::Expr> idx;
    for (size_t i = 0; i < shape.size(); ++i) {
      vars.push_back(NewVar("i"));
      idx.push_back(vars.back());
    }
    loop::Stmt s = body(idx);
    for (size_t i = shape.size(); i-- > 0;)
      s = loop::For(vars[i], loop::IntImm(0), shape[i], loop::ForKind::kSerial, s);
    return s;
  }

  void CountUses(const Expr& e) {
    auto add = [&](const Expr& x) { uses_[x.get()].push_back(e); };
    if (const CallNode* c = AsCall(e)) {
      for (const Expr& a : c->args) add(a);
    } else if (const TupleNode* t = AsTuple(e)) {
      for (const Expr& f : t->fields) add(f);
    } else if (const TupleGetItemNode* g = AsTupleGetItem(e)) {
      add(g->tuple);
    }
  }

  Lowered LowerConstant(const Tensor& value, loop::PrimFuncNode* func, LoweredKernel* out) {
    if (value.numel() == 1) {
      loop::Expr imm;
      if (IsFloat(value.dtype())) {
        imm = loop::FloatImm(value.GetAsDouble(0), value.dtype());
      } else if (value.dtype() == DType::kInt64) {
        imm = loop::IntImm(value.data<int64_t>()[0], DType::kInt64);
      } else {
        imm = loop::MakeConst(value.GetAsDouble(0), value.dtype());
      }
      std::vector<loop::Expr> shape;
      for (int64_t d : value.shape()) shape.push_back(loop::IntImm(d));
      return Lowered{
          LTensor{value.dtype(), shape, [imm](const std::vector<loop::Expr>&) { return imm; }},
          false};
    }
    std::vector<loop::Expr> shape;
    for (int64_t d : value.shape()) shape.push_back(loop::IntImm(d));
    Buffer b = loop::MakeBuffer(StrCat("c", out->constants.size()), value.dtype(), shape);
    func->buffer_params.push_back(b);
    out->constants.push_back(value);
    return Lowered{LoadFrom(b), false};
  }

  std::vector<Lowered> LowerCall(
      const Expr& e, std::unordered_map<const ExprNode*, std::vector<Lowered>>& values) {
    const CallNode* c = AsCall(e);
    if (!c->op)
      Throw(ErrorCode::kUnsupported, "@", name_, ": ", DescribeNode(e), " calls a function");
    if (!c->op->lower)
      Throw(ErrorCode::kUnsupported, "@", name_, ": op '", c->op->name,
            "' has no lowering to loops yet");
    const TensorTypeNode* out_tt = AsTensor(e->type);
    std::vector<LTensor> inputs;
    bool expensive =
        c->op->pattern == OpPattern::kReduction || c->op->pattern == OpPattern::kOutputFusable;
    for (const Expr& a : c->args) {
      std::vector<Lowered>& av = values.at(a.get());
      KILN_CHECK(av.size() == 1, DescribeNode(e), ": argument is a tuple");
      Lowered& in = av[0];
      if (in.expensive) {
        // Inline an expensive value only into its single elementwise consumer of the same
        // shape; anything else would recompute a reduction per element read.
        const TensorTypeNode* in_tt = AsTensor(a->type);
        bool same_shape = out_tt && in_tt && out_tt->shape == in_tt->shape;
        // A boxing op (a constant pad) that is the kernel's result stores the value straight
        // into its box (StoreAll), at the value's own indices.
        const bool boxes_result =
            e.get() == body_ && c->op->boxes_operand && c->op->boxes_operand(c->attrs);
        bool inline_ok = uses_[a.get()].size() == 1 &&
                         ((c->op->pattern <= OpPattern::kBroadcast && same_shape) || boxes_result);
        if (!inline_ok) {
          in = Lowered{Materialize(in.t, StrCat("t", locals_.size())), false};
        } else {
          expensive = true;
        }
      }
      inputs.push_back(in.t);
    }
    std::vector<Type> out_types;
    if (const TupleTypeNode* tup = AsTuple(e->type)) {
      out_types = tup->fields;
    } else {
      out_types = {e->type};
    }
    std::vector<LTensor> outs;
    try {
      outs = c->op->lower(*this, inputs, c->attrs, out_types);
    } catch (const Error& err) {
      throw Error(err.code(), StrCat("@", name_, ": ", DescribeNode(e), ": ", err.what()));
    }
    std::vector<Lowered> result;
    for (LTensor& t : outs) result.push_back(Lowered{std::move(t), expensive});
    return result;
  }

  std::string name_;
  const ExprNode* body_ = nullptr;  // the function's result
  std::map<std::string, loop::Var> symbols_;
  std::vector<Buffer> locals_;
  std::vector<loop::Stmt> stmts_;
  std::unordered_map<const ExprNode*, std::vector<Expr>> uses_;
  int next_var_ = 0;
};

// ---- LowerReductions ----

loop::Expr Identity(loop::ReduceKind k, DType t) {
  switch (k) {
    case loop::ReduceKind::kSum:
      return loop::MakeConst(0, t);
    case loop::ReduceKind::kProd:
      return loop::MakeConst(1, t);
    case loop::ReduceKind::kMax:
    case loop::ReduceKind::kMaxOrdered:
      if (IsFloat(t)) return loop::FloatImm(-std::numeric_limits<double>::infinity(), t);
      return DispatchDType(t, [&]<typename T>() {
        if constexpr (std::is_integral_v<T>)
          return loop::IntImm(static_cast<int64_t>(std::numeric_limits<T>::lowest()), t);
        return loop::MakeConst(0, t);
      });
    case loop::ReduceKind::kMin:
      if (IsFloat(t)) return loop::FloatImm(std::numeric_limits<double>::infinity(), t);
      return DispatchDType(t, [&]<typename T>() {
        if constexpr (std::is_integral_v<T>)
          return loop::IntImm(static_cast<int64_t>(std::numeric_limits<T>::max()), t);
        return loop::MakeConst(0, t);
      });
  }
  return loop::MakeConst(0, t);
}

loop::Expr Combine(loop::ReduceKind k, loop::Expr acc, loop::Expr v) {
  switch (k) {
    case loop::ReduceKind::kSum:
      return loop::Add(std::move(acc), std::move(v));
    case loop::ReduceKind::kProd:
      return loop::Mul(std::move(acc), std::move(v));
    case loop::ReduceKind::kMax:
      return loop::Max(std::move(acc), std::move(v));
    case loop::ReduceKind::kMaxOrdered: {
      // `v > acc ? v : acc`: a NaN term compares false and is skipped. The JIT recognizes the
      // form (FunctionEmitter::IsAccumulation) and gives it a vector max.
      if (!IsFloat(acc->dtype)) return loop::Max(std::move(acc), std::move(v));
      loop::Expr take = loop::MakeBinary(loop::BinaryOp::kGT, v, acc);
      return loop::Select(std::move(take), std::move(v), std::move(acc));
    }
    case loop::ReduceKind::kMin:
      return loop::Min(std::move(acc), std::move(v));
  }
  return acc;
}

// Replaces each Reduce in an expression by a load of its accumulator, collecting the
// statements that compute the accumulators. Reductions that are structurally equal (the same
// terms over the same free variables, whatever their axes are named) share one accumulator: an
// activation that reads its input several times (hard_swish: x * clip(x / 6 + 0.5)) over a
// matmul or 1x1 conv computes the dot product once.
class ReduceExtractor : public loop::Mutator {
 public:
  std::vector<loop::Stmt> before;
  std::vector<Buffer> accumulators;
  int* counter;
  explicit ReduceExtractor(int* c) : counter(c) {}

 protected:
  loop::Expr MutateReduce(const loop::ReduceNode* r, const loop::Expr& self) override {
    for (const auto& [reduce, load] : lowered_)
      if (loop::StructuralEqual(reduce, self)) return load;
    Buffer acc = loop::MakeBuffer(StrCat("acc", (*counter)++), r->dtype, {loop::IntImm(1)},
                                  BufferNode::Scope::kLocal);
    accumulators.push_back(acc);
    std::vector<loop::Expr> zero{loop::IntImm(0)};
    before.push_back(loop::Store(acc, zero, Identity(r->combiner, r->dtype)));
    // The source may itself hold reductions: lower them inside the update loop.
    loop::Stmt update = LowerStore(
        loop::Store(acc, zero, Combine(r->combiner, loop::Load(acc, zero), r->source)), counter);
    for (size_t i = r->axes.size(); i-- > 0;)
      update = loop::For(r->axes[i].var, loop::IntImm(0), r->axes[i].extent, loop::ForKind::kSerial,
                         update);
    before.push_back(update);
    lowered_.emplace_back(self, loop::Load(acc, zero));
    return lowered_.back().second;
  }

 private:
  std::vector<std::pair<loop::Expr, loop::Expr>> lowered_;  // each Reduce and its accumulator

 public:
  static loop::Stmt LowerStore(const loop::Stmt& s, int* counter) {
    const loop::StoreNode* st = loop::AsStore(s);
    ReduceExtractor ex(counter);
    loop::Expr value = ex.MutateExpr(st->value);
    if (ex.accumulators.empty()) return s;
    std::vector<loop::Stmt> seq;
    for (const Buffer& b : ex.accumulators) seq.push_back(loop::Alloc(b));
    seq.insert(seq.end(), ex.before.begin(), ex.before.end());
    seq.push_back(loop::Store(st->buffer, st->indices, value));
    for (auto it = ex.accumulators.rbegin(); it != ex.accumulators.rend(); ++it)
      seq.push_back(loop::Free(*it));
    return loop::Seq(std::move(seq));
  }
};

class ReductionLowerer : public loop::Mutator {
 public:
  int counter = 0;

 protected:
  loop::Stmt MutateStore(const loop::StoreNode*, const loop::Stmt& self) override {
    return ReduceExtractor::LowerStore(self, &counter);
  }
};

}  // namespace

LoweredKernel LowerToLoops(const Function& fn, const std::string& name) {
  GroupLowerer lowerer(name);
  return lowerer.Run(fn);
}

loop::PrimFunc LowerReductions(const loop::PrimFunc& f) {
  ReductionLowerer m;
  loop::Stmt body = m.MutateStmt(f->body);
  if (body == f->body) return f;
  return loop::WithBody(f, body);
}

}  // namespace kiln
