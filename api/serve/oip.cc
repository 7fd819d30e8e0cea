// The Open Inference Protocol's wire format (oip.h). Requests are parsed with nlohmann::json
// (a hardened parser; no recursion limit is needed since it parses iteratively); responses,
// whose tensor data can be large, are written directly.
#include "api/serve/oip.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <utility>

namespace kiln::serve {
namespace {

using nlohmann::json;

struct DtypeName {
  kiln_dtype dtype;
  const char* name;
};
constexpr DtypeName kDtypes[] = {
    {KILN_BOOL, "BOOL"},  {KILN_U8, "UINT8"}, {KILN_U16, "UINT16"}, {KILN_U32, "UINT32"},
    {KILN_U64, "UINT64"}, {KILN_I8, "INT8"},  {KILN_I16, "INT16"},  {KILN_I32, "INT32"},
    {KILN_I64, "INT64"},  {KILN_F16, "FP16"}, {KILN_F32, "FP32"},   {KILN_F64, "FP64"},
    {KILN_BF16, "BF16"},
};

[[noreturn]] void Bad(std::string message) {
  throw HttpError{400, std::move(message)};
}

// A JSON string literal; bytes that are not UTF-8 (a model file's name may have them) become
// U+FFFD rather than an exception.
std::string Quote(const std::string& s) {
  return json(s).dump(-1, ' ', false, json::error_handler_t::replace);
}

// A value for a message. Containers are named, not printed: nlohmann's dump recurses, and a
// hostile request can nest arrays deep enough to overflow the stack.
std::string Describe(const json& v) {
  if (v.is_array()) return "an array";
  if (v.is_object()) return "an object";
  std::string s = v.dump(-1, ' ', false, json::error_handler_t::replace);
  return s.size() > 40 ? s.substr(0, 40) + "..." : s;
}

// The shape for a message, when it is a flat array of numbers (else described).
std::string DescribeShape(const json& shape) {
  std::string s = "[";
  for (const json& d : shape) {
    if (d.is_structured()) return "(not a list of numbers)";
    if (s.size() > 1) s += ',';
    s += Describe(d);
  }
  return s + "]";
}

// An integer JSON value into T, range-checked.
template <typename T>
bool PutInt(const json& v, unsigned char* out) {
  T t;
  if (v.is_number_unsigned()) {
    uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<T>::max())) return false;
    t = static_cast<T>(u);
  } else if (v.is_number_integer()) {
    int64_t s = v.get<int64_t>();
    if (std::numeric_limits<T>::is_signed ? s < static_cast<int64_t>(std::numeric_limits<T>::min())
                                          : s < 0)
      return false;
    if (s > 0 && static_cast<uint64_t>(s) > static_cast<uint64_t>(std::numeric_limits<T>::max()))
      return false;
    t = static_cast<T>(s);
  } else {
    return false;
  }
  std::memcpy(out, &t, sizeof t);
  return true;
}

// One JSON element of `dtype` into `out`; false when it is not a value of that type.
bool PutElement(const json& v, kiln_dtype dtype, unsigned char* out) {
  switch (dtype) {
    case KILN_BOOL:
      if (!v.is_boolean()) return false;
      *out = v.get<bool>() ? 1 : 0;
      return true;
    case KILN_U8:
      return PutInt<uint8_t>(v, out);
    case KILN_U16:
      return PutInt<uint16_t>(v, out);
    case KILN_U32:
      return PutInt<uint32_t>(v, out);
    case KILN_U64:
      return PutInt<uint64_t>(v, out);
    case KILN_I8:
      return PutInt<int8_t>(v, out);
    case KILN_I16:
      return PutInt<int16_t>(v, out);
    case KILN_I32:
      return PutInt<int32_t>(v, out);
    case KILN_I64:
      return PutInt<int64_t>(v, out);
    case KILN_F16:
    case KILN_BF16:
    case KILN_F32:
    case KILN_F64: {
      if (!v.is_number()) return false;
      double d = v.get<double>();
      if (dtype == KILN_F64) {
        std::memcpy(out, &d, 8);
      } else {
        // Past f32's range a conversion is undefined: such values become infinities.
        const float inf = std::numeric_limits<float>::infinity();
        float f = std::fabs(d) > std::numeric_limits<float>::max() ? (d > 0 ? inf : -inf)
                                                                   : static_cast<float>(d);
        if (dtype == KILN_F32) {
          std::memcpy(out, &f, 4);
        } else {
          uint16_t h = dtype == KILN_F16 ? cli::FloatToHalf(f) : cli::FloatToBf16(f);
          std::memcpy(out, &h, 2);
        }
      }
      return true;
    }
  }
  return false;
}

