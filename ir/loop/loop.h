// The loop-level IR (SPEC.md §4): what a fused group is lowered to, and what code generators
// read. Five levels: expressions (arithmetic, loads, casts, intrinsic calls), statements
// (let, store, alloc, free, if, for, evaluate, schedule block), blocks (Seq: statement lists),
// functions (PrimFunc) and modules (held in the graph IRModule beside the graph functions).
//
// Like the graph IR, nodes are immutable and shared; rewrites build new nodes and share the
// unchanged ones. Vars and Buffers are compared by identity. Index arithmetic is i64.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ir/attrs.h"
#include "ir/dtype.h"

namespace kiln::loop {

enum class ExprKind {
#define KILN_LOOP_EXPR(N) k##N,
#include "ir/loop/loop_nodes.def"
};
enum class StmtKind {
#define KILN_LOOP_STMT(N) k##N,
#include "ir/loop/loop_nodes.def"
};
enum class BinaryOp {
#define KILN_BINARY_OP(E, S, C) E,
#include "ir/loop/binary_ops.def"
};
enum class Intrinsic {
#define KILN_INTRINSIC(E, N, A) E,
#include "ir/loop/intrinsics.def"
};
// kMaxOrdered is the max of the terms that are not NaN, for a reduction whose consumers give
// NaN for a NaN term whatever the max is (softmax shifts every term by its row's max, and a NaN
// term makes the row's sum NaN): LowerReductions' `v > acc ? v : acc` skips NaN terms, the
// JIT's vector max may keep or drop them, and the sign of a zero maximum is unspecified. It is one
// vmaxps a vector, where kMax's NaN-propagating, zero-ordering max costs four to five instructions.
enum class ReduceKind { kSum, kProd, kMax, kMin, kMaxOrdered };
enum class ForKind {
  kSerial,
  kParallel,    // iterations run on the engine's thread pool
  kVectorized,  // the body is evaluated for `extent` consecutive iterations at once
  kUnrolled,
  kGpuBlockX,
  kGpuBlockY,
  kGpuBlockZ,
  kGpuThreadX,
  kGpuThreadY,
  kGpuThreadZ,
};

const char* ExprKindName(ExprKind k);
const char* StmtKindName(StmtKind k);
const char* BinaryOpName(BinaryOp op);  // "+", "//", "min", "<=", ...
bool IsComparison(BinaryOp op);
const char* IntrinsicName(Intrinsic fn);
int IntrinsicArity(Intrinsic fn);
const char* ReduceKindName(ReduceKind k);  // "sum", "prod", "max", "min", "max_ordered"
const char* ForKindName(
    ForKind k);  // "serial", "parallel", "vectorized", "unrolled", "gpu.block.x", ...

// ---- Expressions ----

struct ExprNode {
  ExprNode(ExprKind k, DType t, int l) : kind(k), dtype(t), lanes(l) {}
  virtual ~ExprNode() = default;
  const ExprKind kind;
  DType dtype;    // of each lane
  int lanes = 1;  // > 1 for vector values made by vectorization
};
using Expr = std::shared_ptr<const ExprNode>;

struct IntImmNode : ExprNode {
  IntImmNode(int64_t v, DType t) : ExprNode(ExprKind::kIntImm, t, 1), value(v) {}
  int64_t value;  // also used for bool (0/1)
};
struct FloatImmNode : ExprNode {
  FloatImmNode(double v, DType t) : ExprNode(ExprKind::kFloatImm, t, 1), value(v) {}
  double value;
};
// A scalar variable: a loop index, a let binding, or a scalar parameter (e.g. a symbolic
// extent passed at run time). Compared by identity.
struct VarNode : ExprNode {
  VarNode(std::string n, DType t) : ExprNode(ExprKind::kVar, t, 1), name(std::move(n)) {}
  std::string name;
};
using Var = std::shared_ptr<const VarNode>;

struct BinaryNode : ExprNode {
  BinaryNode(BinaryOp o, Expr x, Expr y, DType t, int l)
      : ExprNode(ExprKind::kBinary, t, l), op(o), a(std::move(x)), b(std::move(y)) {}
  BinaryOp op;
  Expr a, b;
};
struct NotNode : ExprNode {
  explicit NotNode(Expr x) : ExprNode(ExprKind::kNot, DType::kBool, x->lanes), a(std::move(x)) {}
  Expr a;
};
struct SelectNode : ExprNode {
  SelectNode(Expr c, Expr t, Expr f)
      : ExprNode(ExprKind::kSelect, t->dtype, t->lanes),
        cond(std::move(c)),
        true_value(std::move(t)),
        false_value(std::move(f)) {}
  Expr cond, true_value, false_value;
};
struct CastNode : ExprNode {
  CastNode(DType t, Expr v) : ExprNode(ExprKind::kCast, t, v->lanes), value(std::move(v)) {}
  Expr value;
};

// A buffer: a named region of memory with a dtype, a shape and (optionally) strides, all in
// elements. Empty strides mean row-major contiguous. Compared by identity.
struct BufferNode {
  enum class Scope { kGlobal, kLocal };  // kLocal: private to one kernel, allocated inside it
  std::string name;
  DType dtype;
  std::vector<Expr> shape;
  std::vector<Expr> strides;
  Scope scope = Scope::kGlobal;
};
using Buffer = std::shared_ptr<const BufferNode>;

struct LoadNode : ExprNode {
  LoadNode(Buffer b, std::vector<Expr> idx, int l)
      : ExprNode(ExprKind::kLoad, b->dtype, l), buffer(std::move(b)), indices(std::move(idx)) {}
  Buffer buffer;
  std::vector<Expr> indices;  // one per dim; one (flat) after buffer flattening
};
struct CallNode : ExprNode {
  CallNode(Intrinsic f, std::vector<Expr> a, DType t, int l)
      : ExprNode(ExprKind::kCall, t, l), fn(f), args(std::move(a)) {}
  Intrinsic fn;
  std::vector<Expr> args;
};
// base, base + stride, ..., base + (lanes - 1) * stride
struct RampNode : ExprNode {
  RampNode(Expr b, int64_t s, int l)
      : ExprNode(ExprKind::kRamp, b->dtype, l), base(std::move(b)), stride(s) {}
  Expr base;
  int64_t stride;
};
struct BroadcastNode : ExprNode {
  BroadcastNode(Expr v, int l) : ExprNode(ExprKind::kBroadcast, v->dtype, l), value(std::move(v)) {}
  Expr value;
};

// An iteration variable with its range [0, extent).
struct IterVar {
  Var var;
  Expr extent;
};

// combine(source) over every point of `axes`, starting from the combiner's identity. Made by
// lowering (a sum, a matmul's inner product); LowerReductions turns it into an accumulator
// loop, so code generators never see one.
struct ReduceNode : ExprNode {
  ReduceNode(ReduceKind k, Expr s, std::vector<IterVar> ax)
      : ExprNode(ExprKind::kReduce, s->dtype, 1),
        combiner(k),
        source(std::move(s)),
        axes(std::move(ax)) {}
  ReduceKind combiner;
  Expr source;
  std::vector<IterVar> axes;
};

// ---- Statements ----

struct StmtNode {
  explicit StmtNode(StmtKind k) : kind(k) {}
  virtual ~StmtNode() = default;
  const StmtKind kind;
};
using Stmt = std::shared_ptr<const StmtNode>;

struct LetStmtNode : StmtNode {
  LetStmtNode(Var v, Expr val, Stmt b)
      : StmtNode(StmtKind::kLetStmt),
        var(std::move(v)),
        value(std::move(val)),
        body(std::move(b)) {}
  Var var;
  Expr value;
  Stmt body;
};
struct StoreNode : StmtNode {
  StoreNode(Buffer b, std::vector<Expr> idx, Expr v)
      : StmtNode(StmtKind::kStore),
        buffer(std::move(b)),
        indices(std::move(idx)),
        value(std::move(v)) {}
  Buffer buffer;
  std::vector<Expr> indices;
  Expr value;
};
// Gives `buffer` (a kLocal buffer) storage from here until the matching Free in the same Seq.
struct AllocNode : StmtNode {
  explicit AllocNode(Buffer b) : StmtNode(StmtKind::kAlloc), buffer(std::move(b)) {}
  Buffer buffer;
};
struct FreeNode : StmtNode {
  explicit FreeNode(Buffer b) : StmtNode(StmtKind::kFree), buffer(std::move(b)) {}
  Buffer buffer;
};
struct IfThenElseNode : StmtNode {
  IfThenElseNode(Expr c, Stmt t, Stmt e)
      : StmtNode(StmtKind::kIfThenElse),
        cond(std::move(c)),
        then_case(std::move(t)),
        else_case(std::move(e)) {}
  Expr cond;
  Stmt then_case;
  Stmt else_case;  // may be null
};
struct ForNode : StmtNode {
  ForNode(Var v, Expr mn, Expr ext, ForKind k, Stmt b)
      : StmtNode(StmtKind::kFor),
        var(std::move(v)),
        min(std::move(mn)),
        extent(std::move(ext)),
        for_kind(k),
        body(std::move(b)) {}
  Var var;
  Expr min, extent;
  ForKind for_kind;
  Stmt body;
};
struct EvaluateNode : StmtNode {
  explicit EvaluateNode(Expr v) : StmtNode(StmtKind::kEvaluate), value(std::move(v)) {}
  Expr value;
};
// A hint that the element `target` (a scalar Load, never executed) will be read soon: code
// generators may fetch its cache line into the caches (LLVM: a prefetch into L2) or do
// nothing. Its index is in bounds, as a load's; results never depend on it.
struct PrefetchNode : StmtNode {
  explicit PrefetchNode(Expr t) : StmtNode(StmtKind::kPrefetch), target(std::move(t)) {}
  Expr target;
};

// The part of a buffer a schedule block reads or writes: [min, min + extent) per dim.
struct BufferRegion {
  Buffer buffer;
  std::vector<Expr> min;
  std::vector<Expr> extent;
};

// A unit of computation with named iteration variables bound to expressions of the
// surrounding loops, and the regions it reads and writes: what scheduling passes (tiling,
// reordering) reason about. `init` (may be null) runs on the first iteration of the
// reduction iter_vars.
struct ScheduleBlockNode : StmtNode {
  ScheduleBlockNode() : StmtNode(StmtKind::kScheduleBlock) {}
  std::string name;
  std::vector<IterVar> iter_vars;
  std::vector<bool> is_reduce;  // per iter_var
  std::vector<Expr> bindings;   // per iter_var
  std::vector<BufferRegion> reads, writes;
  Stmt init;
  Stmt body;
};

// A block in SPEC terms: statements run in order.
struct SeqNode : StmtNode {
  explicit SeqNode(std::vector<Stmt> s) : StmtNode(StmtKind::kSeq), stmts(std::move(s)) {}
  std::vector<Stmt> stmts;
};

// ---- Functions ----

// A kernel. Buffer parameters come first (inputs, then outputs), then scalar parameters
// (symbolic extents, passed at run time so shape-generic kernels can run any shape).
struct PrimFuncNode {
  std::string name;
  std::vector<Buffer> buffer_params;
  int num_inputs = 0;  // buffer_params[0, num_inputs) are read-only inputs
  std::vector<Var> scalar_params;
  Stmt body;
  Attrs attrs;
};
using PrimFunc = std::shared_ptr<const PrimFuncNode>;

// ---- Construction helpers ----
// Arithmetic helpers fold constants and apply the trivial identities (x + 0, x * 1) so that
// lowering produces readable IR; the Simplify pass does the rest.

Expr IntImm(int64_t v, DType t = DType::kInt64);
Expr FloatImm(double v, DType t = DType::kFloat32);
Expr BoolImm(bool v);
// A constant of any dtype (int or float immediate as the dtype requires).
Expr MakeConst(double v, DType t);
Var MakeVar(const std::string& name, DType t = DType::kInt64);
Expr MakeBinary(BinaryOp op, Expr a, Expr b);  // checks dtypes/lanes match; comparisons give bool
Expr Add(Expr a, Expr b);
Expr Sub(Expr a, Expr b);
Expr Mul(Expr a, Expr b);
Expr Div(Expr a, Expr b);
Expr FloorDiv(Expr a, Expr b);
Expr FloorMod(Expr a, Expr b);
Expr Min(Expr a, Expr b);
Expr Max(Expr a, Expr b);
Expr Not(Expr a);
Expr Select(Expr cond, Expr t, Expr f);
Expr Cast(DType t, Expr v);  // no-op when v already has dtype t
Expr Load(Buffer b, std::vector<Expr> indices);
Expr Call(Intrinsic fn, std::vector<Expr> args);
Expr Ramp(Expr base, int64_t stride, int lanes);
Expr Broadcast(Expr v, int lanes);
Expr Reduce(ReduceKind k, Expr source, std::vector<IterVar> axes);
// `e` as base + offset with a constant offset: `x + 4096`, `4096 + x` and `x - 4096` split; any
// other expression, a constant included, is itself plus 0.
std::pair<Expr, int64_t> SplitConstOffset(const Expr& e);

Buffer MakeBuffer(const std::string& name, DType t, std::vector<Expr> shape,
                  BufferNode::Scope scope = BufferNode::Scope::kGlobal,
                  std::vector<Expr> strides = {});

Stmt LetStmt(Var v, Expr value, Stmt body);
Stmt Store(Buffer b, std::vector<Expr> indices, Expr value);
Stmt Alloc(Buffer b);
Stmt Free(Buffer b);
Stmt IfThenElse(Expr cond, Stmt then_case, Stmt else_case = nullptr);
Stmt For(Var v, Expr min, Expr extent, ForKind kind, Stmt body);
Stmt Evaluate(Expr v);
// `target` must be a scalar Load (see PrefetchNode).
Stmt Prefetch(Expr target);
Stmt Seq(std::vector<Stmt> stmts);  // flattens nested Seqs; a single statement comes back as is

// Checked downcasts: nullptr when of another kind.
#define KILN_LOOP_EXPR(N)                                                                   \
  inline const N##Node* As##N(const Expr& e) {                                              \
    return e && e->kind == ExprKind::k##N ? static_cast<const N##Node*>(e.get()) : nullptr; \
  }
