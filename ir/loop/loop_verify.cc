// The loop IR verifier: the checks code generators rely on instead of repeating them.
//
// Every message reads `@<function>: <statement> <name>: <problem>`, e.g.
// `@f: Store out: index 16 is out of range for dim 1 of 'out' (extent 16)`, where <statement> is
// the kind of the innermost statement being checked (`func` and `parameter` for the signature).
//
// The rules, beyond those stated in loop_text.h:
//  - Scope: scalar parameters are defined everywhere; a loop, let, reduction axis or block
//    iter_var defines its variable in its body only. Rebinding a variable that is already in
//    scope is an error: code generators map each variable to one value at a time.
//  - Buffers: parameters are accessible everywhere. An Alloc makes its buffer accessible until
//    its Free or the end of the statement list (Seq, or single statement body) containing the
//    Alloc, whichever comes first; an access after the Free is reported as such. Allocating a
//    parameter or a live buffer, and freeing a buffer that is not live, are errors. Stores to an
//    input (buffer_params[0, num_inputs)) are errors: inputs are read-only.
//  - Index count: one index per dim (none for a rank-0 buffer), or a single flat element offset
//    when the buffer has explicit strides (what buffer flattening produces). A rank-1 buffer
//    takes one index either way.
//  - Types: indices, loop bounds, extents and ramp bases are i64 scalars (index arithmetic is
//    i64); a loop's, axis's or iter_var's variable is i64; binary operands agree in dtype and
//    lanes, `&&`/`||`/`!`/select conditions are bool, `//` and `%` take integers; a node's own
//    dtype and lanes are the ones its constructor helper would give it; a store's value has the
//    buffer's dtype and as many lanes as its indices.
//  - Static bounds: a constant index (or the first and last lane of a ramp with a constant base)
//    into a dim of constant extent must lie in [0, extent); a flat index is checked against the
//    buffer's span when shape and strides are all constant.
#include <unordered_set>

#include "ir/error.h"
#include "ir/loop/loop_text.h"

namespace kiln::loop {

namespace {

class Verifier {
 public:
  Verifier(const PrimFuncNode* f, bool allow_reduce) : f_(f), allow_reduce_(allow_reduce) {}

  void Run() {
    context_ = "func";
    if (f_->num_inputs < 0 || f_->num_inputs > static_cast<int>(f_->buffer_params.size()))
      Fail("num_inputs ", f_->num_inputs, " is outside [0, ", f_->buffer_params.size(), "]");
    for (const Var& v : f_->scalar_params) {
      if (!v) Fail("null scalar parameter");
      context_ = "parameter " + v->name;
      if (defined_.count(v.get())) Fail("scalar parameter '", v->name, "' appears twice");
      defined_.insert(v.get());
    }
    for (size_t i = 0; i < f_->buffer_params.size(); ++i) {
      const Buffer& b = f_->buffer_params[i];
      context_ = "func";
      if (!b) Fail("buffer parameter ", i, " is null");
      context_ = "parameter %" + b->name;
      if (!params_.insert(b.get()).second) Fail("buffer '", b->name, "' appears twice");
      if (static_cast<int>(i) < f_->num_inputs) inputs_.insert(b.get());
      CheckBufferDecl(b);
    }
    context_ = "func";
    if (!f_->body) Fail("body is null");
    CheckList(f_->body);
  }

 private:
  template <typename... Parts>
  [[noreturn]] void Fail(const Parts&... parts) {
    Throw(ErrorCode::kInvalidArgument, "@", f_->name, ": ", context_, ": ", parts...);
  }

  // The statement being checked names the error; nested statements restore it when done.
  class Context {
   public:
    Context(Verifier* v, std::string text) : v_(v), saved_(std::move(v->context_)) {
      v_->context_ = std::move(text);
    }
    ~Context() { v_->context_ = std::move(saved_); }

   private:
    Verifier* v_;
    std::string saved_;
  };

  static std::string TypeText(const Expr& e) {
    std::string s(DTypeName(e->dtype));
    if (e->lanes != 1) s += "x" + std::to_string(e->lanes);
    return s;
  }

  // Checks `e` and that it is an i64 scalar; `what` names it in the message.
  void CheckIndexExpr(const Expr& e, const std::string& what) {
    if (!e) Fail(what, " is null");
    CheckExpr(e);
    if (e->dtype != DType::kInt64 || e->lanes != 1)
      Fail(what, " has type ", TypeText(e), "; index arithmetic is i64");
  }

