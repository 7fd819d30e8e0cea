// libFuzzer target: a sequence of C API calls chosen by the input bytes, as a careless or
// hostile program might make them. Graph building (any registered op, attributes of the right
// kind and of wrong ones, bad value ids, duplicate names), tensors with odd dtypes and shapes,
// options (targets, pipelines, config keys), engines made from those options, and runs: on
// the reference interpreter, and on engines with outputs returned, written in place or bound,
// with misnamed, missing and mistyped arguments among them.
//
// Every call must return a status; KILN_INTERNAL (an exception kiln did not expect), a crash,
// an abort, an out-of-bounds access or undefined behaviour is a finding. Runs on an engine are
// kept to models whose values are small (fuzz_util's SmallEnoughToRun) and to the shapes the
// driver makes, so a finding is a bug, not a slow input; one engine is shared by every input
// (compiled kernels are reused, so engine runs stay cheap) and each input may make one more,
// from its own options. As that engine keeps what it compiles from one input to the next,
// libFuzzer's per-input leak check is off (capi_seq.options).
//
// The seeds (fuzz/corpus/capi_seq) are a sample of a campaign's corpus; an input's meaning is
// this file's reading of its bytes, so a change here changes what they do (they stay seeds).
// KILN_FUZZ_TRACE=1 prints each call and its status, KILN_FUZZ_STATS=1 the shared engine's
// statistics at exit: to read what an input does, and whether inputs still reach compiled runs.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "api/capi/capi_internal.h"
#include "fuzz/fuzz_util.h"
#include "ir/op.h"
#include "kiln.h"

namespace {

// The input, read front to back; past its end every read is 0.
class Bytes {
 public:
  Bytes(const uint8_t* data, size_t size) : p_(data), n_(size) {}
  bool empty() const { return n_ == 0; }
  uint8_t U8() {
    if (n_ == 0) return 0;
    --n_;
    return *p_++;
  }
  // A value in [0, n) (n > 0).
  size_t Pick(size_t n) {
    if (n <= 256) return U8() % n;
    size_t low = U8();
    return (low | size_t{U8()} << 8) % n;
  }
  bool Chance(int in256) { return U8() < in256; }
  template <typename T, size_t N>
  const T& Of(const T (&items)[N]) {
    return items[Pick(N)];
  }

