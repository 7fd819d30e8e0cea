// FlattenBuffers: every multi-dimensional access becomes one flat element offset.
//
//   before:  func @k(%a: f32[n, 16], %out: f32[n, 16]; n: i64) {
//              for i in [0, n) { for j in [0, 16) { out[i, j] = a[i, j] * 2.0f } }
//            }
//   after:   func @k(%a: f32[n, 16] strides [16, 1], %out: f32[n, 16] strides [16, 1]; n: i64) {
//              for i in [0, n) { for j in [0, 16) { out[i * 16 + j] = a[i * 16 + j] * 2.0f } }
//            }
//
// The offset is sum(index[d] * stride[d]) with the buffer's own strides, or row-major strides
// from its shape when it has none. Such a buffer is re-made with those strides written out, and
// keeps its shape: Verify accepts a single index into a rank > 1 buffer only when the buffer has
// explicit strides (then it checks the index against the span they give), and the LLVM code
// generator reads a single index into a rank > 1 buffer as the element offset itself. Keeping
// the shape (rather than [numel]) also keeps schedule-block regions, which are per dim, valid.
// Rank-0 and rank-1 accesses are left as they are: both readers take a rank-1 buffer's one index
// as an index into dim 0 (scaled by its stride, if it has one), so there is nothing to flatten.
//
// Vector indices stay in the forms the code generator turns into plain vector accesses: a ramp
// times a constant stride becomes a ramp (`ramp(j, 1, 4) * 16` -> `ramp(j * 16, 16, 4)`), and
// scalar terms are added to the ramp's base.
//
// A function pass: a re-made buffer replaces the old one everywhere, in the signature too
// (buffer_params keeps its order, so the k-th parameter still binds the k-th pointer), and
// every reference to one buffer must name the same new object.

#include "ir/loop/loop_visitor.h"
#include "passes/loop/loop_analysis.h"
#include "passes/loop_pass.h"

namespace kiln {

namespace {

using loop::Buffer;
using loop::Expr;
using loop::Stmt;

// sum(indices[d] * strides[d]), with vector indices kept as ramps where they can be.
Expr FlatOffset(const std::vector<Expr>& indices, const std::vector<Expr>& strides) {
  Expr scalar = loop::IntImm(0);
  Expr vector;  // the sum of the terms with more than one lane
  for (size_t d = 0; d < indices.size(); ++d) {
    Expr index = loop::Cast(DType::kInt64, indices[d]);
    const Expr& stride = strides[d];
    if (index->lanes == 1) {
      scalar = loop::Add(scalar, loop::Mul(index, stride));
      continue;
    }
    if (const loop::BroadcastNode* b = loop::AsBroadcast(index)) {
      scalar = loop::Add(scalar, loop::Mul(b->value, stride));
      continue;
    }
    Expr term;
    int64_t c, s;
    const loop::RampNode* r = loop::AsRamp(index);
    if (r && loop::IsConstInt(stride, &c) && !__builtin_mul_overflow(r->stride, c, &s)) {
      term = loop::Ramp(loop::Mul(r->base, stride), s, r->lanes);
    } else {
      term = loop::Mul(index, loop::Broadcast(stride, index->lanes));
    }
    vector = vector ? loop::Add(vector, term) : term;
  }
  if (!vector) return scalar;
  if (const loop::RampNode* r = loop::AsRamp(vector))
    return loop::Ramp(loop::Add(scalar, r->base), r->stride, r->lanes);
  int64_t zero;
  if (loop::IsConstInt(scalar, &zero) && zero == 0) return vector;
  return loop::Add(vector, loop::Broadcast(scalar, vector->lanes));
}

class Flattener : public loop::Mutator {
 public:
  // The buffer that replaces `b`: `b` itself, or `b` with explicit row-major strides.
  Buffer Flat(const Buffer& b) { return MutateBuffer(b); }

 protected:
  Buffer MutateBuffer(const Buffer& b) override { return strided_.Strided(b); }

  Expr MutateLoad(const loop::LoadNode* n, const Expr& self) override {
    bool changed = false;
    Buffer b = MutateBuffer(n->buffer);
    std::vector<Expr> indices = Flatten(b, MutateExprs(n->indices, &changed), &changed);
    if (!changed && b == n->buffer) return self;
    return loop::Load(std::move(b), std::move(indices));
  }

  Stmt MutateStore(const loop::StoreNode* n, const Stmt& self) override {
    bool changed = false;
    Buffer b = MutateBuffer(n->buffer);
    std::vector<Expr> indices = Flatten(b, MutateExprs(n->indices, &changed), &changed);
    Expr value = MutateExpr(n->value);
    if (!changed && b == n->buffer && value == n->value) return self;
    return loop::Store(std::move(b), std::move(indices), std::move(value));
  }

 private:
  // One index per dim of a rank > 1 buffer -> its flat offset; anything else as it is.
  static std::vector<Expr> Flatten(const Buffer& b, std::vector<Expr> indices, bool* changed) {
    if (indices.size() < 2 || indices.size() != b->strides.size()) return indices;  // Verify's job
    *changed = true;
    return {FlatOffset(indices, b->strides)};
  }

  loop::ExplicitStrides strided_;
};

loop::PrimFunc FlattenBuffers(const loop::PrimFunc& f, const PassContext&) {
  Flattener flattener;
  Stmt body = flattener.MutateStmt(f->body);
  std::vector<Buffer> params;
  bool changed = body != f->body;
  for (const Buffer& b : f->buffer_params) {
    params.push_back(flattener.Flat(b));
    changed |= params.back() != b;
  }
  if (!changed) return f;
  auto out = std::make_shared<loop::PrimFuncNode>(*f);
  out->buffer_params = std::move(params);
  out->body = std::move(body);
  return out;
}

}  // namespace

void RegisterFlattenBuffersPass(PassRegistry& r) {
  r.Register(PassRegistration{
      .name = "FlattenBuffers",
      .opt_level = 0,
      .required = {},
      .options = {},
      .doc = "turn every multi-dimensional buffer access into one flat element offset",
      .create =
          [](const Attrs& o) {
            return CreateLoopFuncPass(PassInfo{"FlattenBuffers", 0, {}}, FlattenBuffers, o);
          },
  });
}

}  // namespace kiln
