// PlanStorage: storage planning for the local buffers inside a kernel.
//
//   before:                                  after:
//     for i in [0, n) {                        alloc mx: f32[1] local
//       alloc mx: f32[1] local                 for i in [0, n) {
//       mx[0] = f32(-inf)                        mx[0] = f32(-inf)
//       for j in [0, 16) {                       for j in [0, 16) {
//         mx[0] = max(mx[0], x[i * 16 + j])        mx[0] = max(mx[0], x[i * 16 + j])
//       }                                        }
//       y[i] = mx[0]                             y[i] = mx[0]
//       free mx                                  mx[0] = 0.0f
//       alloc s: f32[1] local                    for j in [0, 16) {
//       s[0] = 0.0f                                mx[0] = mx[0] + x[i * 16 + j]
//       for j in [0, 16) {                       }
//         s[0] = s[0] + x[i * 16 + j]            z[i] = mx[0]
//       }                                      }
//       z[i] = s[0]                            free mx
//       free s
//     }
//
// Two rewrites, on every statement list (Seq), innermost first:
//  1. Hoisting. An Alloc/Free pair of constant size that sits directly in the body of a serial
//     or unrolled loop (and is the only Alloc of its buffer there) moves out of the loop, through
//     directly nested loops as far as they are serial: one allocation instead of one per
//     iteration. That is sound because a fresh allocation has no defined contents, so finding
//     the previous iteration's values there is one of its possible behaviours. Parallel,
//     vectorized and GPU loops keep theirs: their iterations run at once, and a shared buffer
//     would be a race. (The LLVM code generator already puts constant-size buffers of up to
//     16 KiB on the stack in the function's entry block; for those hoisting gains nothing by
//     itself, but it exposes lifetimes at the outer level to the second rewrite, and larger
//     buffers stop being malloc'ed once per iteration.)
//  2. Sharing. Local buffers allocated in the same list whose lifetimes (Alloc .. Free, or the
//     end of the list) do not overlap, with the same dtype and a constant size, share storage:
//     the later buffer is replaced by the earlier one, whose lifetime now spans both, with the
//     larger of the two sizes. Greedy, in order of allocation, best fit. Buffers of one layout
//     share the earlier buffer object as it is; buffers of different layouts can share only when
//     every access to them is a single flat index (after FlattenBuffers), and then share a new
//     rank-1 buffer of the largest span, named after the first. A buffer that a schedule block
//     names in a region, or that is allocated twice in the list, is left alone.
// The bytes saved per kernel are reported as a note in the PassContext's diagnostics.
//
// A block pass (passes/loop_pass.h): lifetimes are a property of one statement list, which is
// what a block pass sees; the adaptor shows it a kernel whose body is a single loop (no Seq
// around it) as a block of one, so its allocations are hoisted too, and the saving is reported
// per kernel when the adaptor is done with it.
#include <algorithm>
#include <memory>
#include <unordered_map>
#include <unordered_set>

#include "ir/error.h"
#include "ir/loop/loop_visitor.h"
#include "passes/loop_pass.h"

namespace kiln {

namespace {

using loop::Buffer;
using loop::BufferNode;
using loop::Expr;
using loop::Stmt;

// The number of elements a buffer's accesses can reach (1 + the largest offset), when its shape
// and strides are constants.
bool ConstSpan(const BufferNode& b, int64_t* span) {
  std::vector<int64_t> shape, strides;
  for (const Expr& e : b.shape) {
    int64_t v;
    if (!loop::IsConstInt(e, &v) || v < 0) return false;
    shape.push_back(v);
  }
  for (const Expr& e : b.strides) {
    int64_t v;
    if (!loop::IsConstInt(e, &v)) return false;
    strides.push_back(v);
  }
  if (strides.empty()) {  // row-major: the product of the dims
    int64_t n = 1;
    for (int64_t d : shape)
      if (__builtin_mul_overflow(n, d, &n)) return false;
    *span = n;
    return true;
  }
  int64_t last = 0;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 0) {
      *span = 0;
      return true;
    }
    int64_t reach;
    if (strides[d] < 0 || __builtin_mul_overflow(shape[d] - 1, strides[d], &reach) ||
        __builtin_add_overflow(last, reach, &last))
      return false;
  }
  *span = last + 1;
  return true;
}

