// FunctionEmitter's statements (jit/llvm_function_emitter.h): stores, Alloc and Free, lets,
// ifs, ScheduleBlocks and loops, parallel ones outlined into functions of their own.
//
// Loops. Serial loops are emitted in rotated form (guard, body, latch) with i64 or the loop
// variable's own integer type. kUnrolled adds llvm.loop.unroll.full; kVectorized adds
// llvm.loop.vectorize.enable (and .width = extent for small power-of-two extents) when its body
// is still scalar (a vectorized body already made of Ramps is emitted as it is). kParallel
// outlines the loop into f.parallel.K, which runs one chunk [begin, end) of it as a serial
// loop, passes every value in scope through a closure struct on the caller's stack, and
// calls kiln_parallel_for, which blocks until all chunks have run.
//
// reassociate_reductions (the default) marks the add of a float reduction's update
// (`acc[i] = acc[i] + v`) reassoc, which lets the loop vectorizer sum in per-lane partial sums.
//
// ScheduleBlocks are compiled directly: iter_vars are bound to their bindings (like lets) and
// `init` runs when every reduction iter_var's binding is 0, its first iteration (the ranges
// of iter_vars start at 0).
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "ir/loop/loop.h"
#include "ir/loop/loop_text.h"
#include "ir/loop/loop_visitor.h"
#include "jit/llvm_function_emitter.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/Intrinsics.h"
#include "llvm/IR/LLVMContext.h"

