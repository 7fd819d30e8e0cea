#include "engine/generic_bind.h"

#include <algorithm>
#include <set>
#include <utility>

#include "ir/error.h"

namespace kiln {

namespace {

// A binding of `generic` that shares its code; the per-shape fields copied from it, to be
// filled in (the shapes, the plan's offsets, the scalars).
std::shared_ptr<Executable> NewBinding(const Executable& generic) {
  auto exe = std::make_shared<Executable>();
  exe->model_id = generic.model_id;
  exe->inputs = generic.inputs;
  exe->outputs = generic.outputs;
  exe->code = generic.code;
  exe->buffer_refs = generic.buffer_refs;
  exe->scalars = generic.scalars;
  exe->copies = generic.copies;
  exe->intermediates = generic.intermediates;
  exe->parallel = generic.parallel;
  exe->tier = Tier::kGeneric;
  return exe;
}

// The memory plan of a binding whose intermediates have their sizes, and every arena
// reference's offset in it; the output copies get their sizes.
void PlaceBuffers(Executable* exe) {
  std::vector<BufferLifetime> lifetimes;
  lifetimes.reserve(exe->intermediates.size());
  for (IntermediateBuffer& b : exe->intermediates) {
    b.lifetime.bytes = b.type.nbytes;
    lifetimes.push_back(b.lifetime);
  }
  exe->plan = PlanMemory(lifetimes);
  for (BufferRef& r : exe->buffer_refs)
    if (r.kind == BufferRef::Kind::kArena) r.offset = exe->plan.offsets[r.index];
  for (OutputCopy& c : exe->copies) c.nbytes = exe->outputs[c.output].nbytes;
}

}  // namespace

std::shared_ptr<const GenericBinder> GenericBinder::Make(
    const std::vector<TensorSignature>& inputs, const GenericShapes& shapes,
    const std::vector<DimConstraint>& constraints) {
  if (inputs.size() != shapes.inputs.size()) return nullptr;
  auto b = std::make_shared<GenericBinder>();
  std::vector<std::string> names;  // the inputs' symbols, by slot
  auto slot_of = [&](const std::string& name) {
    for (size_t i = 0; i < names.size(); ++i)
      if (names[i] == name) return static_cast<int64_t>(i);
    names.push_back(name);
    return static_cast<int64_t>(names.size() - 1);
  };
  for (size_t i = 0; i < inputs.size(); ++i) {
    b->dtypes_.push_back(inputs[i].dtype);
    b->first_.push_back(static_cast<uint32_t>(b->dims_.size()));
    for (const Dim& d : shapes.inputs[i]) {
      if (d.is_const())
        b->dims_.push_back({-1, d.value()});
      else if (d.is_symbol())
        b->dims_.push_back({slot_of(d.name()), 0});
      else
        return nullptr;  // an expression: bound the slow way, which checks it
    }
  }
  b->first_.push_back(static_cast<uint32_t>(b->dims_.size()));
  b->num_symbols_ = names.size();

  std::vector<Dim> dims;
  for (const std::vector<Shape>* list : {&shapes.outputs, &shapes.intermediates})
    for (const Shape& shape : *list) {
      dims.insert(dims.end(), shape.begin(), shape.end());
      b->ranks_.push_back(static_cast<uint32_t>(shape.size()));
    }
  b->num_shape_dims_ = dims.size();
  // A constraint over a symbol the inputs do not bind is one CheckConstraints cannot decide
  // either (it skips it): left out.
  const std::set<std::string> bound(names.begin(), names.end());
  for (const DimConstraint& c : constraints) {
    std::set<std::string> used;
    c.a.CollectSymbols(&used);
    c.b.CollectSymbols(&used);
    bool decidable = true;
    for (const std::string& u : used) decidable = decidable && bound.count(u);
    if (!decidable) continue;
    dims.push_back(c.a);
    dims.push_back(c.b);
    b->constraints_.push_back(c.kind);
  }
  b->program_ = DimProgram(dims, names);
  if (b->program_.symbols().size() != b->num_symbols_) return nullptr;  // a shape reads one
  for (const std::string& s : shapes.scalar_symbols) {
    int64_t slot = slot_of(s);
    if (static_cast<size_t>(slot) >= b->num_symbols_) return nullptr;
    b->scalar_slots_.push_back(slot);
  }
  return b;
}

std::shared_ptr<Executable> GenericBinder::Bind(const Executable& generic,
                                                std::span<const Tensor> inputs) const {
  if (inputs.size() != dtypes_.size()) return nullptr;
  // One array: the symbols' values by slot, then the program's results.
  std::vector<int64_t> values(num_symbols_ + program_.size(), -1);
  int64_t* slots = values.data();
  int64_t* results = slots + num_symbols_;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    const uint32_t first = first_[i], rank = first_[i + 1] - first;
    if (!t.defined() || t.dtype() != dtypes_[i] || static_cast<uint32_t>(t.ndim()) != rank)
      return nullptr;
    for (uint32_t d = 0; d < rank; ++d) {
      const InputDim& want = dims_[first + d];
      const int64_t got = t.shape()[d];
      if (want.slot < 0) {
        if (got != want.value) return nullptr;
      } else if (slots[want.slot] < 0) {  // a tensor's dims are never negative: unset
        slots[want.slot] = got;
      } else if (slots[want.slot] != got) {
        return nullptr;
      }
    }
  }
  if (!program_.Eval(slots, results)) return nullptr;
  const int64_t* pair = results + num_shape_dims_;
  for (DimConstraint::Kind kind : constraints_) {
    const int64_t a = pair[0], b = pair[1];
    pair += 2;
    const bool ok = kind == DimConstraint::Kind::kEqual    ? a == b
                    : kind == DimConstraint::Kind::kAtMost ? a <= b
                                                           : (a == b || a == 1 || b == 1);
    if (!ok) return nullptr;
  }