bool SameLayout(const BufferNode& a, const BufferNode& b) {
  auto same = [](const std::vector<Expr>& x, const std::vector<Expr>& y) {
    if (x.size() != y.size()) return false;
    for (size_t i = 0; i < x.size(); ++i) {
      int64_t u, v;
      if (!loop::IsConstInt(x[i], &u) || !loop::IsConstInt(y[i], &v) || u != v) return false;
    }
    return true;
  };
  return same(a.shape, b.shape) && same(a.strides, b.strides);
}

// Whether a single index into `b` is the element offset itself: a flattened buffer (rank > 1
// with explicit strides) or a rank-1 buffer of stride 1.
bool IndexIsOffset(const BufferNode& b) {
  if (b.shape.size() > 1) return !b.strides.empty();
  int64_t stride;
  return b.shape.size() == 1 &&
         (b.strides.empty() || (loop::IsConstInt(b.strides[0], &stride) && stride == 1));
}

// How the statements of a list use each buffer.
struct Uses {
  std::unordered_set<const BufferNode*> multi_index;  // some access has other than one index
  std::unordered_set<const BufferNode*> in_region;    // named by a schedule block region
};

Uses CollectUses(const std::vector<Stmt>& stmts) {
  struct Collector : loop::Visitor {
    Uses uses;
    void Access(const Buffer& b, size_t num_indices) {
      if (num_indices != 1) uses.multi_index.insert(b.get());
    }
    void VisitLoad(const loop::LoadNode* n, const Expr& e) override {
      Access(n->buffer, n->indices.size());
      loop::Visitor::VisitLoad(n, e);
    }
    void VisitStore(const loop::StoreNode* n, const Stmt& s) override {
      Access(n->buffer, n->indices.size());
      loop::Visitor::VisitStore(n, s);
    }
    void VisitScheduleBlock(const loop::ScheduleBlockNode* n, const Stmt& s) override {
      for (const auto* regions : {&n->reads, &n->writes})
        for (const loop::BufferRegion& r : *regions) uses.in_region.insert(r.buffer.get());
      loop::Visitor::VisitScheduleBlock(n, s);
    }
  } collector;
  for (const Stmt& s : stmts) collector.VisitStmt(s);
  return collector.uses;
}

// Replaces buffers by the ones they share storage with.
class ReplaceBuffers : public loop::Mutator {
 public:
  explicit ReplaceBuffers(const std::unordered_map<const BufferNode*, Buffer>& map) : map_(map) {}

 protected:
  Buffer MutateBuffer(const Buffer& b) override {
    auto it = map_.find(b.get());
    return it == map_.end() ? b : it->second;
  }

 private:
  const std::unordered_map<const BufferNode*, Buffer>& map_;
};

// ---- hoisting ----

struct Hoisted {
  std::vector<Buffer> buffers;  // allocated before the loop, freed after it, in this order
  Stmt loop;
};

// allocs..., s, frees... (in reverse)
Stmt Surround(const Hoisted& h) {
  if (h.buffers.empty()) return h.loop;
  std::vector<Stmt> out;
  for (const Buffer& b : h.buffers) out.push_back(loop::Alloc(b));
  out.push_back(h.loop);
  for (auto it = h.buffers.rbegin(); it != h.buffers.rend(); ++it) out.push_back(loop::Free(*it));
  return loop::Seq(std::move(out));
}

