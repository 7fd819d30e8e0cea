// The miss path: one model specialized to concrete input shapes and built into an Executable.
//
//   bind the symbols (batch = 3) -> BindSymbols re-infers concrete types -> ResolveDynamic
//   (shapes computed as values, value inputs: ir/dynamic.h) -> graph pipeline
//   under the engine's PassContext -> FuseOps -> for each fused group: kernel cache, else
//   LowerToLoops + loop pipeline + codegen (CompileKernel) -> buffer slots and lifetimes ->
//   memory plan -> Executable
//
// Every error is rethrown with the shape key in front (`mlp(x: f32[3, 8]): pass 'FuseOps':
// ...`); the executable is only published by the caller once this returns, so a failure
// leaves nothing half-built in any cache.
#include <cctype>
#include <charconv>
#include <chrono>
#include <exception>
#include <optional>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "engine/device_dispatch.h"
#include "engine/engine.h"
#include "engine/generic_bind.h"
#include "ir/dynamic.h"
#include "ir/error.h"
#include "ir/loop/loop_visitor.h"
#include "ir/type_infer.h"
#include "jit/tbb_handoff.h"

namespace kiln {

namespace {

// `f32[3, 8]` appended with plain appends: shape keys are made on a new shape's first request,
// where StrCat's stream (a locale and a buffer per call) was most of the key's cost, cold.
void AppendSignature(std::string* out, DType dtype, const std::vector<int64_t>& shape) {
  *out += DTypeName(dtype);
  *out += '[';
  char digits[24];
  for (size_t d = 0; d < shape.size(); ++d) {
    if (d) *out += ", ";
    out->append(digits, std::to_chars(digits, digits + sizeof(digits), shape[d]).ptr);
  }
  *out += ']';
}

}  // namespace

std::string TensorSignature::ToString() const {
  std::string s;
  AppendSignature(&s, dtype, shape);
  return s;
}

namespace {

// A tensor's dtype and shape, symbolic in a shape-generic build.
struct TypedShape {
  DType dtype = DType::kFloat32;
  Shape shape;
};

TypedShape ShapeOf(const Type& t, const std::string& what, bool generic) {
  const TensorTypeNode* tt = AsTensor(t);
  if (!tt || (!generic && !IsConstShape(tt->shape)))
    Throw(ErrorCode::kInternal, what, " has type ", TypeToString(t),
          " after specialization; expected a tensor of concrete shape");
  return {tt->dtype, tt->shape};
}

// The signature of a concrete shape; in a generic build, a placeholder that BindGeneric fills.
TensorSignature SignatureOf(const TypedShape& t, const std::string& what) {
  TensorSignature s;
  s.dtype = t.dtype;
  if (!IsConstShape(t.shape)) return s;
  s.shape = ConstShape(t.shape);
  s.nbytes = static_cast<size_t>(CheckedNumel(s.shape, what)) * DTypeSize(s.dtype);
  return s;
}

// The tensors a value of type `t` holds, flattened in order (a tensor is one).
int CountLeaves(const Type& t) {
  const TupleTypeNode* tup = AsTuple(t);
  if (!tup) return 1;
  int n = 0;
  for (const Type& f : tup->fields) n += CountLeaves(f);
  return n;
}

void FlattenTypes(const Type& t, std::vector<Type>* out) {
  if (const TupleTypeNode* tup = AsTuple(t)) {
    for (const Type& f : tup->fields) FlattenTypes(f, out);
  } else {
    out->push_back(t);
  }
}

// Whether a kernel has a parallel loop, and so calls kiln_parallel_for.
class ParallelFinder : public loop::Visitor {
 public:
  bool found = false;