  std::shared_ptr<Executable> exe = NewBinding(generic);
  for (size_t i = 0; i < inputs.size(); ++i) {
    exe->inputs[i].shape = inputs[i].shape();
    exe->inputs[i].nbytes = inputs[i].nbytes();
  }
  const int64_t* next = results;
  const uint32_t* rank = ranks_.data();
  auto bind = [&](TensorSignature* sig) {
    sig->shape.assign(next, next + *rank);
    next += *rank++;
    int64_t numel = 1;
    for (int64_t d : sig->shape)
      if (d < 0 || __builtin_mul_overflow(numel, d, &numel)) return false;
    return !__builtin_mul_overflow(static_cast<size_t>(numel), DTypeSize(sig->dtype), &sig->nbytes);
  };
  if (exe->outputs.size() + exe->intermediates.size() != ranks_.size()) return nullptr;
  for (TensorSignature& o : exe->outputs)
    if (!bind(&o)) return nullptr;
  for (IntermediateBuffer& b : exe->intermediates)
    if (!bind(&b.type)) return nullptr;
  for (size_t i = 0; i < scalar_slots_.size(); ++i) exe->scalars[i] = slots[scalar_slots_[i]];
  const std::vector<std::string>& names = program_.symbols();
  for (size_t s = 0; s < num_symbols_; ++s) exe->symbols.emplace(names[s], slots[s]);
  PlaceBuffers(exe.get());
  return exe;
}

bool BindsAnEmptyTensor(const Executable& binding) {
  auto empty = [](const TensorSignature& t) { return t.nbytes == 0; };
  return std::any_of(binding.inputs.begin(), binding.inputs.end(), empty) ||
         std::any_of(binding.outputs.begin(), binding.outputs.end(), empty) ||
         std::any_of(binding.intermediates.begin(), binding.intermediates.end(),
                     [&](const IntermediateBuffer& b) { return empty(b.type); });
}

void PrefetchGeneric(const Executable& generic) {
  // A budget well inside any L2 (512 KiB on Zen 1): more would evict what the run needs.
  constexpr size_t kBudget = 256 << 10, kLine = 64;
  size_t left = kBudget;
  const void* last = nullptr;  // kernels of one module share its text
  for (const KernelLaunch& k : generic.launches()) {
    if (k.entry->text == last || !k.entry->text) continue;
    last = k.entry->text;
    const char* p = static_cast<const char*>(last);
    const size_t bytes = std::min(k.entry->text_bytes, left);
    left -= bytes;
    for (size_t o = 0; o < bytes; o += kLine) __builtin_prefetch(p + o, 0, 2);
  }
}

std::shared_ptr<const Executable> BindGeneric(const Executable& generic,
                                              const std::map<std::string, int64_t>& symbols,
                                              std::string shape_key) {
  KILN_CHECK(generic.generic, "BindGeneric of an executable that is not shape-generic");
  const GenericShapes& g = *generic.generic;
  std::shared_ptr<Executable> exe = NewBinding(generic);
  exe->shape_key = std::move(shape_key);
  exe->symbols = symbols;
  // `what` names the tensor in an error only: a new shape's first request binds every tensor,
  // and formatting a name per tensor that only an error shows was work on every one.
  auto bind = [&](const Shape& shape, TensorSignature* sig, auto what) {
    sig->shape.resize(shape.size());
    for (size_t d = 0; d < shape.size(); ++d) {
      std::optional<int64_t> v = shape[d].TryEval(symbols);
      if (!v || *v < 0)
        Throw(ErrorCode::kInvalidArgument, exe->shape_key, ": ", what(), " would have shape ",
              ShapeToString(shape), " = dim ", d, " of ", v ? StrCat(*v) : "no value",
              "; the inputs are too small for the model");
      sig->shape[d] = *v;
    }
    int64_t numel = 1;
    for (int64_t d : sig->shape)
      if (__builtin_mul_overflow(numel, d, &numel)) CheckedNumel(sig->shape, what());  // throws
    sig->nbytes = static_cast<size_t>(numel) * DTypeSize(sig->dtype);
  };
  for (size_t i = 0; i < g.inputs.size(); ++i)
    bind(g.inputs[i], &exe->inputs[i], [i] { return StrCat("input ", i); });
  for (size_t i = 0; i < g.outputs.size(); ++i)
    bind(g.outputs[i], &exe->outputs[i], [i] { return StrCat("output ", i); });
  for (size_t i = 0; i < g.intermediates.size(); ++i) {
    IntermediateBuffer& b = exe->intermediates[i];
    bind(g.intermediates[i], &b.type,
         [&] { return StrCat("the result of kernel '", exe->launches()[b.producer].name, "'"); });
  }
  for (size_t i = 0; i < g.scalar_symbols.size(); ++i) {
    auto it = symbols.find(g.scalar_symbols[i]);
    if (it == symbols.end())
      Throw(ErrorCode::kInternal, exe->shape_key, ": symbol '", g.scalar_symbols[i],
            "' is unbound");
    exe->scalars[i] = it->second;
  }
  PlaceBuffers(exe.get());
  return exe;
}

}  // namespace kiln