// Takes the constant-size Alloc/Free pairs out of loop `s` (and out of the loops directly nested
// in it, as far as they let them through).
Hoisted Hoist(const Stmt& s) {
  const loop::ForNode* f = loop::AsFor(s);
  if (!f) return {{}, s};
  Stmt body = f->body;
  if (loop::AsFor(body)) body = Surround(Hoist(body));
  bool serial = f->for_kind == loop::ForKind::kSerial || f->for_kind == loop::ForKind::kUnrolled;
  const loop::SeqNode* seq = loop::AsSeq(body);
  std::vector<Buffer> lifted;
  if (serial && seq) {
    std::unordered_map<const BufferNode*, int> allocs, frees;
    for (const Stmt& st : seq->stmts) {
      if (const loop::AllocNode* a = loop::AsAlloc(st)) ++allocs[a->buffer.get()];
      if (const loop::FreeNode* fr = loop::AsFree(st)) ++frees[fr->buffer.get()];
    }
    std::unordered_set<const BufferNode*> take;
    for (const Stmt& st : seq->stmts) {
      const loop::AllocNode* a = loop::AsAlloc(st);
      int64_t span;
      if (a && allocs[a->buffer.get()] == 1 && frees[a->buffer.get()] == 1 &&
          ConstSpan(*a->buffer, &span)) {
        take.insert(a->buffer.get());
        lifted.push_back(a->buffer);
      }
    }
    if (!take.empty()) {
      std::vector<Stmt> rest;
      for (const Stmt& st : seq->stmts) {
        const loop::AllocNode* a = loop::AsAlloc(st);
        const loop::FreeNode* fr = loop::AsFree(st);
        if ((a && take.count(a->buffer.get())) || (fr && take.count(fr->buffer.get()))) continue;
        rest.push_back(st);
      }
      body = loop::Seq(std::move(rest));
    }
  }
  if (body == f->body) return {{}, s};
  return {std::move(lifted), loop::For(f->var, f->min, f->extent, f->for_kind, body)};
}

// ---- sharing ----

struct Lifetime {
  Buffer buffer;
  size_t alloc, free;  // positions in the list; free == size() when there is no Free
  int64_t span;
  bool flat;  // every access is a single index that is the element offset
};

struct Slot {
  std::vector<const Lifetime*> members;
  int64_t span;
  bool flat;         // every member is
  bool same_layout;  // every member has the first one's
  size_t end;
};