#define KILN_LOOP_STMT(N)                                                                   \
  inline const N##Node* As##N(const Stmt& s) {                                              \
    return s && s->kind == StmtKind::k##N ? static_cast<const N##Node*>(s.get()) : nullptr; \
  }
#include "ir/loop/loop_nodes.def"

// The integer value of an IntImm, if `e` is one.
bool IsConstInt(const Expr& e, int64_t* value = nullptr);
// The most iterations a loop of extent `e` runs: its value, or the bound of the tails that
// tiling and vectorization leave (`x % c` runs at most c - 1, a min at most its least bounded
// operand); nullopt when unknown. ParallelizeLoops counts such tails as short work, and the
// code generator keeps those shorter than a vector scalar.
std::optional<int64_t> ExtentBound(const Expr& e);

// Two's-complement wrap of `v` to the width of an integer dtype `t` (bool: 0 or 1), as
// generated code computes.
int64_t WrapToDType(int64_t v, DType t);
// The smallest and largest values of an integer (or bool) dtype that an IntImm can hold: the
// signed types' limits, 0 for unsigned and bool; u8's 255, bool's 1, else INT64_MAX.
int64_t IntDTypeMin(DType t);
int64_t IntDTypeMax(DType t);
// Wrapping i64 arithmetic without signed-overflow undefined behaviour.
inline int64_t WrapAdd(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}
inline int64_t WrapSub(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b));
}
inline int64_t WrapMul(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
}

// `a op b` on integer constants of dtype `t`, as generated code computes it: arithmetic wraps
// to `t`, comparisons give 0 or 1. False where the code generator's own defined behaviour
// decides (division or modulo by 0, MIN / -1), so that no fold can disagree with a kernel.
// MakeBinary and LoopSimplify both fold through this one function.
bool FoldIntBinary(BinaryOp op, int64_t a, int64_t b, DType t, int64_t* out);

// The value of an integer index expression (constants, `vars`, casts, binary ops) as generated
// code computes it, in int64; x / 0 and x % 0 are 0 and MIN / -1 wraps, as in the code
// generators. A variable not in `vars` or another kind of expression is kInvalidArgument naming
// it: launchers size grids and scratch with this from a kernel's scalar arguments.
int64_t EvalIndex(const Expr& e, const std::map<const VarNode*, int64_t>& vars);
// The same with the variables given by position: params[i] has values[i]. No allocation, for
// launch paths that evaluate per call.
int64_t EvalIndex(const Expr& e, const std::vector<Var>& params, const int64_t* values);

}  // namespace kiln::loop