 protected:
  void VisitFor(const loop::ForNode* node, const loop::Stmt& self) override {
    found = found || node->for_kind == loop::ForKind::kParallel;
    if (!found) loop::Visitor::VisitFor(node, self);
  }
};

bool HasParallelLoop(const loop::PrimFunc& f) {
  ParallelFinder v;
  v.VisitStmt(f->body);
  return v.found;
}

}  // namespace

std::string KernelName(const std::string& call_name) {
  std::string s = call_name.empty() ? "kernel" : call_name;
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') c = '_';
  return s;
}

std::string ShapeKeyText(const Model& model, const std::vector<TensorSignature>& inputs,
                         std::span<const Tensor> values) {
  std::string key = model.name() + "(";
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (i) key += ", ";
    key += model.graph()->params[i]->name;
    key += ": ";
    AppendSignature(&key, inputs[i].dtype, inputs[i].shape);
    if (model.is_value_input(static_cast<int>(i)) && i < values.size()) {
      // A value input is specialized on: its values are part of the key (`shape: i64[2] = [3,
      // 2]`); the key stays short for large ones, which the hash and signature still cover.
      const Tensor& v = values[i];
      bool ints = IsInteger(v.dtype()) || v.dtype() == DType::kBool;
      AttrValue all = AttrFromTensor(v.Reshaped({v.numel()}),
                                     ints ? AttrKind::kInts : AttrKind::kFloats, "value input");
      std::string text;
      for (int64_t k = 0; k < std::min<int64_t>(v.numel(), 8); ++k)
        text += StrCat(k ? ", " : "", ints ? StrCat(std::get<std::vector<int64_t>>(all)[k])
                                           : FormatDouble(std::get<std::vector<double>>(all)[k]));
      key += StrCat(" = [", text, v.numel() > 8 ? ", ...]" : "]");
    }
  }
  return key + ")";
}