// The JSON `data` of input `t` (flat or nested in row-major order) into t.data.
void DecodeJsonData(const json& data, InputTensor& t, int64_t elements) {
  const size_t esize = kiln_dtype_size(t.dtype);
  int64_t n = 0;
  // Nested arrays are walked with an explicit stack: a hostile request cannot recurse deeply.
  std::vector<std::pair<const json*, size_t>> stack{{&data, 0}};
  if (!data.is_array()) Bad("input '" + t.name + "': \"data\" must be an array");
  while (!stack.empty()) {
    auto& [array, next] = stack.back();
    if (next == array->size()) {
      stack.pop_back();
      continue;
    }
    const json& v = (*array)[next++];
    if (v.is_array()) {
      stack.emplace_back(&v, 0);
      continue;
    }
    if (n == elements)
      Bad("input '" + t.name + "': \"data\" has more than the shape's " + std::to_string(elements) +
          " elements");
    if (!PutElement(v, t.dtype, t.data.get() + static_cast<size_t>(n) * esize))
      Bad("input '" + t.name + "': element " + std::to_string(n) + " (" + Describe(v) +
          ") is not a " + OipDatatype(t.dtype) + " value");
    ++n;
  }
  if (n != elements)
    Bad("input '" + t.name + "': \"data\" has " + std::to_string(n) + " elements, the shape " +
        std::to_string(elements));
}

const json* Find(const json& object, const char* key) {
  auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

// parameters.<key> as a bool (absent: false).
bool BoolParameter(const json& object, const char* key, const std::string& where) {
  const json* params = Find(object, "parameters");
  if (!params) return false;
  if (!params->is_object()) Bad(where + ": \"parameters\" must be an object");
  const json* v = Find(*params, key);
  if (!v) return false;
  if (!v->is_boolean()) Bad(where + ": parameters." + key + " must be true or false");
  return v->get<bool>();
}

void AppendNumber(std::string& out, double v, const char* format) {
  if (!std::isfinite(v)) {
    out += "null";  // JSON has no NaN or infinity
    return;
  }
  char buf[40];
  std::snprintf(buf, sizeof buf, format, v);
  out += buf;
}

// Tensor data as a flat JSON array, exactly (integers are not routed through double).
void AppendJsonData(std::string& out, const OutputView& t) {
  const size_t esize = kiln_dtype_size(t.dtype);
  const size_t n = esize ? t.nbytes / esize : 0;
  const unsigned char* p = static_cast<const unsigned char*>(t.data);
  out += '[';
  for (size_t i = 0; i < n; ++i, p += esize) {
    if (i) out += ',';
    switch (t.dtype) {
      case KILN_F32: {
        float f;
        std::memcpy(&f, p, 4);
        AppendNumber(out, f, "%.9g");
        break;
      }
      case KILN_F64: {
        double d;
        std::memcpy(&d, p, 8);
        AppendNumber(out, d, "%.17g");
        break;
      }
      case KILN_I64: {
        int64_t v;
        std::memcpy(&v, p, 8);
        out += std::to_string(v);
        break;
      }
      case KILN_U64: {
        uint64_t v;
        std::memcpy(&v, p, 8);
        out += std::to_string(v);
        break;
      }
      case KILN_BOOL:
        out += *p ? "true" : "false";
        break;
      default:  // the narrow types are exact in a double
        AppendNumber(out, cli::GetElement(p, t.dtype, 0), "%.9g");
    }
  }
  out += ']';
}

void AppendShape(std::string& out, const std::vector<int64_t>& shape) {
  out += '[';
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(shape[i]);
  }
  out += ']';
}

}  // namespace