  void CheckBufferDecl(const Buffer& b) {
    for (size_t d = 0; d < b->shape.size(); ++d)
      CheckIndexExpr(b->shape[d], "shape dim " + std::to_string(d) + " of '" + b->name + "'");
    if (!b->strides.empty() && b->strides.size() != b->shape.size())
      Fail("'", b->name, "' has ", b->strides.size(), " strides for rank ", b->shape.size());
    for (size_t d = 0; d < b->strides.size(); ++d)
      CheckIndexExpr(b->strides[d], "stride " + std::to_string(d) + " of '" + b->name + "'");
  }

  void Bind(const Var& v, const char* what) {
    if (!v) Fail(what, " variable is null");
    if (!defined_.insert(v.get()).second)
      Fail("variable '", v->name, "' is defined again inside its own scope");
  }

  void BindIndexVar(const Var& v, const char* what) {
    Bind(v, what);
    if (v->dtype != DType::kInt64 || v->lanes != 1)
      Fail(what, " variable '", v->name, "' has type ", TypeText(v), "; it must be i64");
  }

  void CheckAccessible(const Buffer& b) {
    if (params_.count(b.get()) || live_.count(b.get())) return;
    if (freed_.count(b.get())) Fail("buffer '", b->name, "' is used after its Free");
    Fail("buffer '", b->name, "' is neither a parameter nor allocated here");
  }

  // Checks an access to `b` and returns the number of lanes its indices give.
  int CheckAccess(const Buffer& b, const std::vector<Expr>& indices, bool store) {
    if (!b) Fail("access to a null buffer");
    CheckAccessible(b);
    if (store && inputs_.count(b.get()))
      Fail("stores to '", b->name, "', an input, which is read-only");
    size_t rank = b->shape.size();
    bool flat = indices.size() == 1 && !b->strides.empty() && rank != 1;
    if (indices.size() != rank && !flat)
      Fail("'", b->name, "' has rank ", rank, " but is accessed with ", indices.size(), " indices");
    int lanes = 1;
    for (size_t i = 0; i < indices.size(); ++i) {
      const Expr& e = indices[i];
      std::string what = "index " + std::to_string(i) + " of '" + b->name + "'";
      if (!e) Fail(what, " is null");
      CheckExpr(e);
      if (e->dtype != DType::kInt64)
        Fail(what, " has type ", TypeText(e), "; index arithmetic is i64");
      lanes = std::max(lanes, e->lanes);
    }
    for (size_t i = 0; i < indices.size(); ++i) {
      if (indices[i]->lanes != 1 && indices[i]->lanes != lanes)
        Fail("indices of '", b->name, "' have different lane counts");
    }
    if (flat) {
      CheckFlatBounds(b, indices[0]);
    } else {
      for (size_t d = 0; d < rank; ++d) CheckDimBounds(b, d, indices[d]);
    }
    return lanes;
  }

  // The constant values an index takes, if known: its value, or a ramp's first and last lane.
  static bool ConstIndexRange(const Expr& e, int64_t* lo, int64_t* hi) {
    if (IsConstInt(e, lo)) {
      *hi = *lo;
      return true;
    }
    const RampNode* r = AsRamp(e);
    int64_t base, span, last;
    if (!r || !IsConstInt(r->base, &base) ||
        __builtin_mul_overflow(r->stride, static_cast<int64_t>(r->lanes - 1), &span) ||
        __builtin_add_overflow(base, span, &last))
      return false;
    *lo = std::min(base, last);
    *hi = std::max(base, last);
    return true;
  }

  void CheckDimBounds(const Buffer& b, size_t d, const Expr& index) {
    int64_t extent, lo, hi;
    if (!IsConstInt(b->shape[d], &extent) || !ConstIndexRange(index, &lo, &hi)) return;
    int64_t bad = lo < 0 ? lo : hi;
    if (lo < 0 || hi >= extent)
      Fail("index ", bad, " is out of range for dim ", d, " of '", b->name, "' (extent ", extent,
           ")");
  }

  void CheckFlatBounds(const Buffer& b, const Expr& index) {
    int64_t lo, hi;
    if (!ConstIndexRange(index, &lo, &hi)) return;
    // The span is one past the largest offset any in-shape index reaches.
    int64_t span = 1;
    for (size_t d = 0; d < b->shape.size(); ++d) {
      int64_t n, stride, reach;
      if (!IsConstInt(b->shape[d], &n) || !IsConstInt(b->strides[d], &stride)) return;
      if (n == 0) {
        span = 0;
        break;
      }
      if (__builtin_mul_overflow(n - 1, stride, &reach) ||
          __builtin_add_overflow(span, reach, &span))
        return;
    }
    int64_t bad = lo < 0 ? lo : hi;
    if (lo < 0 || hi >= span)
      Fail("flat index ", bad, " is out of range for '", b->name, "' (", span, " elements)");
  }

