// The C API's graph building (attributes, kiln_graph_builder) and graph passes written in C
// (kiln_register_graph_pass), with the pass registry's listing. The frame of every function is
// kiln.cc's (KILN_API_BEGIN ... KILN_API_END).
#include <memory>
#include <string>
#include <vector>

#include "api/capi/capi_internal.h"
#include "ir/error.h"
#include "ir/text.h"
#include "ir/type_infer.h"
#include "kiln.h"
#include "passes/instrument.h"
#include "passes/pass.h"

namespace {

using kiln::ErrorCode;
using kiln::Throw;
using kiln_capi::Join;
using kiln_capi::NewCString;
using kiln_capi::Str;
using kiln_capi::ToDType;
using kiln_capi::WrapModel;

ErrorCode ToErrorCode(kiln_status s) {
  return s >= KILN_INVALID_ARGUMENT && s <= KILN_PARSE_ERROR ? static_cast<ErrorCode>(s)
                                                             : ErrorCode::kInternal;
}

// ---- passes and instruments --------------------------------------------------------------

// A C graph pass: module -> text -> callback -> (replacement text -> module). Errors get the
// pass's name from Pass::operator().
kiln::IRModule RunCPass(kiln_graph_pass_fn fn, void* user_data, const kiln::IRModule& m) {
  std::vector<kiln::Tensor> meta;
  std::string text = kiln::Print(m, {}, &meta);
  kiln_pass_result result;
  kiln_status status = fn(text.c_str(), &result, user_data);
  if (status != KILN_OK)
    Throw(ToErrorCode(status), "the callback returned ", kiln_status_name(status),
          result.error.empty() ? "" : ": ", result.error);
  if (!result.has_text) return m;
  kiln::IRModule out;
  try {
    out = kiln::ParseModule(result.text, &meta);
  } catch (const kiln::Error& e) {
    Throw(e.code(), "the module the callback returned does not parse: ", e.what());
  }
  for (const auto& [name, f] : m.prim_funcs())
    if (!out.prim_funcs().count(name)) out = out.WithPrimFunc(name, f);
  return out;
}
}  // namespace

extern "C" {

// ---- graph building -------------------------------------------------------------------------

kiln_status kiln_attrs_create(kiln_attrs** out) {
  KILN_API_BEGIN
  KILN_REQUIRE(out);
  *out = new kiln_attrs();
  KILN_API_END
}

void kiln_attrs_destroy(kiln_attrs* attrs) {
  delete attrs;
}

#define KILN_ATTR_SETTER(suffix, ctype, convert)                                          \
  kiln_status kiln_attrs_set_##suffix(kiln_attrs* attrs, const char* name, ctype value) { \
    KILN_API_BEGIN                                                                        \
    KILN_REQUIRE(attrs);                                                                  \
    KILN_REQUIRE(name);                                                                   \
    attrs->attrs.Set(name, convert);                                                      \
    KILN_API_END                                                                          \
  }
KILN_ATTR_SETTER(int, int64_t, kiln::AttrValue(value))
KILN_ATTR_SETTER(float, double, kiln::AttrValue(value))
KILN_ATTR_SETTER(string, const char*, kiln::AttrValue(Str(value, __func__, "value")))
KILN_ATTR_SETTER(dtype, kiln_dtype, kiln::AttrValue(ToDType(value, __func__)))
KILN_ATTR_SETTER(bool, int, kiln::AttrValue(value != 0))
#undef KILN_ATTR_SETTER

kiln_status kiln_attrs_set_ints(kiln_attrs* attrs, const char* name, const int64_t* values,
                                size_t count) {
  KILN_API_BEGIN
  KILN_REQUIRE(attrs);
  KILN_REQUIRE(name);
  if (count) KILN_REQUIRE(values);
  attrs->attrs.Set(name, std::vector<int64_t>(values, values + count));
  KILN_API_END
}

kiln_status kiln_attrs_set_floats(kiln_attrs* attrs, const char* name, const double* values,
                                  size_t count) {
  KILN_API_BEGIN
  KILN_REQUIRE(attrs);
  KILN_REQUIRE(name);
  if (count) KILN_REQUIRE(values);
  attrs->attrs.Set(name, std::vector<double>(values, values + count));
  KILN_API_END
}

kiln_status kiln_graph_builder_create(const char* model_name, kiln_graph_builder** out) {
  KILN_API_BEGIN
  KILN_REQUIRE(out);
  auto b = std::make_unique<kiln_graph_builder>();
  b->name = model_name && *model_name ? model_name : "model";
  *out = b.release();
  KILN_API_END
}

void kiln_graph_builder_destroy(kiln_graph_builder* builder) {
  delete builder;
}