 private:
  const uint8_t* p_;
  size_t n_;
};

// What kiln returns must be a status it documents; KILN_INTERNAL means an exception escaped
// from where kiln did not expect one (the C API's frame turned it into a status).
// KILN_FUZZ_TRACE=1 prints every call and its status (to read what an input does).
kiln_status Check(kiln_status s, const char* call) {
  static const bool trace = std::getenv("KILN_FUZZ_TRACE") != nullptr;
  if (trace)
    std::fprintf(stderr, "%s -> %s %s\n", call, kiln_status_name(s),
                 s == KILN_OK ? "" : kiln_last_error());
  if (s == KILN_INTERNAL) {
    std::fprintf(stderr, "kiln fuzz: %s returned KILN_INTERNAL: %s\n", call, kiln_last_error());
    std::abort();
  }
  return s;
}
#define CALL(expr) Check((expr), #expr)

const int64_t kInts[] = {-3, -2, -1, 0, 0, 1, 1, 1, 2, 2, 3, 4, 5, 7, 64, 1 << 20, INT64_MAX};
const double kFloats[] = {0.0, 0.5, 1.0, -1.0, 2.0, 1e-5, 1e30, -0.0, 0.25, 3.0};
const char* const kStrings[] = {"",           "constant",   "reflect", "edge",
                                "NOTSET",     "SAME_UPPER", "VALID",   "linear",
                                "nearest",    "tanh",       "sigmoid", "relu",
                                "mean",       "sum",        "max",     "none",
                                "xyz",        "NCHW",       "floor",   "round_prefer_floor",
                                "half_pixel", "asymmetric"};
const char* const kCommonOps[] = {
    "add",    "sub",     "mul",     "div",         "relu",      "sigmoid",  "tanh",
    "exp",    "matmul",  "softmax", "transpose",   "reshape",   "concat",   "sum",
    "mean",   "max",     "gemm",    "layer_norm",  "conv",      "max_pool", "avg_pool",
    "cast",   "where",   "gather",  "slice",       "split",     "pad",      "expand",
    "clip",   "gelu",    "sqrt",    "pow",         "less",      "argmax",   "topk",
    "cumsum", "nonzero", "unique",  "dyn.reshape", "shape",     "maximum",  "erf",
    "neg",    "equal",   "flatten", "squeeze",     "unsqueeze", "tile"};
const char* const kSymbols[] = {"n", "m", "batch", "k"};
const char* const kInputNames[] = {"x", "y", "z", "w", "x"};
const char* const kOutputNames[] = {"out", "out2", "o3", "out"};
const char* const kTargets[] = {
    "llvm",
    "llvm -mcpu=znver1",
    "llvm -mcpu=no_such_cpu_9000",
    "llvm -mcpu=i386",
    "llvm -mattr=-sse,-sse2",
    "llvm -mattr=+avx2,+fma",
    "llvm -mattr=-64bit",
    "llvm -mcpu=",
    "llvm -mattr=",
    "cuda",
    "cuda -arch=sm_90",
    "c",
    "",
    "{\"kind\": \"llvm\", \"mcpu\": \"pentium4\"}",
    "{\"kind\": \"llvm\"",
    "{\"kind\": 3}",
};
const char* const kPolicies[] = {"eager", "tiered", "generic_only", "sometimes", ""};
const char* const kPipelines[] = {
    "InferType,FoldConstant", "FuseOps", "InferType,,", "NoSuchPass", "InferType(", ""};
const char* const kPasses[] = {"FoldConstant", "FuseOps", "SimplifyExpr", "InferType", "nope", ""};
const char* const kConfigKeys[] = {"loop.vectorize_width", "loop.unroll", "fuse.max_depth",
                                   "no.such.key", ""};

kiln_dtype Dtype(Bytes& in) {
  // Mostly f32 and i64 (what most ops take), sometimes any dtype, rarely one kiln does not have.
  uint8_t b = in.U8();
  if (b < 120) return KILN_F32;
  if (b < 160) return KILN_I64;
  if (b < 250) return static_cast<kiln_dtype>(b % 13);
  return static_cast<kiln_dtype>(13 + b % 3);
}

std::vector<int64_t> SmallShape(Bytes& in, size_t rank) {
  std::vector<int64_t> dims(rank);
  for (int64_t& d : dims) d = in.Chance(8) ? in.Of(kInts) : in.Pick(5);
  return dims;
}

// Element values: small and varied, from the input (integers stay small, so that values used
// as shapes or indices stay meaningful).
void Fill(Bytes& in, kiln_tensor* t) {
  kiln_dtype dtype;
  void* data = nullptr;
  int64_t count = 0;
  if (kiln_tensor_dtype(t, &dtype) != KILN_OK || kiln_tensor_data(t, &data) != KILN_OK ||
      kiln_tensor_num_elements(t, &count) != KILN_OK)
    return;
  uint8_t* bytes = static_cast<uint8_t*>(data);
  for (int64_t i = 0; i < count; ++i) {
    int v = static_cast<int8_t>(in.U8()) % 6;
    switch (dtype) {
      case KILN_F32: {
        float f = v * 0.75f;
        std::memcpy(bytes + 4 * i, &f, 4);
        break;
      }
      case KILN_F64: {
        double f = v * 0.75;
        std::memcpy(bytes + 8 * i, &f, 8);
        break;
      }
      case KILN_I64: {
        int64_t x = v;
        std::memcpy(bytes + 8 * i, &x, 8);
        break;
      }
      case KILN_I32: {
        int32_t x = v;
        std::memcpy(bytes + 4 * i, &x, 4);
        break;
      }
      case KILN_BOOL:
        bytes[i] = v & 1;
        break;
      default: {
        size_t size = kiln_dtype_size(dtype);
        for (size_t b = 0; b < size; ++b)
          bytes[i * size + b] = b == 0 ? static_cast<uint8_t>(v) : 0;
        break;
      }
    }
  }
}

// One input's state: what it built and made. Everything is destroyed at the end.
struct Session {
  Bytes in;
  kiln_graph_builder* builder = nullptr;
  std::vector<kiln_value> values;
  std::vector<kiln_tensor*> tensors;
  std::vector<kiln_model*> models;
  kiln_options* options = nullptr;
  kiln_engine* engine = nullptr;  // made from `options`, at most one per input
  int engine_runs = 0;