namespace kiln::jit_internal {
namespace {

// Local buffers up to this size live on the stack (entry-block allocas); larger or symbolic
// ones come from kiln_scratch_alloc (jit/runtime.h). Small enough for oneTBB worker stacks
// even with several.
constexpr int64_t kMaxStackBytes = 16 * 1024;
// Alignment of local buffers, so vector accesses to them never straddle cache lines.
constexpr int kLocalAlign = 64;

// ---- Loop IR helpers (no LLVM) ----

// Whether any expression under `s` has more than one lane (it was vectorized already).
bool HasVectorLanes(const Stmt& s) {
  struct Finder : loop::Visitor {
    bool found = false;
    void VisitExpr(const Expr& e) override {
      if (found || !e) return;
      if (e->lanes > 1) {
        found = true;
        return;
      }
      loop::Visitor::VisitExpr(e);
    }
  } finder;
  finder.VisitStmt(s);
  return finder.found;
}

// Whether `e` reads variable `v`.
bool ReadsVar(const Expr& e, const loop::VarNode* v) {
  struct Finder : loop::Visitor {
    const loop::VarNode* v = nullptr;
    bool found = false;
    void VisitVar(const loop::VarNode* n, const Expr&) override { found = found || n == v; }
  } finder;
  finder.v = v;
  finder.VisitExpr(e);
  return finder.found;
}

// How many sums loop `n` carries: stores whose index does not move with its variable (an
// accumulator updated every iteration), counted where the body is scalar stores only.
int CarriedSums(const loop::ForNode* n, DType* dtype = nullptr) {
  struct Counter : loop::Visitor {
    const loop::VarNode* v = nullptr;
    int sums = 0;
    bool other = false;
    DType dtype = DType::kFloat32;
    void VisitStore(const loop::StoreNode* s, const Stmt& self) override {
      bool moves = false;
      for (const Expr& i : s->indices) moves = moves || ReadsVar(i, v);
      if (moves || s->value->lanes != 1) other = true;
      ++sums;
      dtype = s->value->dtype;
      loop::Visitor::VisitStore(s, self);
    }
    void VisitFor(const loop::ForNode* f, const Stmt& self) override {
      other = true;
      loop::Visitor::VisitFor(f, self);
    }
  } counter;
  counter.v = n->var.get();
  counter.VisitStmt(n->body);
  if (dtype) *dtype = counter.dtype;
  return counter.other ? 0 : counter.sums;
}

// The vector width for LLVM to vectorize a loop carrying one sum or max over a short constant
// trip count with (0: leave it to LLVM). LLVM picks a full vector and four interleaved
// accumulators, 64 f32 lanes an iteration on AVX-512; a trip count below that runs none of the
// vector loop, and the scalar remainder, unrolled, is one dependent chain: softmax over rows of
// 40 (attention over 40 positions) summed and maxed with 40 vaddss and 39 vmaxss a row, twice
// ONNX Runtime's time. A width that divides the trip count (else the widest that runs twice),
// without interleaving and kept a loop (LLVM's full unroll comes before its vectorizer, and would
// leave it nothing to vectorize), keeps the chain a few vector steps long. Only where reductions
// may reassociate: an explicit width lets LLVM reorder a float sum even without the reassoc flag.
int ShortReductionWidth(const loop::ForNode* n, int vector_bits) {
  DType dtype;
  int64_t trips;
  if (CarriedSums(n, &dtype) != 1 || !loop::IsConstInt(n->extent, &trips)) return 0;
  const int bits = DTypeSize(dtype) * 8;
  if (bits < 32 || !IsFloat(dtype)) return 0;
  const int64_t lanes = std::max(1, vector_bits / bits);
  if (trips < 8 || trips >= 8 * lanes) return 0;
  int64_t width = lanes;
  while (width >= 4 && trips % width != 0) width /= 2;
  if (width < 4)
    for (width = lanes; width > 4 && width * 2 > trips;) width /= 2;
  return static_cast<int>(width);
}

}  // namespace

// ---- Stores, Alloc and Free ----

namespace {

// Whether `e` loads the element of `n`'s buffer that `n` stores to.
bool LoadsStoredElement(const loop::Expr& e, const loop::StoreNode* n) {
  if (e->kind != ExprKind::kLoad) return false;
  const auto* load = loop::AsLoad(e);
  if (load->buffer.get() != n->buffer.get() || load->indices.size() != n->indices.size())
    return false;
  for (size_t k = 0; k < n->indices.size(); ++k)
    if (!loop::StructuralEqual(load->indices[k], n->indices[k])) return false;
  return true;
}

// The update of a kMaxOrdered reduction: `acc = v > acc ? v : acc` (LowerReductions' Combine).
bool IsOrderedMax(const loop::StoreNode* n) {
  if (n->value->kind != ExprKind::kSelect) return false;
  const auto* sel = loop::AsSelect(n->value);
  if (sel->cond->kind != ExprKind::kBinary) return false;
  const auto* gt = loop::AsBinary(sel->cond);
  return gt->op == loop::BinaryOp::kGT && LoadsStoredElement(sel->false_value, n) &&
         LoadsStoredElement(gt->b, n) && loop::StructuralEqual(gt->a, sel->true_value);
}

}  // namespace

// `buf[idx] = buf[idx] op v` on floats, op add, max or min, or a kMaxOrdered update: a
// reduction's update (LowerReductions writes them).
bool FunctionEmitter::IsAccumulation(const loop::StoreNode* n) {
  if (!IsFloat(n->buffer->dtype)) return false;
  if (IsOrderedMax(n)) return true;
  if (n->value->kind != ExprKind::kBinary) return false;
  const auto* add = loop::AsBinary(n->value);
  using loop::BinaryOp;
  if (add->op != BinaryOp::kAdd && add->op != BinaryOp::kMax && add->op != BinaryOp::kMin)
    return false;
  return LoadsStoredElement(add->a, n);
}

// The update's add may reassociate: LLVM's loop vectorizer keeps per-lane partial sums only
// for a reassociable add, and a float sum that runs one element at a time is bound by the
// add's latency (4 cycles an element). The order of the sum then depends on the vector width
// the target picks, within rounding, as in any vectorized library; the terms are computed as
// written (the flag is on this add alone).
//
// max and min become llvm.maximum / llvm.minimum, which the loop vectorizer reduces per lane
// without any flag: like the reference's max they propagate NaN, and they order -0 below +0,
// so only the sign of a zero maximum can differ from the element-by-element select (which
// keeps the first of equal zeros).
//
// A kMaxOrdered update becomes llvm.maxnum with no-NaNs and no-signed-zeros, which the loop
// vectorizer reduces per lane (it does not without no-NaNs) and x86 gives one vmaxps: a NaN
// term leaves an unspecified maximum, which kMaxOrdered allows.
llvm::Value* FunctionEmitter::EmitAccumulation(const loop::StoreNode* n) {
  if (IsOrderedMax(n)) {
    const auto* sel = loop::AsSelect(n->value);
    llvm::Value* acc = EmitExpr(sel->false_value);
    llvm::Value* v = EmitExpr(sel->true_value);
    if (LanesOf(acc) != LanesOf(v)) Fail("max of ", LanesOf(acc), " and ", LanesOf(v), " lanes");
    llvm::IRBuilderBase::FastMathFlagGuard guard(b_);
    llvm::FastMathFlags fmf;
    fmf.setNoNaNs();
    fmf.setNoSignedZeros();
    b_.setFastMathFlags(fmf);
    return b_.CreateBinaryIntrinsic(llvm::Intrinsic::maxnum, acc, v);
  }
  const auto* add = loop::AsBinary(n->value);
  llvm::Value* a = EmitExpr(add->a);
  llvm::Value* b = EmitExpr(add->b);
  if (add->op != loop::BinaryOp::kAdd) {
    if (LanesOf(a) != LanesOf(b)) Fail("max/min of ", LanesOf(a), " and ", LanesOf(b), " lanes");
    return b_.CreateBinaryIntrinsic(
        add->op == loop::BinaryOp::kMax ? llvm::Intrinsic::maximum : llvm::Intrinsic::minimum, a,
        b);
  }
  llvm::IRBuilderBase::FastMathFlagGuard guard(b_);
  llvm::FastMathFlags fmf = b_.getFastMathFlags();
  fmf.setAllowReassoc();
  b_.setFastMathFlags(fmf);
  return b_.CreateFAdd(a, b);
}

void FunctionEmitter::EmitStore(const loop::StoreNode* n) {
  DType t = n->buffer->dtype;
  if (n->value->dtype != t)
    Fail("stores a ", DTypeName(n->value->dtype), " value into ", DTypeName(t), " buffer '",
         n->buffer->name, "'");
  int index_lanes = 1;
  for (const Expr& i : n->indices) index_lanes = std::max(index_lanes, i->lanes);
  if (n->value->lanes > 1 && index_lanes == 1)
    Fail("stores a ", n->value->lanes, "-lane value to a scalar index of '", n->buffer->name, "'");
  if (n->value->lanes > 1 && n->value->lanes != index_lanes)
    Fail("stores a ", n->value->lanes, "-lane value through ", index_lanes, "-lane indices");
  ShareShiftedLoads(n->value);
  llvm::Value* value =
      reassociate_reductions_ && IsAccumulation(n) ? EmitAccumulation(n) : EmitExpr(n->value);
  Access acc = ComputeAccess(n->buffer, n->indices, index_lanes);
  llvm::Value* raw = ToMemory(Splat(value, index_lanes), t);
  llvm::Align align(DTypeSize(t));
  switch (acc.kind) {
    case Access::kScalar:
    case Access::kContiguous:
      b_.CreateAlignedStore(raw, acc.ptr, align);
      break;
    case Access::kSameAddress:  // every lane writes the same element: the last one wins
      b_.CreateAlignedStore(b_.CreateExtractElement(raw, acc.lanes - 1), acc.ptr, align);
      break;
    case Access::kStrided:  // ComputeAccess gives stores a scatter instead
      Fail("strided store to '", n->buffer->name, "'");
    case Access::kGather:
      b_.CreateMaskedScatter(raw, acc.ptrs, align);
      break;
  }
}

void FunctionEmitter::EmitAlloc(const loop::AllocNode* n) {
  const BufferNode& buf = *n->buffer;
  if (buf.scope != BufferNode::Scope::kLocal)
    Fail("Alloc of '", buf.name, "', which is not a local buffer");
  Expr numel = loop::IntImm(1);
  for (const Expr& d : buf.shape) numel = loop::Mul(numel, ToIndex(d));
  int64_t count;
  int64_t size = DTypeSize(buf.dtype);
  if (loop::IsConstInt(numel, &count) && count >= 0 && count * size <= kMaxStackBytes) {
    llvm::Type* type = llvm::ArrayType::get(MemType(buf.dtype), static_cast<uint64_t>(count));
    buffers_.push_back({&buf, EntryAlloca(type, buf.name, kLocalAlign), false});
    return;
  }
  // Blocks are 64-byte aligned (kLocalAlign).
  llvm::Value* bytes = b_.CreateMul(EmitExpr(numel), b_.getInt64(size));
  auto* alloc_type = llvm::FunctionType::get(b_.getPtrTy(), {b_.getInt64Ty()}, false);
  llvm::FunctionCallee alloc = LibFunction("kiln_scratch_alloc", alloc_type, false);
  // What LLVM would infer for aligned_alloc: a fresh block, aliasing no buffer of the kernel,
  // and a call that touches no memory the kernel can see (so loads are not reloaded past it).
  if (auto* f = llvm::dyn_cast<llvm::Function>(alloc.getCallee())) {
    f->addRetAttr(llvm::Attribute::NoAlias);
    f->addRetAttr(llvm::Attribute::getWithAlignment(f->getContext(), llvm::Align(kLocalAlign)));
    f->setOnlyAccessesInaccessibleMemory();
  }
  llvm::Value* data = b_.CreateCall(alloc, {bytes}, buf.name);
  buffers_.push_back({&buf, data, true});
}

void FunctionEmitter::EmitFree(const loop::FreeNode* n) {
  BufferBinding* binding = FindBuffer(n->buffer.get());
  if (!binding || !binding->data) Fail("Free of '", n->buffer->name, "', which is not allocated");
  if (binding->heap) {
    auto* free_type = llvm::FunctionType::get(b_.getVoidTy(), {b_.getPtrTy()}, false);
    llvm::FunctionCallee release = LibFunction("kiln_scratch_free", free_type, false);
    if (auto* f = llvm::dyn_cast<llvm::Function>(release.getCallee()))
      f->setOnlyAccessesInaccessibleMemOrArgMem();
    b_.CreateCall(release, {binding->data});
  }
  binding->data = nullptr;
}

// ---- Statements ----

void FunctionEmitter::EmitStmt(const Stmt& s) {
  // A nested statement starts with an empty cache (its blocks may not be dominated by
  // values cached inside sibling statements) and gives the outer one its cache back.
  ExprCache outer = std::move(expr_cache_);
  expr_cache_.clear();
  EmitStmtUncached(s);
  expr_cache_ = std::move(outer);
}

void FunctionEmitter::EmitStmtUncached(const Stmt& s) {
  switch (s->kind) {
    case StmtKind::kLetStmt: {
      const auto* n = loop::AsLetStmt(s);
      if (n->value->dtype != n->var->dtype)
        Fail("let binds a ", DTypeName(n->value->dtype), " value to ", DTypeName(n->var->dtype),
             " variable '", n->var->name, "'");
      vars_.push_back({n->var.get(), EmitExpr(n->value)});
      EmitStmt(n->body);
      vars_.pop_back();
      return;
    }
    case StmtKind::kStore:
      EmitStore(loop::AsStore(s));
      return;
    case StmtKind::kAlloc:
      EmitAlloc(loop::AsAlloc(s));
      return;
    case StmtKind::kFree:
      EmitFree(loop::AsFree(s));
      return;
    case StmtKind::kIfThenElse:
      EmitIf(loop::AsIfThenElse(s));
      return;
    case StmtKind::kFor:
      EmitFor(loop::AsFor(s));
      return;
    case StmtKind::kEvaluate:
      EmitExpr(loop::AsEvaluate(s)->value);
      return;
    case StmtKind::kPrefetch: {
      // Into L2 (locality 2: prefetcht1 on x86), for reading, of data: a line fetched for a
      // later block of a loop nest, which the loops between may push out of L1.
      const auto* load = loop::AsLoad(loop::AsPrefetch(s)->target);
      Access acc = ComputeAccess(load->buffer, load->indices, 1, /*strided_ok=*/false);
      b_.CreateIntrinsic(llvm::Intrinsic::prefetch, {acc.ptr->getType()},
                         {acc.ptr, b_.getInt32(0), b_.getInt32(2), b_.getInt32(1)});
      return;
    }
    case StmtKind::kScheduleBlock:
      EmitBlock(loop::AsScheduleBlock(s));
      return;
    case StmtKind::kSeq: {
      // An Alloc's buffer is visible until its Free or the end of the enclosing Seq.
      size_t scope = buffers_.size();
      for (const Stmt& c : loop::AsSeq(s)->stmts) EmitStmt(c);
      buffers_.resize(scope);
      return;
    }
  }
  Fail("unknown statement kind");
}

llvm::Value* FunctionEmitter::EmitCondition(const Expr& cond, const char* what) {
  if (cond->lanes != 1) Fail(what, " condition has ", cond->lanes, " lanes");
  return Truthy(EmitExpr(cond), cond->dtype);
}

// Runs `then_fn` when `cond` (i1) holds, `else_fn` (may be empty) otherwise.
template <typename Then, typename Else>
void FunctionEmitter::EmitBranches(llvm::Value* cond, const Then& then_fn, const Else* else_fn) {
  auto* then_bb = llvm::BasicBlock::Create(ctx_, "then", fn_);
  auto* else_bb = else_fn ? llvm::BasicBlock::Create(ctx_, "else", fn_) : nullptr;
  auto* merge_bb = llvm::BasicBlock::Create(ctx_, "endif", fn_);
  b_.CreateCondBr(cond, then_bb, else_bb ? else_bb : merge_bb);
  b_.SetInsertPoint(then_bb);
  then_fn();
  b_.CreateBr(merge_bb);
  if (else_bb) {
    b_.SetInsertPoint(else_bb);
    (*else_fn)();
    b_.CreateBr(merge_bb);
  }
  b_.SetInsertPoint(merge_bb);
}

void FunctionEmitter::EmitIf(const loop::IfThenElseNode* n) {
  llvm::Value* cond = EmitCondition(n->cond, "if");
  auto then_fn = [&] { EmitStmt(n->then_case); };
  auto else_fn = [&] { EmitStmt(n->else_case); };
  EmitBranches(cond, then_fn, n->else_case ? &else_fn : nullptr);
}

void FunctionEmitter::EmitBlock(const loop::ScheduleBlockNode* n) {
  if (n->bindings.size() != n->iter_vars.size())
    Fail("block '", n->name, "' has ", n->iter_vars.size(), " iter_vars but ", n->bindings.size(),
         " bindings");
  // Evaluate every binding before binding any: they refer to the enclosing loops only.
  std::vector<llvm::Value*> values;
  for (const Expr& e : n->bindings) values.push_back(EmitExpr(e));
  llvm::Value* first = nullptr;  // all reduction iter_vars at 0
  bool has_reduce = false;
  for (size_t i = 0; i < values.size(); ++i) {
    vars_.push_back({n->iter_vars[i].var.get(), values[i]});
    if (i < n->is_reduce.size() && n->is_reduce[i]) {
      llvm::Value* at_start = b_.CreateICmpEQ(values[i], Zero(values[i]));
      first = has_reduce ? b_.CreateAnd(first, at_start) : at_start;
      has_reduce = true;
    }
  }
  if (n->init) {
    if (has_reduce) {
      auto init_fn = [&] { EmitStmt(n->init); };
      EmitBranches(first, init_fn, static_cast<decltype(init_fn)*>(nullptr));
    } else {
      EmitStmt(n->init);
    }
  }
  if (n->body) EmitStmt(n->body);
  vars_.resize(vars_.size() - values.size());
}

// ---- Loops ----

// A self-referencing llvm.loop node with the given properties.
llvm::MDNode* FunctionEmitter::LoopMetadata(const std::vector<llvm::Metadata*>& props) {
  std::vector<llvm::Metadata*> ops = {nullptr};
  ops.insert(ops.end(), props.begin(), props.end());
  llvm::MDNode* node = llvm::MDNode::getDistinct(ctx_, ops);
  node->replaceOperandWith(0, node);
  return node;
}

llvm::Metadata* FunctionEmitter::Property(const char* name, llvm::Constant* value) {
  std::vector<llvm::Metadata*> ops = {llvm::MDString::get(ctx_, name)};
  if (value) ops.push_back(llvm::ConstantAsMetadata::get(value));
  return llvm::MDNode::get(ctx_, ops);
}

void FunctionEmitter::EmitFor(const loop::ForNode* n) {
  if (!IsInteger(n->var->dtype))
    Fail("loop variable '", n->var->name, "' is ", DTypeName(n->var->dtype));
  if (n->min->lanes != 1 || n->extent->lanes != 1)
    Fail("loop '", n->var->name, "' has vector bounds");
  switch (n->for_kind) {
    case ForKind::kSerial:
      // Symbolic extents (a shape-generic kernel's): LLVM unrolled such loops at run-time trip
      // counts, each with a remainder loop, and vectorized the tails that tiling and
      // vectorization leave (`w % 64`, `% 16`: fewer iterations than a vector has lanes) into
      // a vector loop that never runs, with its own remainder. Both cost compile time that
      // only the generic tier pays, for code that does not run or does not pay: the
      // detection-shaped conv net's generic kernels at 320 x 320 (bench/vs_ort ocr_det), LLVM
      // 21-23 -> 11-12 s in all, and the generic p50 58-60 -> 44-45 ms, 1 thread; the
      // recognizer's 7.0-8.1 -> 3.8-4.0 s, p50 33-36 -> 30-32 ms; the encoder's 0.9-1.1 ->
      // 0.54 s (2 runs each, Zen 5). So a tail keeps its scalar loop, and any other
      // symbolic loop is not unrolled (it is still vectorized and interleaved).
      //
      // A loop that carries two sums or more (a layer norm's S1 and S2 in one pass, fused by
      // FuseLoops) came out of LLVM with one vector accumulator per sum: interleaving chose 1,
      // and where it did not, the full unroll that follows let the reassociable adds fold the
      // partial sums back into one chain, so each step waited on the add latency. Four
      // interleaved accumulators in a loop that stays a loop: the encoder's layer norm (rows
      // of 256) 15.4 -> 9.2 us; interleaving without the unroll hint 11.9 us, the hint without
      // interleaving 11.9 us; the same hints on one-sum loops too 9.8 us (kernel minima).
      if (CarriedSums(n) >= 2) {
        EmitSerialFor(n, LoopMetadata({Property("llvm.loop.interleave.count", b_.getInt32(4)),
                                       Property("llvm.loop.unroll.disable")}));
      } else if (int width = reassociate_reductions_ ? ShortReductionWidth(n, vector_bits_) : 0;
                 width > 0) {
        EmitSerialFor(n, LoopMetadata({Property("llvm.loop.vectorize.enable", b_.getTrue()),
                                       Property("llvm.loop.vectorize.width", b_.getInt32(width)),
                                       Property("llvm.loop.interleave.count", b_.getInt32(1)),
                                       Property("llvm.loop.unroll.disable")}));
      } else if (std::optional<int64_t> bound = loop::ExtentBound(n->extent);
                 !loop::IsConstInt(n->extent) && bound && *bound >= 0 &&
                 *bound < std::max(2, vector_bits_ / 32)) {
        // A symbolic tail bounded below one vector (`x % 16`): kept scalar.
        EmitSerialFor(n, LoopMetadata({Property("llvm.loop.vectorize.enable", b_.getFalse()),
                                       Property("llvm.loop.unroll.disable")}));
      } else if (int64_t trips; !loop::IsConstInt(n->extent, &trips)) {
        EmitSerialFor(n, LoopMetadata({Property("llvm.loop.unroll.disable")}));
      } else {
        EmitSerialFor(n, nullptr);
      }
      return;
    case ForKind::kUnrolled:
      EmitSerialFor(n, LoopMetadata({Property("llvm.loop.unroll.full")}));
      return;
    case ForKind::kVectorized: {
      // Vectorization that already happened (Ramps in the body) must not be redone.
      if (HasVectorLanes(n->body)) {
        EmitSerialFor(n, nullptr);
        return;
      }
      std::vector<llvm::Metadata*> props = {Property("llvm.loop.vectorize.enable", b_.getTrue())};
      int64_t extent;
      if (loop::IsConstInt(n->extent, &extent) && extent >= 2 && extent <= 16 &&
          (extent & (extent - 1)) == 0)
        props.push_back(
            Property("llvm.loop.vectorize.width", b_.getInt32(static_cast<uint32_t>(extent))));
      EmitSerialFor(n, LoopMetadata(props));
      return;
    }
    case ForKind::kParallel:
      EmitParallelFor(n);
      return;
    case ForKind::kGpuBlockX:
    case ForKind::kGpuBlockY:
    case ForKind::kGpuBlockZ:
    case ForKind::kGpuThreadX:
    case ForKind::kGpuThreadY:
    case ForKind::kGpuThreadZ:
      Fail("loop '", n->var->name, "' is bound to ", loop::ForKindName(n->for_kind),
           ", which the CPU code generator cannot compile");
  }
  Fail("unknown loop kind");
}

void FunctionEmitter::EmitSerialFor(const loop::ForNode* n, llvm::MDNode* loop_md) {
  llvm::Type* type = ScalarType(n->var->dtype);
  llvm::Value* begin = b_.CreateIntCast(EmitExpr(n->min), type, IsSignedInteger(n->min->dtype));
  llvm::Value* extent =
      b_.CreateIntCast(EmitExpr(n->extent), type, IsSignedInteger(n->extent->dtype));
  EmitLoop(n, begin, b_.CreateAdd(begin, extent), loop_md);
}

// for (v = begin; v < end; ++v) body, in rotated form: a guard, then a body whose latch
// branches back, so LLVM's loop passes see a canonical loop. `begin` and `end` have the
// loop variable's type.
void FunctionEmitter::EmitLoop(const loop::ForNode* n, llvm::Value* begin, llvm::Value* end,
                               llvm::MDNode* loop_md) {
  bool is_signed = IsSignedInteger(n->var->dtype);
  llvm::Type* type = begin->getType();
  auto less = [&](llvm::Value* x, llvm::Value* y) {
    return is_signed ? b_.CreateICmpSLT(x, y) : b_.CreateICmpULT(x, y);
  };
  llvm::BasicBlock* pre = b_.GetInsertBlock();
  auto* body_bb = llvm::BasicBlock::Create(ctx_, "for." + n->var->name, fn_);
  auto* exit_bb = llvm::BasicBlock::Create(ctx_, "for." + n->var->name + ".end", fn_);
  b_.CreateCondBr(less(begin, end), body_bb, exit_bb);

  b_.SetInsertPoint(body_bb);
  llvm::PHINode* iv = b_.CreatePHI(type, 2, n->var->name);
  iv->addIncoming(begin, pre);
  vars_.push_back({n->var.get(), iv});
  EmitStmt(n->body);
  vars_.pop_back();
  // next <= end, so the increment cannot wrap.
  llvm::Value* next = b_.CreateAdd(iv, llvm::ConstantInt::get(type, 1), n->var->name + ".next",
                                   /*HasNUW=*/!is_signed, /*HasNSW=*/is_signed);
  llvm::BranchInst* latch = b_.CreateCondBr(less(next, end), body_bb, exit_bb);
  if (loop_md) latch->setMetadata(llvm::LLVMContext::MD_loop, loop_md);
  iv->addIncoming(next, b_.GetInsertBlock());
  b_.SetInsertPoint(exit_bb);
}

// The alignment known of a buffer's pointer where it is bound: a local buffer's (a stack slot
// or a scratch block) or a parameter's attribute.
llvm::MaybeAlign FunctionEmitter::KnownAlign(const BufferBinding& b) {
  if (b.heap) return llvm::Align(kLocalAlign);
  if (auto* a = llvm::dyn_cast<llvm::AllocaInst>(b.data)) return a->getAlign();
  if (auto* arg = llvm::dyn_cast<llvm::Argument>(b.data)) return arg->getParamAlign();
  return std::nullopt;
}

// The loop becomes `f.parallel.K(i64 chunk_begin, i64 chunk_end, ptr closure)`, which runs
// a serial loop over its chunk (so the chunk can be vectorized); kiln_parallel_for hands
// out the chunks. The closure struct holds every value and buffer pointer in scope (the
// optimizer drops the loads the body does not use). It lives on this function's stack,
// which is safe because kiln_parallel_for returns only after every chunk has finished.
void FunctionEmitter::EmitParallelFor(const loop::ForNode* n) {
  llvm::Type* i64 = b_.getInt64Ty();
  llvm::Value* begin = b_.CreateIntCast(EmitExpr(n->min), i64, IsSignedInteger(n->min->dtype));
  llvm::Value* extent =
      b_.CreateIntCast(EmitExpr(n->extent), i64, IsSignedInteger(n->extent->dtype));
  llvm::Value* end = b_.CreateAdd(begin, extent);

  // The innermost binding of each var and buffer (outer ones are shadowed).
  std::vector<VarBinding> vars;
  for (auto it = vars_.rbegin(); it != vars_.rend(); ++it)
    if (std::none_of(vars.begin(), vars.end(),
                     [&](const VarBinding& v) { return v.var == it->var; }))
      vars.push_back(*it);
  std::vector<BufferBinding> buffers;
  for (auto it = buffers_.rbegin(); it != buffers_.rend(); ++it)
    if (it->data && std::none_of(buffers.begin(), buffers.end(),
                                 [&](const BufferBinding& b) { return b.buffer == it->buffer; }))
      buffers.push_back(*it);
  std::vector<llvm::Type*> fields;
  for (const BufferBinding& b : buffers) fields.push_back(b.data->getType());
  for (const VarBinding& v : vars) fields.push_back(v.value->getType());
  llvm::StructType* closure_type = llvm::StructType::get(ctx_, fields);

  std::string name = func_.name + ".parallel." + std::to_string(parallel_count_++);
  std::vector<llvm::Type*> params = {i64, i64};
  params.insert(params.end(), fields.begin(), fields.end());
  llvm::Function* body = MakeInnerFunction(name + ".body", params);

  // The trampoline kiln_parallel_for calls: unpack the closure into f.parallel.K.body's
  // (noalias) arguments.
  auto* tramp_type = llvm::FunctionType::get(b_.getVoidTy(), {i64, i64, b_.getPtrTy()}, false);
  auto* tramp =
      llvm::Function::Create(tramp_type, llvm::GlobalValue::InternalLinkage, name, module_);
  tramp->addFnAttr(llvm::Attribute::NoUnwind);
  functions_.push_back(tramp);
  {
    llvm::IRBuilder<> tb(llvm::BasicBlock::Create(ctx_, "entry", tramp));
    std::vector<llvm::Value*> args = {tramp->getArg(0), tramp->getArg(1)};
    for (unsigned i = 0; i < fields.size(); ++i) {
      llvm::LoadInst* field =
          tb.CreateLoad(fields[i], tb.CreateStructGEP(closure_type, tramp->getArg(2), i));
      // What the caller knows of a buffer's alignment goes with it (a local buffer's 64 bytes:
      // a stack slot or a scratch block; a parameter's attribute), on the load, which outlives
      // inlining the body here. Without it the vectorized accesses of a scratch buffer inside
      // the body were `align 4`.
      if (i < buffers.size())
        if (llvm::MaybeAlign align = KnownAlign(buffers[i]))
          field->setMetadata(
              llvm::LLVMContext::MD_align,
              llvm::MDNode::get(ctx_, llvm::ConstantAsMetadata::get(tb.getInt64(align->value()))));
      args.push_back(field);
    }
    tb.CreateCall(body, args);
    tb.CreateRetVoid();
  }

  // Fill the closure here and hand it over.
  llvm::AllocaInst* closure = EntryAlloca(closure_type, name + ".closure", 8);
  {
    unsigned i = 0;
    for (const BufferBinding& b : buffers)
      b_.CreateStore(b.data, b_.CreateStructGEP(closure_type, closure, i++));
    for (const VarBinding& v : vars)
      b_.CreateStore(v.value, b_.CreateStructGEP(closure_type, closure, i++));
  }
  auto* pfor_type =
      llvm::FunctionType::get(b_.getVoidTy(), {i64, i64, b_.getPtrTy(), b_.getPtrTy()}, false);
  b_.CreateCall(LibFunction("kiln_parallel_for", pfor_type, false), {begin, end, tramp, closure});

  // Emit the chunk loop into f.parallel.K.body with the captured values as its scope.
  llvm::IRBuilderBase::InsertPoint saved_ip = b_.saveIP();
  llvm::Function* saved_fn = fn_;
  std::vector<VarBinding> saved_vars = std::move(vars_);
  std::vector<BufferBinding> saved_buffers = std::move(buffers_);
  fn_ = body;
  b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", body));
  vars_.clear();
  buffers_.clear();
  // Push outermost first so the scope order (and shadowing) is as in the caller. Arguments
  // follow the closure's field order: the chunk, then buffers, then vars (innermost first).
  constexpr unsigned kFirstCapture = 2;
  for (size_t k = buffers.size(); k-- > 0;) {
    llvm::Argument* a = body->getArg(kFirstCapture + k);
    a->setName(buffers[k].buffer->name);
    buffers_.push_back({buffers[k].buffer, a, false});
  }
  for (size_t k = vars.size(); k-- > 0;) {
    llvm::Argument* a = body->getArg(kFirstCapture + buffers.size() + k);
    a->setName(vars[k].var->name);
    vars_.push_back({vars[k].var, a});
  }
  body->getArg(0)->setName(n->var->name + ".begin");
  body->getArg(1)->setName(n->var->name + ".end");
  // Chunks lie inside [min, min + extent), so they fit the loop variable's own type.
  llvm::Type* type = ScalarType(n->var->dtype);
  EmitLoop(n, b_.CreateIntCast(body->getArg(0), type, true),
           b_.CreateIntCast(body->getArg(1), type, true), nullptr);
  b_.CreateRetVoid();

  fn_ = saved_fn;
  vars_ = std::move(saved_vars);
  buffers_ = std::move(saved_buffers);
  b_.restoreIP(saved_ip);
}

}  // namespace kiln::jit_internal