kiln_status kiln_graph_builder_add_input(kiln_graph_builder* builder, const char* name,
                                         kiln_dtype dtype, size_t rank, const int64_t* dims,
                                         const char* const* dim_names, kiln_value* out) {
  KILN_API_BEGIN
  KILN_REQUIRE(builder);
  KILN_REQUIRE(out);
  std::string n = Str(name, __func__, "name");
  if (n.empty()) Throw(ErrorCode::kInvalidArgument, __func__, ": an input needs a name");
  for (const kiln::Var& p : builder->params)
    if (p->name == n)
      Throw(ErrorCode::kInvalidArgument, __func__, ": model '", builder->name,
            "' already has an input '", n, "'");
  kiln::DType d = ToDType(dtype, __func__);
  kiln::Shape shape;
  for (size_t i = 0; i < rank; ++i) {
    if (dim_names && dim_names[i]) {
      if (!*dim_names[i])
        Throw(ErrorCode::kInvalidArgument, __func__, ": input '", n, "': dim ", i,
              " has an empty symbol name");
      if (kiln::IsReservedDimName(dim_names[i]))
        Throw(ErrorCode::kInvalidArgument, __func__, ": input '", n, "': dim ", i, " name '",
              dim_names[i], "' has the form of kiln's own symbols (_vN, _sN, unk__N)");
      shape.push_back(kiln::Dim::Symbol(dim_names[i]));
      continue;
    }
    if (!dims)
      Throw(ErrorCode::kInvalidArgument, __func__, ": input '", n, "': dim ", i,
            " is neither a number (dims is NULL) nor a symbol");
    if (dims[i] < 0)
      Throw(ErrorCode::kInvalidArgument, __func__, ": input '", n, "': dim ", i, " is ", dims[i]);
    shape.push_back(kiln::Dim(dims[i]));
  }
  kiln::Var v = kiln::MakeVar(n, kiln::TensorType(shape, d));
  builder->values.push_back(v);
  builder->params.push_back(v);
  *out = static_cast<kiln_value>(builder->values.size() - 1);
  KILN_API_END
}

kiln_status kiln_graph_builder_add_constant(kiln_graph_builder* builder, const kiln_tensor* value,
                                            const char* name, kiln_value* out) {
  KILN_API_BEGIN
  KILN_REQUIRE(builder);
  KILN_REQUIRE(value);
  KILN_REQUIRE(out);
  builder->values.push_back(kiln::MakeConstant(value->t.Clone(), name ? name : ""));
  *out = static_cast<kiln_value>(builder->values.size() - 1);
  KILN_API_END
}

kiln_status kiln_graph_builder_add_op(kiln_graph_builder* builder, const char* op, size_t num_args,
                                      const kiln_value* args, const kiln_attrs* attrs,
                                      const char* node_name, kiln_value* out) {
  KILN_API_BEGIN
  KILN_REQUIRE(builder);
  KILN_REQUIRE(op);
  KILN_REQUIRE(out);
  if (num_args) KILN_REQUIRE(args);
  std::string node = node_name ? node_name : "";
  std::vector<kiln::Expr> operands;
  for (size_t i = 0; i < num_args; ++i) {
    if (args[i] >= builder->values.size())
      Throw(ErrorCode::kInvalidArgument, __func__, ": node '", node, "' (", op, "): argument ", i,
            " is value ", args[i], ", but the builder has ", builder->values.size(), " values");
    operands.push_back(builder->values[args[i]]);
  }
  kiln::Expr call;
  try {
    call = kiln::MakeCall(op, std::move(operands), attrs ? attrs->attrs : kiln::Attrs{}, node);
  } catch (const kiln::Error& e) {
    Throw(e.code(), __func__, ": node '", node, "': ", e.what());
  }
  builder->values.push_back(std::move(call));
  *out = static_cast<kiln_value>(builder->values.size() - 1);
  KILN_API_END
}

kiln_status kiln_graph_builder_get_item(kiln_graph_builder* builder, kiln_value tuple, int index,
                                        kiln_value* out) {
  KILN_API_BEGIN
  KILN_REQUIRE(builder);
  KILN_REQUIRE(out);
  if (tuple >= builder->values.size())
    Throw(ErrorCode::kInvalidArgument, __func__, ": value ", tuple, " does not exist");
  if (index < 0) Throw(ErrorCode::kInvalidArgument, __func__, ": index ", index, " is negative");
  builder->values.push_back(kiln::MakeTupleGetItem(builder->values[tuple], index));
  *out = static_cast<kiln_value>(builder->values.size() - 1);
  KILN_API_END
}