  // A statement list: its Allocs end with it.
  void CheckList(const Stmt& s) {
    allocs_.emplace_back();
    if (const SeqNode* seq = AsSeq(s)) {
      CheckSeq(seq, s);
    } else {
      CheckStmt(s);
    }
    for (const BufferNode* b : allocs_.back()) live_.erase(b);
    allocs_.pop_back();
  }

  void CheckBody(const Stmt& s, const char* what) {
    if (!s) Fail(what, " is null");
    CheckList(s);
  }

  void CheckStmt(const Stmt& s) {
    switch (s->kind) {
#define KILN_LOOP_STMT(N) \
  case StmtKind::k##N:    \
    return Check##N(static_cast<const N##Node*>(s.get()), s);
#include "ir/loop/loop_nodes.def"
    }
    Fail("unknown statement kind ", static_cast<int>(s->kind));
  }

  void CheckExpr(const Expr& e) {
    if (!e) Fail("null expression");
    switch (e->kind) {
#define KILN_LOOP_EXPR(N) \
  case ExprKind::k##N:    \
    return Check##N(static_cast<const N##Node*>(e.get()), e);
#include "ir/loop/loop_nodes.def"
    }
    Fail("unknown expression kind ", static_cast<int>(e->kind));
  }

  // ---- expressions ----

  void CheckIntImm(const IntImmNode* n, const Expr& e) {
    if (IsFloat(n->dtype) || n->lanes != 1)
      Fail("integer immediate ", n->value, " has type ", TypeText(e));
  }
  void CheckFloatImm(const FloatImmNode* n, const Expr& e) {
    if (!IsFloat(n->dtype) || n->lanes != 1)
      Fail("float immediate ", n->value, " has type ", TypeText(e));
  }
  void CheckVar(const VarNode* n, const Expr&) {
    if (!defined_.count(n)) Fail("variable '", n->name, "' is used but not defined");
  }
  void CheckBinary(const BinaryNode* n, const Expr& e) {
    const char* op = BinaryOpName(n->op);
    if (!n->a || !n->b) Fail("'", op, "' has a null operand");
    CheckExpr(n->a);
    CheckExpr(n->b);
    if (n->a->dtype != n->b->dtype || n->a->lanes != n->b->lanes)
      Fail("operands of '", op, "' differ: ", TypeText(n->a), " vs ", TypeText(n->b), " in ",
           Print(e));
    bool logical = n->op == BinaryOp::kAnd || n->op == BinaryOp::kOr;
    if (logical && n->a->dtype != DType::kBool)
      Fail("'", op, "' needs bool operands, got ", TypeText(n->a));
    bool integral = n->op == BinaryOp::kFloorDiv || n->op == BinaryOp::kFloorMod;
    if (integral && !IsInteger(n->a->dtype))
      Fail("'", op, "' needs integer operands, got ", TypeText(n->a));
    DType expect = IsComparison(n->op) ? DType::kBool : n->a->dtype;
    if (n->dtype != expect || n->lanes != n->a->lanes)
      Fail("'", op, "' of ", TypeText(n->a), " operands is labeled ", TypeText(e));
  }
  void CheckNot(const NotNode* n, const Expr& e) {
    if (!n->a) Fail("'!' has a null operand");
    CheckExpr(n->a);
    if (n->a->dtype != DType::kBool || n->lanes != n->a->lanes)
      Fail("'!' of ", TypeText(n->a), " labeled ", TypeText(e), "; it takes bool");
  }
  void CheckSelect(const SelectNode* n, const Expr& e) {
    if (!n->cond || !n->true_value || !n->false_value) Fail("select has a null operand");
    CheckExpr(n->cond);
    CheckExpr(n->true_value);
    CheckExpr(n->false_value);
    if (n->cond->dtype != DType::kBool ||
        (n->cond->lanes != 1 && n->cond->lanes != n->true_value->lanes))
      Fail("select condition has type ", TypeText(n->cond));
    if (n->true_value->dtype != n->false_value->dtype ||
        n->true_value->lanes != n->false_value->lanes)
      Fail("select branches differ: ", TypeText(n->true_value), " vs ", TypeText(n->false_value));
    if (n->dtype != n->true_value->dtype || n->lanes != n->true_value->lanes)
      Fail("select of ", TypeText(n->true_value), " is labeled ", TypeText(e));
  }
  void CheckCast(const CastNode* n, const Expr& e) {
    if (!n->value) Fail("cast of null");
    CheckExpr(n->value);
    if (n->lanes != n->value->lanes)
      Fail("cast of ", TypeText(n->value), " is labeled ", TypeText(e));
  }
  void CheckLoad(const LoadNode* n, const Expr& e) {
    int lanes = CheckAccess(n->buffer, n->indices, false);
    if (n->dtype != n->buffer->dtype || n->lanes != lanes)
      Fail("load from '", n->buffer->name, "' of ", DTypeName(n->buffer->dtype), " with ", lanes,
           " lanes is labeled ", TypeText(e));
  }
  void CheckCall(const CallNode* n, const Expr& e) {
    const char* fn = IntrinsicName(n->fn);
    if (static_cast<int>(n->args.size()) != IntrinsicArity(n->fn))
      Fail(fn, " takes ", IntrinsicArity(n->fn), " arguments, got ", n->args.size());
    for (const Expr& a : n->args) {
      if (!a) Fail(fn, " has a null argument");
      CheckExpr(a);
    }
    for (const Expr& a : n->args) {
      if (a->dtype != n->args[0]->dtype || a->lanes != n->args[0]->lanes)
        Fail("arguments of ", fn, " differ: ", TypeText(n->args[0]), " vs ", TypeText(a));
    }
    if (!n->args.empty() && (n->dtype != n->args[0]->dtype || n->lanes != n->args[0]->lanes))
      Fail(fn, " of ", TypeText(n->args[0]), " is labeled ", TypeText(e));
  }
  void CheckRamp(const RampNode* n, const Expr& e) {
    CheckIndexExpr(n->base, "ramp base");
    if (n->lanes < 2 || n->dtype != n->base->dtype)
      Fail("ramp of ", TypeText(n->base), " is labeled ", TypeText(e));
  }
  void CheckBroadcast(const BroadcastNode* n, const Expr& e) {
    if (!n->value) Fail("broadcast of null");
    CheckExpr(n->value);
    if (n->value->lanes != 1 || n->dtype != n->value->dtype || n->lanes < 1)
      Fail("broadcast of ", TypeText(n->value), " is labeled ", TypeText(e));
  }
  void CheckReduce(const ReduceNode* n, const Expr& e) {
    if (!allow_reduce_) Fail("Reduce is not allowed here (LowerReductions removes it)");
    for (const IterVar& axis : n->axes) CheckIndexExpr(axis.extent, "reduction extent");
    for (const IterVar& axis : n->axes) BindIndexVar(axis.var, "reduction axis");
    if (!n->source) Fail("reduce of null");
    CheckExpr(n->source);
    if (n->source->lanes != 1 || n->dtype != n->source->dtype || n->lanes != 1)
      Fail("reduce of ", TypeText(n->source), " is labeled ", TypeText(e));
    for (const IterVar& axis : n->axes) defined_.erase(axis.var.get());
  }