const char* OipDatatype(kiln_dtype dtype) {
  for (const DtypeName& d : kDtypes)
    if (d.dtype == dtype) return d.name;
  return nullptr;
}

bool DtypeFromOip(std::string_view name, kiln_dtype* out) {
  for (const DtypeName& d : kDtypes)
    if (name == d.name) {
      *out = d.dtype;
      return true;
    }
  return false;
}

InferRequest ParseInferRequest(std::string_view body, std::optional<size_t> header_length,
                               const Limits& limits) {
  std::string_view header = body, binary;
  if (header_length) {
    if (*header_length > body.size())
      Bad("Inference-Header-Content-Length is " + std::to_string(*header_length) +
          ", past the body's " + std::to_string(body.size()) + " bytes");
    header = body.substr(0, *header_length);
    binary = body.substr(*header_length);
  }
  json request;
  try {
    request = json::parse(header.begin(), header.end());
  } catch (const json::exception& e) {
    Bad(std::string("the request is not valid JSON: ") + e.what());
  }
  if (!request.is_object()) Bad("the request must be a JSON object");

  InferRequest out;
  if (const json* id = Find(request, "id")) {
    if (!id->is_string()) Bad("\"id\" must be a string");
    out.id = id->get<std::string>();
  }
  out.binary_outputs = BoolParameter(request, "binary_data_output", "the request");

  const json* inputs = Find(request, "inputs");
  if (!inputs || !inputs->is_array()) Bad("the request has no \"inputs\" array");
  size_t binary_used = 0;
  for (size_t i = 0; i < inputs->size(); ++i) {
    const json& in = (*inputs)[i];
    const std::string where = "inputs[" + std::to_string(i) + "]";
    if (!in.is_object()) Bad(where + " must be an object");
    const json* name = Find(in, "name");
    if (!name || !name->is_string()) Bad(where + " has no \"name\" string");
    InputTensor t;
    t.name = name->get<std::string>();
    const std::string what = "input '" + t.name + "'";
    for (const InputTensor& seen : out.inputs)
      if (seen.name == t.name) Bad(what + " is given twice");

    const json* datatype = Find(in, "datatype");
    if (!datatype || !datatype->is_string()) Bad(what + " has no \"datatype\" string");
    if (!DtypeFromOip(datatype->get<std::string>(), &t.dtype))
      Bad(what + ": datatype '" + datatype->get<std::string>() + "' is not supported by kiln");

    const json* shape = Find(in, "shape");
    if (!shape || !shape->is_array()) Bad(what + " has no \"shape\" array");
    int64_t elements = 1;
    for (const json& d : *shape) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0)
        Bad(what + ": shape " + DescribeShape(*shape) + " must hold integers >= 0");
      int64_t v = d.get<int64_t>();
      t.shape.push_back(v);
      if (v && elements > static_cast<int64_t>(limits.max_elements) / v)
        Bad(what + ": shape " + DescribeShape(*shape) + " has more than the limit of " +
            std::to_string(limits.max_elements) + " elements");
      elements *= v;
    }
    if (elements > static_cast<int64_t>(limits.max_elements))
      Bad(what + ": shape " + DescribeShape(*shape) + " has more than the limit of " +
          std::to_string(limits.max_elements) + " elements");
    t.nbytes = static_cast<size_t>(elements) * kiln_dtype_size(t.dtype);
    // Memory is taken only once the request shows it holds that many elements, so a small
    // request cannot make the server allocate a large tensor.
    auto allocate = [&] { t.data.reset(new unsigned char[t.nbytes ? t.nbytes : 1]); };

    const json* params = Find(in, "parameters");
    const json* size = params && params->is_object() ? Find(*params, "binary_data_size") : nullptr;
    if (params && !params->is_object()) Bad(what + ": \"parameters\" must be an object");
    if (size) {
      if (!header_length)
        Bad(what +
            ": binary_data_size is set, but the request has no "
            "Inference-Header-Content-Length header");
      if (!size->is_number_unsigned() || size->get<uint64_t>() != t.nbytes)
        Bad(what + ": binary_data_size is " + Describe(*size) + ", the shape and datatype make " +
            std::to_string(t.nbytes) + " bytes");
      if (binary.size() - binary_used < t.nbytes)
        Bad(what + ": the binary data ends before its " + std::to_string(t.nbytes) + " bytes");
      allocate();
      if (t.nbytes) std::memcpy(t.data.get(), binary.data() + binary_used, t.nbytes);
      binary_used += t.nbytes;
      if (Find(in, "data")) Bad(what + " has both \"data\" and binary_data_size");
    } else {
      const json* data = Find(in, "data");
      if (!data) Bad(what + " has no \"data\" (nor a binary_data_size parameter)");
      // Each JSON value takes at least one byte of the header.
      if (static_cast<uint64_t>(elements) > header.size())
        Bad(what + ": \"data\" cannot hold the shape's " + std::to_string(elements) +
            " elements in a " + std::to_string(header.size()) + "-byte request");
      allocate();
      DecodeJsonData(*data, t, elements);
    }
    out.inputs.push_back(std::move(t));
  }
  if (binary_used != binary.size())
    Bad("the binary data has " + std::to_string(binary.size()) + " bytes; the inputs use " +
        std::to_string(binary_used));

  if (const json* outputs = Find(request, "outputs")) {
    if (!outputs->is_array()) Bad("\"outputs\" must be an array");
    for (size_t i = 0; i < outputs->size(); ++i) {
      const json& o = (*outputs)[i];
      const std::string where = "outputs[" + std::to_string(i) + "]";
      if (!o.is_object()) Bad(where + " must be an object");
      const json* name = Find(o, "name");
      if (!name || !name->is_string()) Bad(where + " has no \"name\" string");
      RequestedOutput r{name->get<std::string>(), out.binary_outputs};
      if (const json* params = Find(o, "parameters");
          params && params->is_object() && Find(*params, "binary_data"))
        r.binary = BoolParameter(o, "binary_data", "output '" + r.name + "'");
      for (const RequestedOutput& seen : out.outputs)
        if (seen.name == r.name) Bad("output '" + r.name + "' is asked for twice");
      out.outputs.push_back(std::move(r));
    }
  }
  return out;
}