std::shared_ptr<const Executable> Engine::Build(const Model& model, const BuildRequest& req) {
  // On the run's thread or a background compile's: either way into the engine's trace.
  TracerScope trace_scope(tracer_.get());
  TraceSpan build_span("compile", req.generic ? "compile generic" : "compile");
  auto t0 = std::chrono::steady_clock::now();
  const bool generic = req.generic;
  auto exe = std::make_shared<Executable>();
  auto code = std::make_shared<ExecutableCode>();  // exe->code once built
  exe->model_id = model.id();
  exe->symbols = req.symbols;
  auto shapes = std::make_shared<GenericShapes>();
  if (generic) {
    // `mlp(x: f32[batch, 784])`: the model's own parameter types.
    std::string key = model.name() + "(";
    for (size_t i = 0; i < model.graph()->params.size(); ++i) {
      const Var& p = model.graph()->params[i];
      TypedShape t = ShapeOf(p->type, DescribeNode(p), true);
      key += StrCat(i ? ", " : "", p->name, ": ", DTypeName(t.dtype), ShapeToString(t.shape));
      exe->inputs.push_back(SignatureOf(t, p->name));
      shapes->inputs.push_back(t.shape);
    }
    exe->shape_key = key + ")";
  } else {
    exe->inputs = req.inputs;
    exe->shape_key = ShapeKeyText(model, req.inputs, req.values);
  }
  if (build_span.active()) build_span.SetArgs("\"shape_key\":" + JsonQuote(exe->shape_key));

  // One leaf per tensor a graph value holds. `intermediate` >= 0 for a kernel's output.
  struct Leaf {
    BufferRef ref;
    TypedShape type;
    int intermediate = -1;
  };
  std::vector<IntermediateBuffer> temps;
  std::vector<Shape> temp_shapes;   // of `temps`, symbolic in a generic build
  std::vector<int> output_of_temp;  // per intermediate: the output it is written to, or -1
  // The symbols the inputs' shapes bind: every dim of a generic build must be made of them.
  std::set<std::string> input_symbols;
  for (const Shape& in : shapes->inputs)
    for (const Dim& d : in) d.CollectSymbols(&input_symbols);
  auto check_bound = [&](const Shape& shape, const std::string& what) {
    std::set<std::string> used;
    for (const Dim& d : shape) d.CollectSymbols(&used);
    for (const std::string& u : used)
      if (!input_symbols.count(u))
        Throw(ErrorCode::kUnsupported, what, " has shape ", ShapeToString(shape), ", whose '", u,
              "' no input's shape binds");
  };

  try {
    // The generic build compiles the model's graph as Model::Create typed it, symbols and all.
    Function fn = model.graph();
    if (!generic) {
      fn = BindSymbols(fn, req.symbols, model.constraints());
      if (model.dynamic())
        fn = ResolveDynamic(fn, std::vector<Tensor>(req.values.begin(), req.values.end()));
    }
    std::shared_ptr<PassContext> ctx = MakePassContext();
    // Profiling: a timing instrument of this compile's own, so concurrent compiles never
    // share one (PassTiming is not thread-safe).
    std::shared_ptr<PassTimingInstrument> timing;
    if (options_.profile) {
      timing = std::make_shared<PassTimingInstrument>();
      std::vector<InstrumentPtr> all = ctx->instruments();
      all.push_back(timing);
      ctx->SetInstruments(std::move(all));
    }
    PassContextScope scope(ctx);
    IRModule m;
    {
      TraceSpan phase("compile", "graph passes");
      m = (*graph_pipeline_)(IRModule({{"main", fn}}));
      m = (*fuse_ops_)(m);
    }
    Function main = m.Lookup("main");

    // Every fused group's kernel, compiled before the walk below that wires them up. A cold
    // shape's time is mostly LLVM compiling one group after another, so the groups compile in
    // parallel on the engine's arena (bounded by num_threads), unless instruments watch the
    // passes: they expect passes one at a time, in order (and PassTiming is not thread-safe).
    struct GroupCompile {
      Function fn;
      std::string name;
      std::shared_ptr<const CompiledKernel> kernel;
      std::exception_ptr error;
    };
    std::vector<GroupCompile> groups;
    std::unordered_map<const ExprNode*, size_t> group_of;
    for (const Expr& e : PostOrder(main->body)) {
      const CallNode* call = e->kind == ExprKind::kCall ? AsCall(e) : nullptr;
      if (!call || !call->fn || !AsFunction(call->fn)) continue;
      group_of[e.get()] = groups.size();
      groups.push_back({std::static_pointer_cast<const FunctionNode>(call->fn), KernelName(e->name),
                        nullptr, nullptr});
    }
    auto compile = [&](GroupCompile& g) {
      TraceSpan span("compile", g.name);  // a cache hit shows as a short span
      try {
        if (stopping_.load(std::memory_order_relaxed))
          Throw(ErrorCode::kCancelled, "the engine is being destroyed");
        g.kernel =
            kernels_.GetOrCompile(KernelKey::Make(g.fn, options_.target, codegen_, pipeline_hash_),
                                  [&] { return CompileKernel(g.fn, g.name, codegen_); });
      } catch (...) {
        g.error = std::current_exception();  // rethrown where the walk reaches the group
      }
    };
    if (groups.size() > 1 && ctx->instruments().empty()) {
      auto each = [&](GroupCompile& g) {
        // The current PassContext is per thread: each task enters one of its own, made from
        // the same options, so passes on workers see the engine's configuration.
        PassContextScope task_scope(MakePassContext());
        TracerScope task_trace(tracer_.get());
        compile(g);
      };
      ParallelEach(*req.arena, groups, each);
    } else {
      for (GroupCompile& g : groups) compile(g);
    }

    std::unordered_map<const VarNode*, uint32_t> param_index;
    for (size_t i = 0; i < main->params.size(); ++i) param_index[main->params[i].get()] = i;
    std::unordered_map<const ExprNode*, std::vector<Leaf>> leaves;
    auto leaves_of = [&](const Expr& e) -> const std::vector<Leaf>& {
      auto it = leaves.find(e.get());
      KILN_CHECK(it != leaves.end(), "operand ", DescribeNode(e), " has no value yet");
      return it->second;
    };
    auto add_constant = [&](const Tensor& t) {
      code->constants.push_back(t);
      code->constant_data.push_back(t.raw_data());
      return static_cast<uint32_t>(code->constants.size() - 1);
    };

    for (const Expr& e : PostOrder(main->body)) {
      switch (e->kind) {
        case ExprKind::kVar: {
          auto it = param_index.find(static_cast<const VarNode*>(e.get()));
          if (it == param_index.end())
            Throw(ErrorCode::kUnsupported, DescribeNode(e), " is not an input of the model");
          leaves[e.get()] = {Leaf{{BufferRef::Kind::kInput, it->second, 0},
                                  ShapeOf(e->type, DescribeNode(e), generic)}};
          break;
        }
        case ExprKind::kConstant: {
          const Tensor& value = AsConstant(e)->value;
          leaves[e.get()] = {Leaf{{BufferRef::Kind::kConstant, add_constant(value), 0},
                                  ShapeOf(e->type, DescribeNode(e), false)}};
          break;
        }
        case ExprKind::kFunction:
          break;  // a fused group: compiled where it is called
        case ExprKind::kGlobalVar:
        case ExprKind::kConstructor:
        case ExprKind::kMatch:
          Throw(ErrorCode::kUnsupported, DescribeNode(e),
                ": the engine does not run module function calls, ADTs or matches yet; the "
                "interpreter does (kiln::Interpret on the module)");
        case ExprKind::kTuple: {
          std::vector<Leaf> all;
          for (const Expr& f : AsTuple(e)->fields) {
            const std::vector<Leaf>& l = leaves_of(f);
            all.insert(all.end(), l.begin(), l.end());
          }
          leaves[e.get()] = std::move(all);
          break;
        }
        case ExprKind::kTupleGetItem: {
          const TupleGetItemNode* g = AsTupleGetItem(e);
          const TupleTypeNode* tt = AsTuple(g->tuple->type);
          KILN_CHECK(tt && g->index >= 0 && g->index < static_cast<int>(tt->fields.size()),
                     DescribeNode(e), ": bad tuple index");
          int first = 0;
          for (int j = 0; j < g->index; ++j) first += CountLeaves(tt->fields[j]);
          const std::vector<Leaf>& all = leaves_of(g->tuple);
          leaves[e.get()] = std::vector<Leaf>(
              all.begin() + first, all.begin() + first + CountLeaves(tt->fields[g->index]));
          break;
        }
        case ExprKind::kCall: {
          const CallNode* call = AsCall(e);
          const FunctionNode* group = call->fn ? AsFunction(call->fn) : nullptr;
          if (!group) {
            Throw(ErrorCode::kUnsupported, DescribeNode(e),
                  call->op ? " was not fused into a kernel" : " calls a function value");
          }
          const AttrValue* prim = group->attrs.Find("primitive");
          if (!prim || KindOf(*prim) != AttrKind::kBool || !std::get<bool>(*prim))
            Throw(ErrorCode::kUnsupported, DescribeNode(e), " calls a non-primitive function");
          const std::string where = StrCat("kernel '", e->name, "'");
          const int step = static_cast<int>(code->launches.size());

          const GroupCompile& compiled = groups.at(group_of.at(e.get()));
          std::shared_ptr<const CompiledKernel> kernel = compiled.kernel;
          if (compiled.error) {
            try {
              std::rethrow_exception(compiled.error);
            } catch (const Error& err) {
              Throw(err.code(), where, ": ", err.what());
            }
          }
          const LoweredKernel& l = kernel->lowered;

          KernelLaunch launch;
          launch.name = e->name;
          launch.kernel = kernel;
          launch.entry = kernel->entry;
          if (launch.entry->on_device() != (device_api_ != nullptr))
            Throw(ErrorCode::kInternal, where, ": a ", options_.target, " kernel ",
                  launch.entry->on_device() ? "runs on a device" : "is a host function",
                  "; the engine runs its kernels ", device_api_ ? "on a device" : "on the host");
          // The threads of a device kernel are its launch's; a host kernel's parallel loops run
          // in the engine's task arena.
          launch.parallel = !device_api_ && HasParallelLoop(l.func);
          if (options_.profile || tracer_) {
            auto profile = std::make_shared<KernelProfile>();
            if (tracer_) {
              profile->tracer = tracer_;
              profile->name = launch.name;
              std::string shapes;
              for (const Expr& a : call->args) {
                if (!shapes.empty()) shapes += ", ";
                shapes += TypeToString(a->type);
              }
              profile->trace_args = StrCat("\"shape_key\":", JsonQuote(exe->shape_key),
                                           ",\"args\":", JsonQuote(shapes),
                                           ",\"result\":", JsonQuote(TypeToString(e->type)));
            }
            launch.profile = std::move(profile);
          }
          launch.first_buffer = static_cast<uint32_t>(exe->buffer_refs.size());
          if (static_cast<int>(call->args.size()) != l.num_params)
            Throw(ErrorCode::kInternal, where, ": ", call->args.size(),
                  " arguments for a kernel of ", l.num_params, " parameters");
          for (const Expr& a : call->args) {
            const std::vector<Leaf>& l = leaves_of(a);
            if (l.size() != 1)
              Throw(ErrorCode::kUnsupported, where, ": argument ", DescribeNode(a),
                    " is a tuple; kernels take tensors");
            if (l[0].intermediate >= 0) temps[l[0].intermediate].lifetime.last_step = step;
            exe->buffer_refs.push_back(l[0].ref);
          }
          for (const Tensor& c : l.constants)
            exe->buffer_refs.push_back({BufferRef::Kind::kConstant, add_constant(c), 0});
          std::vector<Type> out_types;
          FlattenTypes(e->type, &out_types);
          std::vector<Leaf> outs;
          for (const Type& t : out_types) {
            IntermediateBuffer tmp;
            tmp.producer = static_cast<uint32_t>(step);
            TypedShape shape = ShapeOf(t, where, generic);
            tmp.type = SignatureOf(shape, where);
            tmp.lifetime = {tmp.type.nbytes, step, step};
            int id = static_cast<int>(temps.size());
            BufferRef ref{BufferRef::Kind::kArena, static_cast<uint32_t>(id), 0};
            exe->buffer_refs.push_back(ref);
            outs.push_back(Leaf{ref, shape, id});
            temps.push_back(std::move(tmp));
            if (generic) check_bound(shape.shape, where);
            temp_shapes.push_back(shape.shape);
            output_of_temp.push_back(-1);
          }
          launch.num_buffers = static_cast<uint32_t>(exe->buffer_refs.size()) - launch.first_buffer;
          if (launch.num_buffers != l.func->buffer_params.size())
            Throw(ErrorCode::kInternal, where, ": ", launch.num_buffers,
                  " buffers bound for a kernel of ", l.func->buffer_params.size());
          if (launch.num_buffers > kMaxKernelBuffers)
            Throw(ErrorCode::kUnsupported, where, " takes ", launch.num_buffers,
                  " buffers; at most ", kMaxKernelBuffers, " are supported");

          launch.first_scalar = static_cast<uint32_t>(exe->scalars.size());
          for (const std::string& s : l.symbols) {
            if (generic) {
              // Bound per shape; a symbol that no input binds (a dim values decide) makes the
              // model unable to have a generic tier.
              if (!input_symbols.count(s))
                Throw(ErrorCode::kUnsupported, where, " has dim '", s,
                      "', which no input's shape binds");
              shapes->scalar_symbols.push_back(s);
              exe->scalars.push_back(0);
              continue;
            }
            auto it = req.symbols.find(s);
            if (it == req.symbols.end())
              Throw(ErrorCode::kInternal, where, ": symbol '", s, "' is unbound");
            exe->scalars.push_back(it->second);
          }
          launch.num_scalars = static_cast<uint32_t>(exe->scalars.size()) - launch.first_scalar;
          exe->parallel = exe->parallel || launch.parallel;
          code->launches.push_back(std::move(launch));
          leaves[e.get()] = std::move(outs);
          break;
        }
        default:
          Throw(ErrorCode::kUnsupported, DescribeNode(e), ": ", ExprKindName(e->kind),
                " nodes cannot run in the engine");
      }
    }

    // Outputs: a kernel's result that is returned is written straight into the caller's
    // tensor; anything else (an input, a constant, a value returned twice) is copied.
    const std::vector<Leaf>& result = leaves_of(main->body);
    for (size_t j = 0; j < result.size(); ++j) {
      const Leaf& leaf = result[j];
      exe->outputs.push_back(SignatureOf(leaf.type, StrCat("output ", j)));
      shapes->outputs.push_back(leaf.type.shape);
      if (generic) check_bound(leaf.type.shape, StrCat("output ", j));
      const uint32_t out = static_cast<uint32_t>(j);
      if (leaf.intermediate >= 0 && output_of_temp[leaf.intermediate] < 0) {
        output_of_temp[leaf.intermediate] = static_cast<int>(out);
        continue;
      }
      BufferRef from = leaf.ref;
      if (leaf.intermediate >= 0)
        from = {BufferRef::Kind::kOutput, static_cast<uint32_t>(output_of_temp[leaf.intermediate]),
                0};
      exe->copies.push_back(OutputCopy{from, out, exe->outputs.back().nbytes});
    }
    scope.Close();
    if (timing) exe->pass_timing = timing->report();
    if (device_api_) code->device = MakeDeviceCode(*code, device_api_, device_);
    exe->code = std::move(code);
  } catch (const Error& e) {
    Throw(e.code(), exe->shape_key, ": ", e.what());
  }

  // The memory plan covers the intermediates that are not outputs; then every arena reference
  // gets its offset (or becomes an output reference).
  std::vector<int> arena_slot(temps.size(), -1);
  std::vector<BufferLifetime> lifetimes;
  for (size_t i = 0; i < temps.size(); ++i) {
    if (output_of_temp[i] >= 0) continue;
    arena_slot[i] = static_cast<int>(exe->intermediates.size());
    lifetimes.push_back(temps[i].lifetime);
    exe->intermediates.push_back(std::move(temps[i]));
    shapes->intermediates.push_back(temp_shapes[i]);
  }
  exe->plan = PlanMemory(lifetimes);
  for (BufferRef& r : exe->buffer_refs) {
    if (r.kind != BufferRef::Kind::kArena) continue;
    if (output_of_temp[r.index] >= 0) {
      r = {BufferRef::Kind::kOutput, static_cast<uint32_t>(output_of_temp[r.index]), 0};
    } else {
      r.index = static_cast<uint32_t>(arena_slot[r.index]);
      r.offset = exe->plan.offsets[r.index];
    }
  }
  if (generic) {
    exe->tier = Tier::kGeneric;
    shapes->binder = GenericBinder::Make(exe->inputs, *shapes, model.constraints());
    exe->generic = std::move(shapes);
  }
  // The model's weights are the model's: only what this build made is charged to it.
  std::unordered_set<const void*> model_data;
  for (const Expr& e : PostOrder(model.graph()->body))
    if (e->kind == ExprKind::kConstant) model_data.insert(AsConstant(e)->value.raw_data());
  exe->code_bytes =
      ExecutableCodeBytes(*exe->code, [&](const void* p) { return model_data.count(p) > 0; });
  exe->compile_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return exe;
}

const char* TierName(Tier t) {
  return t == Tier::kGeneric ? "generic" : "specialized";
}

}  // namespace kiln