  explicit Session(Bytes b) : in(b) {}
  ~Session() {
    if (engine) kiln_engine_destroy(engine);
    kiln_options_destroy(options);
    for (kiln_model* m : models) kiln_model_destroy(m);
    for (kiln_tensor* t : tensors) kiln_tensor_destroy(t);
    kiln_graph_builder_destroy(builder);
  }

  kiln_value Value() {
    // Mostly a value this builder made; sometimes one it did not.
    if (values.empty() || in.Chance(6)) return static_cast<kiln_value>(in.Of(kInts));
    return values[values.size() - 1 - in.Pick(values.size() < 8 ? values.size() : 8)];
  }
  kiln_tensor* Tensor() {
    if (tensors.empty() || in.Chance(4)) return nullptr;
    return tensors[in.Pick(tensors.size())];
  }
  kiln_model* Model() {
    if (models.empty()) return nullptr;
    return models[in.Pick(models.size())];
  }
  void Keep(kiln_tensor* t) {
    if (tensors.size() >= 16) {
      kiln_tensor_destroy(tensors.front());
      tensors.erase(tensors.begin());
    }
    tensors.push_back(t);
  }

  void AddInput();
  void AddConstant();
  void AddOp();
  void GetItem();
  void AddOutput();
  void Build();
  void MakeTensor();
  void SetOption();
  void MakeEngine();
  void Introspect();
  void Run(kiln_engine* shared);
};

void Session::AddInput() {
  size_t rank = in.Pick(5);
  std::vector<int64_t> dims = SmallShape(in, rank);
  std::vector<const char*> names(rank, nullptr);
  bool symbolic = in.Chance(128);
  for (size_t i = 0; i < rank; ++i)
    if (symbolic && in.Chance(100)) names[i] = in.Of(kSymbols);
  const char* name = in.Of(kInputNames);
  kiln_dtype dtype = Dtype(in);
  kiln_value v = 0;
  if (CALL(kiln_graph_builder_add_input(builder, name, dtype, rank, dims.data(),
                                        symbolic ? names.data() : nullptr, &v)) == KILN_OK)
    values.push_back(v);
}

void Session::AddConstant() {
  size_t rank = in.Pick(4);
  std::vector<int64_t> dims(rank);
  for (int64_t& d : dims) d = in.Pick(4);
  kiln_tensor* t = nullptr;
  if (CALL(kiln_tensor_create(Dtype(in), rank, dims.data(), &t)) != KILN_OK) return;
  Fill(in, t);
  kiln_value v = 0;
  if (CALL(kiln_graph_builder_add_constant(builder, t, in.Chance(128) ? "c" : nullptr, &v)) ==
      KILN_OK)
    values.push_back(v);
  kiln_tensor_destroy(t);
}

// A value of the attribute's kind, or, sometimes, of another kind.
void SetAttr(Bytes& in, kiln_attrs* attrs, const std::string& name, kiln::AttrKind kind) {
  if (in.Chance(12)) kind = static_cast<kiln::AttrKind>(in.Pick(7));
  const char* n = name.c_str();
  switch (kind) {
    case kiln::AttrKind::kInt:
      CALL(kiln_attrs_set_int(attrs, n, in.Of(kInts)));
      break;
    case kiln::AttrKind::kFloat:
      CALL(kiln_attrs_set_float(attrs, n, in.Of(kFloats)));
      break;
    case kiln::AttrKind::kString:
      CALL(kiln_attrs_set_string(attrs, n, in.Of(kStrings)));
      break;
    case kiln::AttrKind::kInts: {
      std::vector<int64_t> v(in.Pick(6));
      for (int64_t& x : v) x = in.Chance(200) ? static_cast<int64_t>(in.Pick(4)) : in.Of(kInts);
      CALL(kiln_attrs_set_ints(attrs, n, v.data(), v.size()));
      break;
    }
    case kiln::AttrKind::kFloats: {
      std::vector<double> v(in.Pick(5));
      for (double& x : v) x = in.Of(kFloats);
      CALL(kiln_attrs_set_floats(attrs, n, v.data(), v.size()));
      break;
    }
    case kiln::AttrKind::kDType:
      CALL(kiln_attrs_set_dtype(attrs, n, Dtype(in)));
      break;
    case kiln::AttrKind::kBool:
      CALL(kiln_attrs_set_bool(attrs, n, in.U8() & 1));
      break;
  }
}

void Session::AddOp() {
  static const std::vector<std::string> ops = kiln::OpRegistry::Global().Names();
  // Half the time an op most models use (by name, so that seeds keep their meaning as ops are
  // added), else any registered op, rarely one that does not exist.
  uint8_t how = in.U8();
  std::string op = how < 4     ? "no_such_op"
                   : how < 128 ? in.Of(kCommonOps)
                               : ops[in.Pick(ops.size())];
  const kiln::OpDef* def = kiln::OpRegistry::Global().Find(op);
  size_t num_args = in.Pick(4);
  if (def && !in.Chance(16)) {
    int max = def->max_inputs < 0 ? def->min_inputs + 3 : def->max_inputs;
    num_args = def->min_inputs + in.Pick(max - def->min_inputs + 1);
  }
  std::vector<kiln_value> args(num_args);
  for (kiln_value& a : args) a = Value();
  kiln_attrs* attrs = nullptr;
  if (CALL(kiln_attrs_create(&attrs)) != KILN_OK) return;
  if (def)
    for (const kiln::AttrSpec& spec : def->attrs)
      if (in.Chance(spec.default_value ? 70 : 230)) SetAttr(in, attrs, spec.name, spec.kind);
  if (in.Chance(6)) SetAttr(in, attrs, "no_such_attr", kiln::AttrKind::kInt);
  kiln_value v = 0;
  const kiln_attrs* given = in.Chance(128) ? attrs : nullptr;
  const char* node = in.Chance(64) ? "node" : nullptr;
  kiln_status s = CALL(
      kiln_graph_builder_add_op(builder, op.c_str(), args.size(), args.data(), given, node, &v));
  kiln_attrs_destroy(attrs);
  if (s == KILN_OK) values.push_back(v);
}

void Session::GetItem() {
  kiln_value v = 0;
  kiln_value tuple = Value();
  int index = static_cast<int>(in.Pick(5)) - 1;
  if (CALL(kiln_graph_builder_get_item(builder, tuple, index, &v)) == KILN_OK) values.push_back(v);
}

void Session::AddOutput() {
  kiln_value value = Value();
  CALL(kiln_graph_builder_add_output(builder, value, in.Of(kOutputNames)));
}

void Session::Build() {
  kiln_model* m = nullptr;
  if (CALL(kiln_graph_builder_build(builder, &m)) != KILN_OK) return;
  if (models.size() >= 4) {
    kiln_model_destroy(models.front());
    models.erase(models.begin());
  }
  models.push_back(m);
}

void Session::MakeTensor() {
  kiln_dtype dtype = Dtype(in);
  size_t rank = in.Pick(6);
  std::vector<int64_t> dims = SmallShape(in, rank);
  // Sizes past 2^61 elements must be refused; between 2^20 and that, kiln would allocate what
  // it was asked for, which is not a bug.
  uint64_t elements = 1;
  for (int64_t d : dims) {
    uint64_t u = d < 0 ? 0 : static_cast<uint64_t>(d);
    elements = u != 0 && elements > (1ull << 62) / u ? 1ull << 62 : elements * u;
  }
  if (elements > (1 << 20) && elements < (1ull << 61)) return;
  kiln_tensor* t = nullptr;
  if (in.Chance(200)) {
    if (CALL(kiln_tensor_create(dtype, rank, dims.data(), &t)) != KILN_OK) return;
    Fill(in, t);
  } else {
    // Over a buffer of the driver's, of a size that is often wrong.
    alignas(64) static uint8_t buffer[4096];
    size_t nbytes = in.Pick(sizeof buffer);
    if (CALL(kiln_tensor_wrap(dtype, rank, dims.data(), buffer, nbytes, &t)) != KILN_OK) return;
  }
  size_t nbytes = 0;
  CALL(kiln_tensor_nbytes(t, &nbytes));
  // A host buffer of the size the copy says (a wrong size must be refused; a buffer smaller
  // than the size given is the caller's bug, which kiln cannot see).
  std::vector<uint8_t> host(in.Chance(128) ? nbytes : in.Pick(64));
  CALL(kiln_tensor_copy_from_host(t, host.data(), host.size()));
  CALL(kiln_tensor_copy_to_host(t, host.data(), host.size()));
  std::vector<int64_t> shape(in.Pick(6));
  CALL(kiln_tensor_shape(t, shape.size(), shape.data()));
  Keep(t);
}

void Session::SetOption() {
  const char* key = nullptr;
  switch (in.Pick(12)) {
    case 0:
      CALL(kiln_options_set_target(options, in.Of(kTargets)));
      break;
    case 1:
      CALL(kiln_options_set_opt_level(options, static_cast<int>(in.Of(kInts))));
      break;
    case 2:
      CALL(kiln_options_set_num_threads(options, static_cast<int>(in.Pick(4)) - 1));
      break;
    case 3:
      CALL(kiln_options_set_max_specializations(options, static_cast<int>(in.Pick(5)) - 1));
      break;
    case 4:
      CALL(kiln_options_set_compile_policy(options, in.Of(kPolicies)));
      break;
    case 5:
      CALL(kiln_options_set_pipeline(options, in.Of(kPipelines)));
      break;
    case 6:
      CALL(kiln_options_disable_pass(options, in.Of(kPasses)));
      break;
    case 7:
      CALL(kiln_options_require_pass(options, in.Of(kPasses)));
      break;
    case 8:
      key = in.Of(kConfigKeys);
      CALL(kiln_options_set_config_int(options, key, in.Of(kInts)));
      break;
    case 9:
      key = in.Of(kConfigKeys);
      CALL(kiln_options_set_config_string(options, key, in.Of(kStrings)));
      break;
    case 10:
      CALL(kiln_options_set_max_run_bytes(options, uint64_t{1} << in.Pick(26)));
      break;
    case 11:
      CALL(kiln_options_set_max_cache_bytes(options, uint64_t{1} << in.Pick(26)));
      break;
  }
}

void Session::MakeEngine() {
  if (engine) return;
  // The driver's own engines run in this thread (kernels) and compile on at most one more.
  kiln_options_set_num_threads(options, 1);
  kiln_options_set_compile_threads(options, 1);
  CALL(kiln_engine_create(options, &engine));
}

void Session::Introspect() {
  kiln_model* m = Model();
  if (!m) return;
  size_t index = in.Pick(4), dim = in.Pick(5);
  const char* name = nullptr;
  const char* symbol = nullptr;
  kiln_dtype dtype;
  size_t rank = 0;
  int64_t value = 0;
  CALL(kiln_model_input_name(m, index, &name));
  CALL(kiln_model_output_name(m, index, &name));
  CALL(kiln_model_input_type(m, index, &dtype, &rank));
  CALL(kiln_model_output_type(m, index, nullptr, &rank));
  CALL(kiln_model_input_dim(m, index, dim, &value, &symbol));
  CALL(kiln_model_output_dim(m, index, dim, &value, nullptr));
  char* text = nullptr;
  if (in.Chance(32) && CALL(kiln_model_print(m, &text)) == KILN_OK) kiln_string_free(text);
}

// Inputs that fit the model's (each symbol bound to a value from 0 to 3, the same within the
// run), or, sometimes, tensors the driver made: right or wrong.
bool FitInputs(Session& s, const kiln_model* m, std::vector<kiln_tensor*>* made,
               std::vector<const kiln_tensor*>* inputs) {
  size_t n = 0;
  if (CALL(kiln_model_num_inputs(m, &n)) != KILN_OK) return false;
  std::map<std::string, int64_t> symbols;
  for (size_t i = 0; i < n; ++i) {
    if (s.in.Chance(4)) {
      inputs->push_back(s.Tensor());
      continue;
    }
    kiln_dtype dtype;
    size_t rank = 0;
    CALL(kiln_model_input_type(m, i, &dtype, &rank));
    std::vector<int64_t> dims(rank);
    for (size_t d = 0; d < rank; ++d) {
      const char* symbol = nullptr;
      CALL(kiln_model_input_dim(m, i, d, &dims[d], &symbol));
      if (symbol) {
        auto [it, fresh] = symbols.emplace(symbol, 0);
        if (fresh) it->second = s.in.Pick(4);
        dims[d] = it->second;
      }
    }
    kiln_tensor* t = nullptr;
    if (CALL(kiln_tensor_create(dtype, rank, dims.data(), &t)) != KILN_OK) return false;
    Fill(s.in, t);
    made->push_back(t);
    inputs->push_back(t);
  }
  return true;
}

void Session::Run(kiln_engine* shared) {
  kiln_model* m = Model();
  if (!m) return;
  // The reference run has no memory bound of its own; runs are kept to small models.
  if (!kiln::fuzz::SmallEnoughToRun(m->model->graph(), 1 << 20)) return;
  std::vector<kiln_tensor*> made;
  std::vector<const kiln_tensor*> inputs;
  if (!FitInputs(*this, m, &made, &inputs)) {
    for (kiln_tensor* t : made) kiln_tensor_destroy(t);
    return;
  }
  size_t num_outputs = 0;
  CALL(kiln_model_num_outputs(m, &num_outputs));
  std::vector<kiln_tensor*> outputs(num_outputs, nullptr);
  std::vector<const char*> input_names(inputs.size(), nullptr);
  for (size_t i = 0; i < inputs.size(); ++i)
    if (kiln_model_input_name(m, i, &input_names[i]) != KILN_OK || in.Chance(8))
      input_names[i] = in.Of(kInputNames);
  // Sometimes one input too many (a NULL tensor), or one too few.
  size_t num_inputs = inputs.size();
  if (in.Chance(8)) ++num_inputs;
  if (in.Chance(8) && num_inputs > 0) --num_inputs;
  if (num_inputs > inputs.size()) {
    inputs.push_back(nullptr);
    input_names.push_back("extra");
  }
  const char* const* names = in.Chance(128) ? input_names.data() : nullptr;
  kiln_engine* engine = in.Chance(200) || !this->engine ? shared : this->engine;
  if (engine == this->engine && ++engine_runs > 2) engine = shared;
  kiln_status status;
  switch (in.Pick(4)) {
    case 0:
      status = CALL(kiln_model_run_reference(m, num_inputs, names, inputs.data(), num_outputs,
                                             nullptr, outputs.data()));
      break;
    case 1:
    case 2: {
      status = CALL(kiln_engine_run(engine, m, num_inputs, names, inputs.data(), num_outputs,
                                    nullptr, outputs.data()));
      if (status != KILN_OK) break;
      // Again, in place into the outputs just made (the warm path), or through a binding.
      if (in.Chance(128)) {
        CALL(kiln_engine_run(engine, m, num_inputs, names, inputs.data(), num_outputs, nullptr,
                             outputs.data()));
        break;
      }
      kiln_binding* binding = nullptr;
      if (CALL(kiln_binding_create(engine, m, &binding)) != KILN_OK) break;
      for (size_t i = 0; i < num_inputs; ++i)
        if (!in.Chance(8)) CALL(kiln_binding_bind_input(binding, input_names[i], inputs[i]));
      for (size_t j = 0; j < num_outputs; ++j) {
        const char* name = nullptr;
        if (kiln_model_output_name(m, j, &name) == KILN_OK && !in.Chance(8))
          CALL(kiln_binding_bind_output(binding, name, in.Chance(16) ? Tensor() : outputs[j]));
      }
      CALL(kiln_binding_run(binding));
      kiln_binding_destroy(binding);
      break;
    }
    case 3: {
      char* json = nullptr;
      status = CALL(kiln_engine_explain(engine, m, num_inputs, names, inputs.data(), &json));
      if (status == KILN_OK) kiln_string_free(json);
      break;
    }
  }
  (void)status;
  for (kiln_tensor* t : outputs) kiln_tensor_destroy(t);
  for (kiln_tensor* t : made) kiln_tensor_destroy(t);
}

kiln_engine* SharedEngine() {
  static kiln_engine* engine = [] {
    kiln_options* o = nullptr;
    kiln_engine* e = nullptr;
    if (kiln_options_create(&o) != KILN_OK ||
        kiln_options_set_compile_policy(o, "eager") != KILN_OK ||
        kiln_options_set_num_threads(o, 1) != KILN_OK ||
        kiln_options_set_max_cache_bytes(o, 64 << 20) != KILN_OK ||
        kiln_options_set_max_run_bytes(o, 16 << 20) != KILN_OK ||
        kiln_engine_create(o, &e) != KILN_OK) {
      std::fprintf(stderr, "kiln fuzz: cannot make the shared engine: %s\n", kiln_last_error());
      std::abort();
    }
    kiln_options_destroy(o);
    // KILN_FUZZ_STATS=1: the shared engine's statistics at exit, to see how many inputs reach
    // compiled runs (a driver change that stops reaching them shows there).
    if (std::getenv("KILN_FUZZ_STATS"))
      std::atexit([] {
        char* json = nullptr;
        if (kiln_engine_stats_json(engine, &json) == KILN_OK) {
          std::fprintf(stderr, "kiln fuzz: shared engine: %.400s\n", json);
          kiln_string_free(json);
        }
      });
    return e;
  }();
  return engine;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kiln_engine* shared = SharedEngine();
  Session s(Bytes(data, size));
  if (CALL(kiln_graph_builder_create(s.in.Chance(250) ? "fuzz" : nullptr, &s.builder)) != KILN_OK ||
      CALL(kiln_options_create(&s.options)) != KILN_OK)
    return 0;
  for (int step = 0; step < 64 && !s.in.empty(); ++step) {
    switch (s.in.Pick(16)) {
      case 0:
      case 1:
        s.AddInput();
        break;
      case 2:
        s.AddConstant();
        break;
      case 3:
      case 4:
      case 5:
        s.AddOp();
        break;
      case 6:
        s.GetItem();
        break;
      case 7:
        s.AddOutput();
        break;
      case 8:
        s.Build();
        break;
      case 9:
        s.MakeTensor();
        break;
      case 10:
        s.SetOption();
        break;
      case 11:
        s.MakeEngine();
        break;
      case 12:
        s.Introspect();
        break;
      default:
        s.Run(shared);
        break;
    }
  }
  return 0;
}