Response EncodeInferResponse(const std::string& model_name, const std::string& id,
                             const std::vector<OutputView>& outputs,
                             const std::vector<bool>& binary) {
  Response r;
  std::string& s = r.body;
  s = "{\"model_name\":" + Quote(model_name) + ",\"model_version\":\"1\"";
  if (!id.empty()) s += ",\"id\":" + Quote(id);
  s += ",\"outputs\":[";
  bool any_binary = false;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const OutputView& t = outputs[i];
    s += i ? ",{\"name\":" : "{\"name\":";
    s += Quote(t.name);
    s += ",\"datatype\":\"";
    s += OipDatatype(t.dtype);
    s += "\",\"shape\":";
    AppendShape(s, t.shape);
    if (binary[i]) {
      s += ",\"parameters\":{\"binary_data_size\":" + std::to_string(t.nbytes) + "}}";
      any_binary = true;
    } else {
      s += ",\"data\":";
      AppendJsonData(s, t);
      s += '}';
    }
  }
  s += "]}";
  if (any_binary) {
    r.header_length = s.size();
    for (size_t i = 0; i < outputs.size(); ++i)
      if (binary[i] && outputs[i].nbytes)
        s.append(static_cast<const char*>(outputs[i].data), outputs[i].nbytes);
  }
  return r;
}

std::string ModelMetadataJson(const std::string& name, const std::vector<cli::IoType>& inputs,
                              const std::vector<cli::IoType>& outputs) {
  auto tensors = [](const std::vector<cli::IoType>& io) {
    json list = json::array();
    for (const cli::IoType& t : io) {
      const char* datatype = OipDatatype(t.dtype);
      list.push_back({{"name", t.name},
                      {"datatype", datatype ? datatype : "UNKNOWN"},
                      {"shape", t.dims}});  // -1 where symbolic, as the protocol says
    }
    return list;
  };
  json j = {{"name", name},
            {"versions", {"1"}},
            {"platform", "kiln_onnx"},
            {"inputs", tensors(inputs)},
            {"outputs", tensors(outputs)}};
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string ErrorJson(const std::string& message) {
  return json{{"error", message}}.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace kiln::serve