  // ---- statements ----

  void CheckLetStmt(const LetStmtNode* n, const Stmt&) {
    Context c(this, "LetStmt " + (n->var ? n->var->name : std::string("<null>")));
    if (!n->var) Fail("let variable is null");
    if (!n->value) Fail("value is null");
    CheckExpr(n->value);
    if (n->var->dtype != n->value->dtype || n->var->lanes != n->value->lanes)
      Fail("variable '", n->var->name, "' of type ", TypeText(n->var), " is bound to a ",
           TypeText(n->value));
    Bind(n->var, "let");
    CheckBody(n->body, "body");
    defined_.erase(n->var.get());
  }
  void CheckStore(const StoreNode* n, const Stmt&) {
    Context c(this, "Store " + (n->buffer ? n->buffer->name : std::string("<null>")));
    int lanes = CheckAccess(n->buffer, n->indices, true);
    if (!n->value) Fail("value is null");
    CheckExpr(n->value);
    if (n->value->dtype != n->buffer->dtype)
      Fail("stores a ", DTypeName(n->value->dtype), " value into '", n->buffer->name, "' of ",
           DTypeName(n->buffer->dtype));
    if (n->value->lanes != lanes)
      Fail("stores ", n->value->lanes, " lanes through indices of ", lanes, " lanes");
  }
  void CheckAlloc(const AllocNode* n, const Stmt&) {
    Context c(this, "Alloc " + (n->buffer ? n->buffer->name : std::string("<null>")));
    const Buffer& b = n->buffer;
    if (!b) Fail("buffer is null");
    if (params_.count(b.get())) Fail("'", b->name, "' is a parameter");
    if (live_.count(b.get())) Fail("'", b->name, "' is already allocated");
    CheckBufferDecl(b);
    live_.insert(b.get());
    freed_.erase(b.get());
    allocs_.back().push_back(b.get());
  }
  void CheckFree(const FreeNode* n, const Stmt&) {
    Context c(this, "Free " + (n->buffer ? n->buffer->name : std::string("<null>")));
    const Buffer& b = n->buffer;
    if (!b) Fail("buffer is null");
    if (params_.count(b.get())) Fail("'", b->name, "' is a parameter");
    if (freed_.count(b.get())) Fail("'", b->name, "' is freed twice");
    if (!live_.count(b.get())) Fail("'", b->name, "' is not allocated here");
    live_.erase(b.get());
    freed_.insert(b.get());
  }
  void CheckIfThenElse(const IfThenElseNode* n, const Stmt&) {
    Context c(this, "IfThenElse");
    if (!n->cond) Fail("condition is null");
    CheckExpr(n->cond);
    if (n->cond->dtype != DType::kBool || n->cond->lanes != 1)
      Fail("condition has type ", TypeText(n->cond), "; it must be a bool scalar");
    CheckBody(n->then_case, "then branch");
    if (n->else_case) CheckList(n->else_case);
  }
  void CheckFor(const ForNode* n, const Stmt&) {
    Context c(this, "For " + (n->var ? n->var->name : std::string("<null>")));
    CheckIndexExpr(n->min, "min");
    CheckIndexExpr(n->extent, "extent");
    BindIndexVar(n->var, "loop");
    CheckBody(n->body, "body");
    defined_.erase(n->var.get());
  }
  void CheckEvaluate(const EvaluateNode* n, const Stmt&) {
    Context c(this, "Evaluate");
    if (!n->value) Fail("value is null");
    CheckExpr(n->value);
  }
  void CheckPrefetch(const PrefetchNode* n, const Stmt&) {
    Context c(this, "Prefetch");
    if (!n->target || n->target->kind != ExprKind::kLoad || n->target->lanes != 1)
      Fail("target is not a scalar load");
    CheckExpr(n->target);
  }
  void CheckScheduleBlock(const ScheduleBlockNode* n, const Stmt&) {
    Context c(this, "ScheduleBlock " + n->name);
    size_t count = n->iter_vars.size();
    if (n->is_reduce.size() != count || n->bindings.size() != count)
      Fail(count, " iter_vars but ", n->is_reduce.size(), " is_reduce flags and ",
           n->bindings.size(), " bindings");
    // Bindings and extents are in the enclosing scope, the regions and bodies in the block's.
    for (size_t i = 0; i < count; ++i) {
      CheckIndexExpr(n->bindings[i], "binding " + std::to_string(i));
      CheckIndexExpr(n->iter_vars[i].extent, "iter_var extent " + std::to_string(i));
    }
    for (const IterVar& iv : n->iter_vars) BindIndexVar(iv.var, "iter_var");
    for (const std::vector<BufferRegion>* regions : {&n->reads, &n->writes}) {
      for (const BufferRegion& r : *regions) {
        if (!r.buffer) Fail("region of a null buffer");
        CheckAccessible(r.buffer);
        size_t rank = r.buffer->shape.size();
        if (r.min.size() != rank || r.extent.size() != rank)
          Fail("region of '", r.buffer->name, "' has ", r.min.size(), " mins and ", r.extent.size(),
               " extents for rank ", rank);
        for (size_t d = 0; d < rank; ++d) {
          CheckIndexExpr(r.min[d],
                         "region min " + std::to_string(d) + " of '" + r.buffer->name + "'");
          CheckIndexExpr(r.extent[d],
                         "region extent " + std::to_string(d) + " of '" + r.buffer->name + "'");
        }
      }
    }
    if (n->init) CheckList(n->init);
    CheckBody(n->body, "body");
    for (const IterVar& iv : n->iter_vars) defined_.erase(iv.var.get());
  }
  void CheckSeq(const SeqNode* n, const Stmt&) {
    for (size_t i = 0; i < n->stmts.size(); ++i) {
      if (!n->stmts[i]) Fail("statement ", i, " of a Seq is null");
      CheckStmt(n->stmts[i]);
    }
  }

  const PrimFuncNode* f_;
  bool allow_reduce_;
  std::string context_;
  std::unordered_set<const VarNode*> defined_;
  std::unordered_set<const BufferNode*> params_, inputs_, live_, freed_;
  std::vector<std::vector<const BufferNode*>> allocs_;  // per open statement list
};

}  // namespace

void Verify(const PrimFunc& f, bool allow_reduce) {
  if (!f) Throw(ErrorCode::kInvalidArgument, "Verify: null function");
  Verifier(f.get(), allow_reduce).Run();
}

}  // namespace kiln::loop
