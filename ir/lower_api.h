// The interface between an op's lowering (in its ir/ops/ file) and the lowering of a fused
// group to one loop-IR function (passes/lower_to_loops.cc).
//
// An op lowers to tensors described by their shape and a function from an output index to
// the element's value (TVM's compute, Halide's Func). Elementwise and injective ops return
// such functions built from their inputs' functions, so a chain of them inlines into one loop
// nest. Reductions return a function whose value is a loop::Reduce; the group lowering decides
// whether to inline it (a matmul into its epilogue) or materialize it into a local buffer
// (when consumers would read it at other indices, e.g. softmax's row max).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ir/attrs.h"
#include "ir/dim.h"
#include "ir/loop/loop.h"
#include "ir/type.h"

namespace kiln {

struct BoxedTensor;

struct LTensor {
  DType dtype;
  std::vector<loop::Expr> shape;  // i64 expressions: constants or symbolic extents
  std::function<loop::Expr(const std::vector<loop::Expr>& index)> at;
  // Set by a constant pad that crops nothing: the tensor is box->fill outside a box of
  // box->inner's shape at offset box->lo, and box->inner inside. Whoever stores the whole
  // tensor (a kernel's result, a local buffer) writes the border and the box in separate loop
  // nests, so the box's nest has no select and the reductions in box->inner tile as they would
  // unpadded. `at` stays right for any other reader. Null for every other tensor.
  std::shared_ptr<const BoxedTensor> box = nullptr;
  int ndim() const { return static_cast<int>(shape.size()); }
};

struct BoxedTensor {
  LTensor inner;
  std::vector<int64_t> lo;  // the box's first index along each dim
  loop::Expr fill;          // the value outside the box, of the tensor's dtype
};

class LowerContext {
 public:
  virtual ~LowerContext() = default;
  // The loop expression of a graph dimension (symbols become the kernel's scalar parameters).
  virtual loop::Expr DimExpr(const Dim& d) = 0;
  std::vector<loop::Expr> ShapeExpr(const Shape& s) {
    std::vector<loop::Expr> out;
    for (const Dim& d : s) out.push_back(DimExpr(d));
    return out;
  }
  // Computes `t` into a new kernel-local buffer before the rest of the kernel runs, and returns
  // a tensor that reads it. Use for values read at many indices (a reduced row max).
  virtual LTensor Materialize(const LTensor& t, const std::string& name) = 0;
  // Materialize, except where `empty` holds at run time (a condition on the kernel's scalars,
  // the same for every element: an input's symbolic extent is 0): then the buffer is all
  // `fill` and `t` is never read. For a tensor whose clamped reads stay in bounds only while its
  // input has elements (an index clamped into an empty axis is 0, and with the dims inside it
  // still reaches past the buffer), at no cost per element.
  virtual LTensor MaterializeUnless(const LTensor& t, const std::string& name,
                                    const loop::Expr& empty, const loop::Expr& fill) = 0;
  // A new kernel-local buffer of `shape` filled by the statements `fill` returns for it (run
  // before the rest of the kernel, as Materialize's loop nest), and a tensor that reads it: for
  // values a single loop nest computes poorly (a zero border around a copied interior).
  virtual LTensor MaterializeFill(DType dtype, const std::vector<loop::Expr>& shape,
                                  const std::string& name,
                                  const std::function<loop::Stmt(const loop::Buffer&)>& fill) = 0;
  // A fresh index variable (for reduction axes).
  virtual loop::Var NewVar(const std::string& name) = 0;
};

// out_types: the call's result type (one per output; several for tuple results).
using LowerFn =
    std::function<std::vector<LTensor>(LowerContext& ctx, const std::vector<LTensor>& inputs,
                                       const Attrs& attrs, const std::vector<Type>& out_types)>;

// Helpers for op lowerings.
namespace lower {

// The index into `in` (an input of a NumPy-broadcasting op) for an output index: dims aligned
// from the right; a dim that is 1 reads index 0; a symbolic dim that might be 1 at run time
// reads select(dim == 1, 0, i).
std::vector<loop::Expr> BroadcastIndex(const LTensor& in, const std::vector<loop::Expr>& out_index);
// The same, knowing the output's shape (its trailing dims, aligned from the right, at least as
// many as `in` has): a symbolic dim equal to the output's reads the output index as it is (if
// it is 1, so is the output's, whose index is then 0), so the select goes where the shapes
// say no broadcast happens. A select in every load kept TileLoops off shape-generic matmuls
// (the encoder's attention scores at batch 1 x seq 128 took 24x their specialized time).
std::vector<loop::Expr> BroadcastIndex(const LTensor& in, const std::vector<loop::Expr>& out_index,
                                       const std::vector<loop::Expr>& out_shape);

// An elementwise result of the same shape as `like`.
LTensor Map(const LTensor& like, DType dtype,
            std::function<loop::Expr(const std::vector<loop::Expr>&)> at);

// reduce(kind, source(index with reduced axes)) over `axes` of `in`; keepdims as the op says.
LTensor ReduceAxes(LowerContext& ctx, const LTensor& in, const std::vector<int>& axes,
                   bool keepdims, loop::ReduceKind kind,
                   const std::function<loop::Expr(const loop::Expr& element)>& source = nullptr);

loop::Expr Const(double v, DType t);

// `t` for an op that reads each element several times (a normalization's or softmax's passes
// over a row): when `t` is a fused producer's computation rather than a read of a buffer, it is
// computed once into a kernel-local buffer named `name` (as an unfused graph would store it),
// so the passes do not each recompute it; a plain read comes back as it is.
LTensor ComputeOnce(LowerContext& ctx, const LTensor& t, const std::string& name);

// The loop expression of a dimension, with `symbol` giving the expression of each symbol.
loop::Expr DimToExpr(const Dim& d, const std::function<loop::Expr(const std::string&)>& symbol);

}  // namespace lower
}  // namespace kiln