kiln_status kiln_graph_builder_add_output(kiln_graph_builder* builder, kiln_value value,
                                          const char* name) {
  KILN_API_BEGIN
  KILN_REQUIRE(builder);
  std::string n = Str(name, __func__, "name");
  if (value >= builder->values.size())
    Throw(ErrorCode::kInvalidArgument, __func__, ": output '", n, "': value ", value,
          " does not exist");
  for (const auto& [e, other] : builder->outputs)
    if (other == n)
      Throw(ErrorCode::kInvalidArgument, __func__, ": model '", builder->name,
            "' already has an output '", n, "'");
  builder->outputs.emplace_back(builder->values[value], std::move(n));
  KILN_API_END
}

kiln_status kiln_graph_builder_build(kiln_graph_builder* builder, kiln_model** out) {
  KILN_API_BEGIN
  KILN_REQUIRE(builder);
  KILN_REQUIRE(out);
  if (builder->outputs.empty())
    Throw(ErrorCode::kInvalidArgument, __func__, ": model '", builder->name,
          "' has no outputs (kiln_graph_builder_add_output)");
  std::vector<kiln::Expr> results;
  std::vector<std::string> names;
  for (const auto& [e, name] : builder->outputs) {
    results.push_back(e);
    names.push_back(name);
  }
  kiln::Expr body = results.size() == 1 ? results[0] : kiln::MakeTuple(results);
  kiln::ModelPtr model =
      kiln::Model::Create(kiln::MakeFunction(builder->params, body), builder->name);
  *out = WrapModel(std::move(model), {}, names).release();
  KILN_API_END
}

// ---- passes -------------------------------------------------------------------------------

kiln_status kiln_pass_result_set_text(kiln_pass_result* result, const char* module_text) {
  KILN_API_BEGIN
  KILN_REQUIRE(result);
  KILN_REQUIRE(module_text);
  result->text = module_text;
  result->has_text = true;
  KILN_API_END
}

kiln_status kiln_pass_result_set_error(kiln_pass_result* result, const char* message) {
  KILN_API_BEGIN
  KILN_REQUIRE(result);
  KILN_REQUIRE(message);
  result->error = message;
  KILN_API_END
}

kiln_status kiln_register_graph_pass(const char* name, int opt_level, size_t num_required,
                                     const char* const* required, kiln_graph_pass_fn fn,
                                     void* user_data) {
  KILN_API_BEGIN
  std::string n = Str(name, __func__, "name");
  KILN_REQUIRE(fn);
  if (num_required) KILN_REQUIRE(required);
  if (opt_level < 0 || opt_level > kiln::kMaxOptLevel)
    Throw(ErrorCode::kInvalidArgument, __func__, ": pass '", n, "': opt_level must be 0 to ",
          kiln::kMaxOptLevel, ", got ", opt_level);
  kiln::PassInfo info{n, opt_level, {}};
  for (size_t i = 0; i < num_required; ++i)
    info.required.push_back(Str(required[i], __func__, "a required pass name"));
  kiln::PassRegistration reg;
  reg.name = n;
  reg.opt_level = opt_level;
  reg.required = info.required;
  reg.doc = "registered through the C API";
  reg.create = [info, fn, user_data](const kiln::Attrs&) {
    return kiln::CreateModulePass(
        info, [fn, user_data](const kiln::IRModule& m, const kiln::PassContext&) {
          return RunCPass(fn, user_data, m);
        });
  };
  kiln::PassRegistry::Global().Register(std::move(reg));
  KILN_API_END
}

kiln_status kiln_pass_count(size_t* out) {
  KILN_API_BEGIN
  KILN_REQUIRE(out);
  *out = kiln::PassRegistry::Global().Names().size();
  KILN_API_END
}

kiln_status kiln_pass_info(size_t index, char** name, int* opt_level, char** required) {
  KILN_API_BEGIN
  std::vector<std::string> names = kiln::PassRegistry::Global().Names();
  if (index >= names.size())
    Throw(ErrorCode::kInvalidArgument, __func__, ": ", names.size(),
          " passes are registered; index ", index, " is out of range");
  const kiln::PassRegistration* reg = kiln::PassRegistry::Global().Find(names[index]);
  KILN_CHECK(reg, "pass '", names[index], "' listed but not found");
  // Allocate both strings before writing either, so a failure writes nothing.
  std::unique_ptr<char, void (*)(char*)> n(name ? NewCString(reg->name) : nullptr,
                                           kiln_string_free);
  std::unique_ptr<char, void (*)(char*)> r(
      required ? NewCString(Join(reg->required, ",")) : nullptr, kiln_string_free);
  if (name) *name = n.release();
  if (required) *required = r.release();
  if (opt_level) *opt_level = reg->opt_level;
  KILN_API_END
}
}  // extern "C"