// Shares storage between the non-overlapping local buffers of `stmts`; adds the bytes it saves
// to *saved.
std::vector<Stmt> ShareStorage(const std::vector<Stmt>& stmts, int64_t* saved) {
  std::unordered_map<const BufferNode*, int> alloc_count;
  for (const Stmt& s : stmts)
    if (const loop::AllocNode* a = loop::AsAlloc(s)) ++alloc_count[a->buffer.get()];
  Uses uses = CollectUses(stmts);
  std::vector<Lifetime> lifetimes;
  for (size_t p = 0; p < stmts.size(); ++p) {
    const loop::AllocNode* a = loop::AsAlloc(stmts[p]);
    if (!a) continue;
    const BufferNode& b = *a->buffer;
    Lifetime lt{a->buffer, p, stmts.size(), 0, false};
    if (alloc_count[&b] != 1 || uses.in_region.count(&b) || !ConstSpan(b, &lt.span)) continue;
    for (size_t q = p + 1; q < stmts.size(); ++q) {
      const loop::FreeNode* fr = loop::AsFree(stmts[q]);
      if (fr && fr->buffer.get() == &b) {
        lt.free = q;
        break;
      }
    }
    lt.flat = IndexIsOffset(b) && !uses.multi_index.count(&b);
    lifetimes.push_back(lt);
  }
  if (lifetimes.size() < 2) return stmts;

  std::vector<Slot> slots;
  for (const Lifetime& lt : lifetimes) {
    Slot* best = nullptr;
    for (Slot& slot : slots) {
      const BufferNode& first = *slot.members[0]->buffer;
      bool layout = slot.same_layout && SameLayout(first, *lt.buffer);
      if (slot.end >= lt.alloc || first.dtype != lt.buffer->dtype ||
          !(layout || (slot.flat && lt.flat)))
        continue;
      // Best fit: the smallest slot that holds it, else the largest (which grows least).
      auto fits = [&](const Slot* s) { return s->span >= lt.span; };
      if (!best || (fits(&slot) && (!fits(best) || slot.span < best->span)) ||
          (!fits(&slot) && !fits(best) && slot.span > best->span))
        best = &slot;
    }
    if (!best) {
      slots.push_back(Slot{{&lt}, lt.span, lt.flat, true, lt.free});
      continue;
    }
    best->same_layout = best->same_layout && SameLayout(*best->members[0]->buffer, *lt.buffer);
    best->flat = best->flat && lt.flat;
    best->span = std::max(best->span, lt.span);
    best->end = lt.free;
    best->members.push_back(&lt);
  }

  std::unordered_map<const BufferNode*, Buffer> storage;  // member -> the buffer it becomes
  std::unordered_set<const BufferNode*> drop_alloc, drop_free;
  for (const Slot& slot : slots) {
    if (slot.members.size() < 2) continue;
    const Buffer& first = slot.members[0]->buffer;
    Buffer shared = slot.same_layout
                        ? first
                        : loop::MakeBuffer(first->name, first->dtype, {loop::IntImm(slot.span)},
                                           BufferNode::Scope::kLocal);
    int64_t total = 0;
    for (size_t i = 0; i < slot.members.size(); ++i) {
      const BufferNode* m = slot.members[i]->buffer.get();
      storage[m] = shared;
      total += slot.members[i]->span;
      if (i > 0) drop_alloc.insert(m);
      if (i + 1 < slot.members.size()) drop_free.insert(m);
    }
    *saved += (total - slot.span) * DTypeSize(first->dtype);
  }
  if (storage.empty()) return stmts;

  ReplaceBuffers replace(storage);
  std::vector<Stmt> out;
  for (const Stmt& s : stmts) {
    const loop::AllocNode* a = loop::AsAlloc(s);
    const loop::FreeNode* fr = loop::AsFree(s);
    if ((a && drop_alloc.count(a->buffer.get())) || (fr && drop_free.count(fr->buffer.get())))
      continue;
    out.push_back(replace.MutateStmt(s));
  }
  return out;
}

std::vector<Stmt> PlanBlock(const std::vector<Stmt>& stmts, int64_t* saved) {
  std::vector<Stmt> hoisted;
  for (const Stmt& s : stmts) {
    Stmt h = Surround(Hoist(s));
    if (const loop::SeqNode* seq = loop::AsSeq(h); seq && h != s) {
      hoisted.insert(hoisted.end(), seq->stmts.begin(), seq->stmts.end());
    } else {
      hoisted.push_back(h);
    }
  }
  return ShareStorage(hoisted, saved);
}

// Plans each block as the adaptor shows it, innermost first, and reports the kernel's saving.
class StoragePlanner : public LoopBlockPass {
 public:
  std::vector<Stmt> RunOnBlock(const std::vector<Stmt>& stmts, const LoopBlockContext&) override {
    return PlanBlock(stmts, &saved_);
  }
  void Finish(const loop::PrimFunc& f, const PassContext& ctx) override {
    if (saved_ > 0)
      ctx.Report(
          Diagnostic{Diagnostic::Level::kNote, "PlanStorage",
                     StrCat("@", f->name, ": sharing local storage saves ", saved_, " bytes")});
  }

 private:
  int64_t saved_ = 0;
};

}  // namespace

void RegisterPlanStoragePass(PassRegistry& r) {
  r.Register(PassRegistration{
      .name = "PlanStorage",
      .opt_level = 1,
      .required = {},
      .options = {},
      .doc = "hoist constant-size local buffers out of serial loops and share storage between "
             "local buffers whose lifetimes do not overlap",
      .create =
          [](const Attrs& o) {
            return CreateLoopBlockPass(
                PassInfo{"PlanStorage", 1, {}}, [] { return std::make_unique<StoragePlanner>(); },
                o);
          },
  });
}

}  // namespace kiln
