// ONNX import: parsing, validation, TensorProto decoding. The graph walk (topological order,
// node conversion, If/Loop/Scan) lives in import_graph.cc, the per-op conversion in op_table.cc.
//
// Order of the checks, and why: parse (size-limited) -> opset (so a model from a newer ONNX
// reports its opset, not a checker complaint) -> our own graph structure checks and
// topological sort (clear messages for cycles and undefined values; the checker only accepts
// sorted graphs, so the proto is reordered before it runs) -> initializers decoded (sizes and
// external-data paths checked) -> onnx::checker -> conversion -> InferTypes (a type error
// names the ONNX node).
#include "api/onnx/onnx_import.h"

#include <google/protobuf/io/coded_stream.h>

#include <algorithm>
#include <bit>
#include <charconv>
#include <climits>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>

#include "api/onnx/import_graph.h"
#include "api/onnx/op_table.h"
#include "ir/type_infer.h"
#include "onnx/checker.h"

// After ONNX's headers: their enums use names that these headers define as macros.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace kiln {
namespace onnx_import {
namespace {

static_assert(std::endian::native == std::endian::little,
              "ONNX raw_data is little-endian; a big-endian host needs byte swapping here");

namespace fs = std::filesystem;

// Half the machine's memory: weights beyond that leave no room to run the model.
uint64_t DefaultMaxWeightBytes() {
  const int64_t total = PhysicalMemoryBytes();
  return total > 0 ? static_cast<uint64_t>(total) / 2 : uint64_t{1} << 40;
}

// Opsets 1-12 import op by op: each converter says the oldest opset whose semantics it
// implements (op_table.h), and a node older than that is refused naming op, node and opset.
constexpr int64_t kMinOpset = 1;
constexpr int64_t kMaxOpset = 17;

template <typename Message>
void ParseMessage(const void* data, size_t size, Message* msg, const std::string& what) {
  if (data == nullptr && size != 0) Throw(ErrorCode::kInvalidArgument, what, ": null buffer");
  // Protobuf cannot address more than 2 GiB in one message; bigger models keep their weights
  // in external data files.
  if (size == 0) Throw(ErrorCode::kInvalidArgument, what, " is empty");
  if (size > kMaxProtobufBytes)
    Throw(ErrorCode::kInvalidArgument, what, ": ", size,
          " bytes is over protobuf's 2 GiB limit (store the weights as external data)");
  google::protobuf::io::CodedInputStream in(static_cast<const uint8_t*>(data),
                                            static_cast<int>(size));
  in.SetTotalBytesLimit(INT_MAX);  // the default (64 MiB in old releases) rejects big models
  if (!msg->ParseFromCodedStream(&in) || !in.ConsumedEntireMessage())
    Throw(ErrorCode::kInvalidArgument, what,
          ": not a valid ONNX protobuf (truncated or corrupt file)");
}

// The bytes of the file at `path`, which must be a regular file of at most `max_bytes`
// (checked with stat before anything is read: a device such as /dev/zero, a FIFO or a huge file
// is refused at once, never read until memory runs out). `what` names it in errors.
std::string ReadWholeFile(const std::string& path, uint64_t max_bytes, const std::string& what) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    Throw(ErrorCode::kInvalidArgument, "cannot open '", path, "': ", std::strerror(errno));
  if (S_ISDIR(st.st_mode))
    Throw(ErrorCode::kInvalidArgument, "'", path, "' is a directory, not ", what);
  if (!S_ISREG(st.st_mode))
    Throw(ErrorCode::kInvalidArgument, "'", path, "' is not a regular file (a device, FIFO or ",
          "socket), so not ", what);
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size > max_bytes)
    Throw(ErrorCode::kInvalidArgument, "'", path, "' is ", size, " bytes, over the limit of ",
          max_bytes, " for ", what,
          max_bytes == kMaxProtobufBytes ? " (protobuf's 2 GiB; store the weights as external data)"
                                         : " (max_model_bytes)");
  std::ifstream f(path, std::ios::binary);
  if (!f) Throw(ErrorCode::kInvalidArgument, "cannot open '", path, "'");
  std::string bytes(static_cast<size_t>(size), '\0');
  f.read(bytes.data(), static_cast<std::streamsize>(size));
  // A file that shrank since stat reads short; one that grew is read to its stat size, and the
  // parser then reports a truncated message if that cut it.
  bytes.resize(static_cast<size_t>(f.gcount()));
  if (f.bad()) Throw(ErrorCode::kInvalidArgument, "cannot read '", path, "'");
  return bytes;
}

int64_t ParseInt64(const std::string& s, const std::string& what) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || v < 0)
    Throw(ErrorCode::kInvalidArgument, what, ": '", s, "' is not a valid byte count");
  return v;
}

// True when `path` is `base` or below it; both canonical.
bool IsUnder(const fs::path& path, const fs::path& base) {
  auto [b, p] = std::mismatch(base.begin(), base.end(), path.begin(), path.end());
  // A trailing empty component (a base ending in '/') matches anything.
  return b == base.end() || (std::next(b) == base.end() && b->empty());
}

struct ExternalRange {
  fs::path file;
  std::string location;  // as written in the model, for messages
  int64_t offset = 0;
  size_t nbytes = 0;
};

// Where `nbytes` of external data lie, after checking that the location stays inside
// base_dir (no absolute path, no '..', no symlink out) and that the range lies in the file.
ExternalRange ResolveExternalData(const onnx::TensorProto& proto, const std::string& base_dir,
                                  const std::string& what, size_t nbytes) {
  std::string location;
  int64_t offset = 0, length = -1;
  for (const onnx::StringStringEntryProto& kv : proto.external_data()) {
    if (kv.key() == "location")
      location = kv.value();
    else if (kv.key() == "offset")
      offset = ParseInt64(kv.value(), StrCat(what, ": external data offset"));
    else if (kv.key() == "length")
      length = ParseInt64(kv.value(), StrCat(what, ": external data length"));
  }
  if (location.empty())
    Throw(ErrorCode::kInvalidArgument, what, ": external data without a location");
  if (base_dir.empty())
    Throw(ErrorCode::kInvalidArgument, what, ": external data '", location,
          "' but no base folder is known (import from a file, or set base_dir)");
  fs::path rel(location);
  if (rel.is_absolute() || rel.has_root_name() || rel.has_root_directory())
    Throw(ErrorCode::kInvalidArgument, what, ": external data location '", location,
          "' is an absolute path; it must be relative to the model's folder");
  for (const fs::path& part : rel)
    if (part == "..")
      Throw(ErrorCode::kInvalidArgument, what, ": external data location '", location,
            "' contains '..'; it must stay inside the model's folder");
  std::error_code ec;
  fs::path base = fs::weakly_canonical(fs::path(base_dir), ec);
  if (ec) Throw(ErrorCode::kInvalidArgument, what, ": cannot resolve folder '", base_dir, "'");
  fs::path full = fs::weakly_canonical(base / rel, ec);
  if (ec || !IsUnder(full, base))
    Throw(ErrorCode::kInvalidArgument, what, ": external data location '", location,
          "' resolves outside the model's folder (through a symlink)");
  if (!fs::is_regular_file(full, ec))
    Throw(ErrorCode::kInvalidArgument, what, ": external data file '", location,
          "' does not exist or is not a regular file");
  uintmax_t file_size = fs::file_size(full, ec);
  if (ec) Throw(ErrorCode::kInvalidArgument, what, ": cannot stat '", location, "'");
  if (length >= 0 && static_cast<uint64_t>(length) != nbytes)
    Throw(ErrorCode::kInvalidArgument, what, ": external data length ", length,
          " does not match the shape (", nbytes, " bytes expected)");
  if (static_cast<uintmax_t>(offset) > file_size || nbytes > file_size - offset)
    Throw(ErrorCode::kInvalidArgument, what, ": external data range [", offset, ", ",
          static_cast<uintmax_t>(offset) + nbytes, ") lies outside '", location, "' (", file_size,
          " bytes)");
  return ExternalRange{full, location, offset, nbytes};
}

// The weights the current import (on this thread) may still decode, in bytes; null outside an
// import (a tensor .pb file, a Constant attribute read on its own). Set by WeightBudgetScope.
struct WeightBudget {
  uint64_t limit = 0, left = 0;
};
thread_local WeightBudget* t_weight_budget = nullptr;

class WeightBudgetScope {
 public:
  explicit WeightBudgetScope(uint64_t limit) : budget_{limit, limit}, saved_(t_weight_budget) {
    t_weight_budget = &budget_;
  }
  ~WeightBudgetScope() { t_weight_budget = saved_; }
  WeightBudgetScope(const WeightBudgetScope&) = delete;
  WeightBudgetScope& operator=(const WeightBudgetScope&) = delete;

 private:
  WeightBudget budget_;
  WeightBudget* saved_;
};

// Charges `nbytes` of `what` to the import's weight budget, before they are allocated or mapped.
void ChargeWeights(size_t nbytes, const std::string& what) {
  WeightBudget* b = t_weight_budget;
  if (!b) return;
  if (nbytes > b->left)
    Throw(ErrorCode::kInvalidArgument, what, ": its ", nbytes, " bytes bring the model's weights ",
          "over the limit of ", b->limit, " bytes (max_weight_bytes)");
  b->left -= nbytes;
}

// External data this large, at an offset this aligned, is mapped rather than read: its pages
// stay the file's (shared with the page cache, dropped under memory pressure, never copied
// unless written), and loading takes no time whatever the size. Smaller tensors are read, as
// they would waste most of a page. The alignment is what Tensor::Empty gives, which kernels
// may count on.
constexpr size_t kMapMinBytes = 64 << 10;
constexpr int64_t kMapAlignment = 64;

// The range as a tensor over a private (copy-on-write) mapping of the file; nullopt when mmap
// fails (the caller then reads).
std::optional<Tensor> MapExternalRange(const ExternalRange& r, DType dtype,
                                       const std::vector<int64_t>& shape) {
  const int fd = ::open(r.file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  const int64_t page = ::sysconf(_SC_PAGESIZE);
  const int64_t start = r.offset / page * page;
  const size_t length = static_cast<size_t>(r.offset - start) + r.nbytes;
  void* base = ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, start);
  ::close(fd);  // the mapping keeps the file
  if (base == MAP_FAILED) return std::nullopt;
  std::shared_ptr<void> owner(base, [length](void* p) { ::munmap(p, length); });
  return Tensor::Wrap(dtype, shape, static_cast<char*>(base) + (r.offset - start),
                      std::move(owner));
}

void ReadExternalRange(const ExternalRange& r, const std::string& what, void* dst) {
  std::ifstream f(r.file, std::ios::binary);
  f.seekg(r.offset);
  f.read(static_cast<char*>(dst), static_cast<std::streamsize>(r.nbytes));
  if (!f) Throw(ErrorCode::kInvalidArgument, what, ": cannot read '", r.location, "'");
}

// A bool byte other than 0/1 would be undefined behaviour when read as bool. Only such bytes are
// written (a mapped tensor's pages stay the file's where they hold none).
void NormalizeBools(Tensor& t) {
  auto* b = static_cast<uint8_t*>(t.raw_data());
  for (size_t i = 0, n = static_cast<size_t>(t.numel()); i < n; ++i)
    if (b[i] > 1) b[i] = 1;
}

// Copies a typed repeated field into the tensor, converting each element; the count was
// checked by the caller.
template <typename Field>
void CopyTyped(const Field& field, Tensor& t) {
  DispatchDType(t.dtype(), [&]<typename T>() {
    T* d = t.data<T>();
    for (int64_t i = 0; i < t.numel(); ++i) {
      if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>)
        d[i].bits = static_cast<uint16_t>(field.Get(static_cast<int>(i)));  // bits in int32_data
      else if constexpr (std::is_same_v<T, bool>)
        d[i] = field.Get(static_cast<int>(i)) != 0;
      else
        d[i] = static_cast<T>(field.Get(static_cast<int>(i)));
    }
  });
}

}  // namespace

std::optional<DType> DTypeFromOnnx(int32_t t) {
  switch (t) {
    case onnx::TensorProto::FLOAT:
      return DType::kFloat32;
    case onnx::TensorProto::UINT8:
      return DType::kUInt8;
    case onnx::TensorProto::INT8:
      return DType::kInt8;
    case onnx::TensorProto::INT16:
      return DType::kInt16;
    case onnx::TensorProto::INT32:
      return DType::kInt32;
    case onnx::TensorProto::INT64:
      return DType::kInt64;
    case onnx::TensorProto::BOOL:
      return DType::kBool;
    case onnx::TensorProto::FLOAT16:
      return DType::kFloat16;
    case onnx::TensorProto::DOUBLE:
      return DType::kFloat64;
    case onnx::TensorProto::BFLOAT16:
      return DType::kBFloat16;
    case onnx::TensorProto::UINT16:
      return DType::kUInt16;
    case onnx::TensorProto::UINT32:
      return DType::kUInt32;
    case onnx::TensorProto::UINT64:
      return DType::kUInt64;
    default:
      return std::nullopt;
  }
}

std::string OnnxTypeName(int32_t t) {
  if (onnx::TensorProto::DataType_IsValid(t))
    return onnx::TensorProto::DataType_Name(static_cast<onnx::TensorProto::DataType>(t));
  return StrCat("data type ", t);
}

Tensor TensorFromProto(const onnx::TensorProto& proto, const std::string& base_dir,
                       const std::string& what) {
  std::optional<DType> dtype = DTypeFromOnnx(proto.data_type());
  if (!dtype)
    Throw(ErrorCode::kUnsupported, what, ": ", OnnxTypeName(proto.data_type()),
          " tensors are not supported");
  if (proto.has_segment())
    Throw(ErrorCode::kUnsupported, what, ": segmented tensors are not supported");
  std::vector<int64_t> shape(proto.dims().begin(), proto.dims().end());
  // Negative dims and overflowing products are kInvalidArgument naming `what`.
  int64_t numel = CheckedNumel(shape, what);
  size_t elem = static_cast<size_t>(DTypeSize(*dtype));
  if (static_cast<uint64_t>(numel) > std::numeric_limits<size_t>::max() / elem)
    Throw(ErrorCode::kInvalidArgument, what, ": shape ", IntsToString(shape), " is too large");
  size_t nbytes = static_cast<size_t>(numel) * elem;

  auto check_count = [&](int64_t count, const char* field) {
    if (count != numel)
      Throw(ErrorCode::kInvalidArgument, what, ": ", field, " holds ", count, " values but shape ",
            IntsToString(shape), " needs ", numel);
  };
  if (proto.data_location() == onnx::TensorProto::EXTERNAL) {
    // The location and range are checked against the file before the buffer is allocated.
    ExternalRange range = ResolveExternalData(proto, base_dir, what, nbytes);
    ChargeWeights(nbytes, what);
    std::optional<Tensor> t;
    if (nbytes >= kMapMinBytes && range.offset % kMapAlignment == 0)
      t = MapExternalRange(range, *dtype, shape);
    if (!t) {
      t = Tensor::Empty(*dtype, shape);
      ReadExternalRange(range, what, t->raw_data());
    }
    if (*dtype == DType::kBool) NormalizeBools(*t);
    return std::move(*t);
  }
  if (proto.has_raw_data()) {
    const std::string& raw = proto.raw_data();
    if (raw.size() != nbytes)
      Throw(ErrorCode::kInvalidArgument, what, ": raw_data has ", raw.size(), " bytes but shape ",
            IntsToString(shape), " of ", DTypeName(*dtype), " needs ", nbytes);
    ChargeWeights(nbytes, what);
    Tensor t = Tensor::Empty(*dtype, shape);
    if (nbytes) std::memcpy(t.raw_data(), raw.data(), nbytes);
    if (*dtype == DType::kBool) NormalizeBools(t);
    return t;
  }
  switch (proto.data_type()) {
    case onnx::TensorProto::FLOAT:
      check_count(proto.float_data_size(), "float_data");
      break;
    case onnx::TensorProto::DOUBLE:
      check_count(proto.double_data_size(), "double_data");
      break;
    case onnx::TensorProto::INT64:
      check_count(proto.int64_data_size(), "int64_data");
      break;
    case onnx::TensorProto::UINT32:  // both unsigned 32- and 64-bit values live in uint64_data
    case onnx::TensorProto::UINT64:
      check_count(proto.uint64_data_size(), "uint64_data");
      break;
    default:
      check_count(proto.int32_data_size(), "int32_data");
      break;
  }
  ChargeWeights(nbytes, what);
  Tensor t = Tensor::Empty(*dtype, shape);
  switch (proto.data_type()) {
    case onnx::TensorProto::FLOAT:
      CopyTyped(proto.float_data(), t);
      break;
    case onnx::TensorProto::DOUBLE:
      CopyTyped(proto.double_data(), t);
      break;
    case onnx::TensorProto::INT64:
      CopyTyped(proto.int64_data(), t);
      break;
    case onnx::TensorProto::UINT32:
    case onnx::TensorProto::UINT64:
      CopyTyped(proto.uint64_data(), t);
      break;
    default:
      CopyTyped(proto.int32_data(), t);
      break;
  }
  return t;
}

namespace {

// The default-domain opset; kUnsupported outside [kMinOpset, kMaxOpset].
int64_t DefaultOpset(const onnx::ModelProto& model) {
  if (model.opset_import_size() == 0)
    Throw(ErrorCode::kInvalidArgument, "the model has no opset_import (not an ONNX model?)");
  int64_t opset = -1;
  for (const onnx::OperatorSetIdProto& id : model.opset_import())
    if (id.domain().empty() || id.domain() == "ai.onnx") opset = id.version();
  if (opset < 0) {
    std::string domains;
    for (const onnx::OperatorSetIdProto& id : model.opset_import())
      domains += StrCat(domains.empty() ? "" : ", ", id.domain(), " ", id.version());
    Throw(ErrorCode::kUnsupported, "the model imports no opset of the default ONNX domain (only ",
          domains, ")");
  }
  if (opset < kMinOpset || opset > kMaxOpset)
    Throw(ErrorCode::kUnsupported, "unsupported ONNX opset ", opset, " (kiln imports opsets ",
          kMinOpset, " to ", kMaxOpset, " of the default domain)");
  return opset;
}

Type InputType(const onnx::ValueInfoProto& v, int* unknown_dims) {
  const std::string what = StrCat("graph input ", Quoted(v.name()));
  if (!v.type().has_tensor_type())
    Throw(ErrorCode::kUnsupported, what, ": only tensor inputs are supported");
  const onnx::TypeProto::Tensor& tt = v.type().tensor_type();
  std::optional<DType> dtype = DTypeFromOnnx(tt.elem_type());
  if (!dtype)
    Throw(ErrorCode::kUnsupported, what, ": ", OnnxTypeName(tt.elem_type()),
          " tensors are not supported");
  if (!tt.has_shape())
    Throw(ErrorCode::kUnsupported, what, " has no shape (unknown rank is not supported)");
  Shape shape;
  for (const onnx::TensorShapeProto::Dimension& d : tt.shape().dim()) {
    if (d.has_dim_value()) {
      if (d.dim_value() < 0)
        Throw(ErrorCode::kInvalidArgument, what, ": negative dim ", d.dim_value());
      shape.push_back(Dim(d.dim_value()));
    } else if (d.has_dim_param() && !d.dim_param().empty()) {
      shape.push_back(Dim::Symbol(ExternalDimName(d.dim_param())));
    } else {
      shape.push_back(Dim::Symbol(StrCat("unk__", (*unknown_dims)++)));
    }
  }
  return TensorType(std::move(shape), *dtype);
}

// A sequence graph input of the element shapes `options` gives: one parameter per element
// (appended to `params` and `names`), and the sequence they make.
Expr SequenceInput(const onnx::ValueInfoProto& v, const OnnxImportOptions& options,
                   std::vector<Var>& params, std::vector<std::string>& names) {
  const std::string what = StrCat("graph input ", Quoted(v.name()));
  const onnx::TypeProto& element = v.type().sequence_type().elem_type();
  if (!element.has_tensor_type())
    Throw(ErrorCode::kUnsupported, what, ": only sequences of tensors are supported");
  std::optional<DType> dtype = DTypeFromOnnx(element.tensor_type().elem_type());
  if (!dtype)
    Throw(ErrorCode::kUnsupported, what, ": sequences of ",
          OnnxTypeName(element.tensor_type().elem_type()), " tensors are not supported");
  auto it = options.sequence_inputs.find(v.name());
  if (it == options.sequence_inputs.end())
    Throw(ErrorCode::kUnsupported, what,
          " is a sequence: kiln imports it given its elements' shapes "
          "(OnnxImportOptions::sequence_inputs; in C, kiln_load_options_set_sequence_input)");
  std::vector<Expr> elements;
  for (size_t i = 0; i < it->second.size(); ++i) {
    Var p = MakeVar(StrCat(v.name(), ".", i), TensorType(it->second[i], *dtype));
    params.push_back(p);
    names.push_back(p->name);
    elements.push_back(p);
  }
  if (elements.empty()) return MakeCall("seq.empty", {}, Attrs{{"dtype", *dtype}}, v.name());
  return MakeCall("seq.construct", std::move(elements), {}, v.name());
}

// A `Constant` node's value, from whichever attribute it sets.

// A graph output declared with one element type that computes another is a contradiction in the
// model (a caller reading the declared type would misread the bytes), so it is refused. Shapes
// are not compared: exporters often leave stale or partly known output shapes.
void CheckDeclaredOutputTypes(const onnx::GraphProto& graph, const Type& computed) {
  const TupleTypeNode* tuple = graph.output_size() > 1 ? AsTuple(computed) : nullptr;
  for (int i = 0; i < graph.output_size(); ++i) {
    const onnx::ValueInfoProto& out = graph.output(i);
    if (!out.type().has_tensor_type()) continue;
    const int32_t declared = out.type().tensor_type().elem_type();
    if (declared == onnx::TensorProto::UNDEFINED) continue;
    const TensorTypeNode* t = AsTensor(tuple ? tuple->fields.at(static_cast<size_t>(i)) : computed);
    if (!t) continue;
    std::optional<DType> dtype = DTypeFromOnnx(declared);
    if (!dtype || *dtype != t->dtype)
      Throw(ErrorCode::kInvalidArgument, "graph output ", Quoted(out.name()), " is declared ",
            OnnxTypeName(declared), " but the graph computes ", DTypeName(t->dtype), " for it");
  }
}

ImportedModel Import(onnx::ModelProto& model, const OnnxImportOptions& options,
                     const std::string& fallback_name) {
  const std::string& base_dir = options.base_dir;
  WeightBudgetScope budget(options.max_weight_bytes ? options.max_weight_bytes
                                                    : DefaultMaxWeightBytes());
  int64_t opset = DefaultOpset(model);
  onnx::GraphProto* graph = model.mutable_graph();
  if (graph->sparse_initializer_size() > 0)
    Throw(ErrorCode::kUnsupported, "sparse initializers are not supported");

  // Labels by original index (what the user's file numbers), then the sorted order.
  std::vector<int> order = TopologicalOrder(*graph);
  std::vector<std::string> labels;
  labels.reserve(order.size());
  for (int i : order) labels.push_back(NodeLabel(graph->node(i), i));
  if (!std::is_sorted(order.begin(), order.end())) {
    google::protobuf::RepeatedPtrField<onnx::NodeProto> sorted;
    for (int i : order) sorted.Add()->Swap(graph->mutable_node(i));
    graph->mutable_node()->Swap(&sorted);
  }

  // Initializers are decoded (and their external-data paths vetted) before the checker runs:
  // libonnx 1.12's checker resolves external data against the process's working folder, and
  // would stat a path such as `../../etc/passwd` before ours rejected it. Once decoded, each
  // proto is emptied (no data, shape [0], which the checker accepts without a value field), so
  // the model's weights are not held twice while the graph is built.
  std::unordered_map<std::string, Expr> values;
  for (onnx::TensorProto& init : *graph->mutable_initializer()) {
    values[init.name()] = MakeConstant(
        TensorFromProto(init, base_dir, StrCat("initializer ", Quoted(init.name()))), init.name());
    init.clear_external_data();
    init.clear_data_location();
    init.clear_float_data();
    init.clear_int32_data();
    init.clear_int64_data();
    init.clear_double_data();
    init.clear_uint64_data();
    init.clear_string_data();
    init.clear_raw_data();
    init.clear_dims();
    init.add_dims(0);
  }

  try {
    onnx::checker::check_model(model);
  } catch (const std::exception& e) {
    Throw(ErrorCode::kInvalidArgument, "the ONNX checker rejected the model: ", e.what());
  }

  ImportedModel result;
  std::vector<Var> params;
  int unknown_dims = 0;
  for (const onnx::ValueInfoProto& in : graph->input()) {
    if (values.count(in.name())) continue;  // an initializer: a constant with a default
    if (in.type().has_sequence_type()) {
      values[in.name()] = SequenceInput(in, options, params, result.input_names);
      continue;
    }
    Var v = MakeVar(in.name(), InputType(in, &unknown_dims));
    values[in.name()] = v;
    params.push_back(v);
    result.input_names.push_back(in.name());
  }

  TypeCache types;
  ConvertGraph(model, *graph, labels, opset, base_dir, &types, values);

  std::vector<Expr> outputs;
  std::set<std::string> output_names;
  for (const onnx::ValueInfoProto& out : graph->output()) {
    // Outputs are returned by name: two of one name would leave the caller one of them.
    if (!output_names.insert(out.name()).second)
      Throw(ErrorCode::kInvalidArgument, "two graph outputs are named ", Quoted(out.name()));
    auto it = values.find(out.name());
    if (it == values.end())
      Throw(ErrorCode::kInvalidArgument, "graph output ", Quoted(out.name()), " is not defined");
    outputs.push_back(it->second);
    result.output_names.push_back(out.name());
  }
  if (outputs.empty()) Throw(ErrorCode::kInvalidArgument, "the graph has no outputs");
  Expr body = outputs.size() == 1 ? outputs[0] : MakeTuple(outputs);
  result.graph = InferTypes(MakeFunction(std::move(params), body));
  CheckDeclaredOutputTypes(*graph, result.graph->body->type);
  result.name = !graph->name().empty()   ? graph->name()
                : !fallback_name.empty() ? fallback_name
                                         : "model";
  result.opset = opset;
  return result;
}

}  // namespace
}  // namespace onnx_import

using onnx_import::Import;
using onnx_import::ParseMessage;
using onnx_import::ReadWholeFile;

ImportedModel ImportOnnxFile(const std::string& path, const OnnxImportOptions& options) {
  std::string bytes =
      ReadWholeFile(path, std::min(options.max_model_bytes, kMaxProtobufBytes), "an ONNX model");
  onnx::ModelProto model;
  ParseMessage(bytes.data(), bytes.size(), &model, StrCat("ONNX model '", path, "'"));
  bytes = std::string();  // the parsed model holds its own copy; free the file early
  std::filesystem::path p(path);
  OnnxImportOptions o = options;
  if (o.base_dir.empty()) o.base_dir = p.parent_path().empty() ? "." : p.parent_path().string();
  try {
    return Import(model, o, p.stem().string());
  } catch (const Error& e) {
    if (e.code() == ErrorCode::kTypeError) throw;
    throw Error(e.code(), StrCat(path, ": ", e.what()));
  }
}

ImportedModel ImportOnnxBuffer(const void* data, size_t size, const OnnxImportOptions& options) {
  onnx::ModelProto model;
  if (size > options.max_model_bytes)
    Throw(ErrorCode::kInvalidArgument, "ONNX model buffer: ", size, " bytes, over the limit of ",
          options.max_model_bytes, " (max_model_bytes)");
  ParseMessage(data, size, &model, "ONNX model buffer");
  return Import(model, options, "");
}

Tensor ReadOnnxTensorBuffer(const void* data, size_t size, std::string* name) {
  onnx::TensorProto proto;
  ParseMessage(data, size, &proto, "ONNX tensor buffer");
  Tensor t = onnx_import::TensorFromProto(
      proto, "", proto.name().empty() ? "ONNX tensor" : StrCat("ONNX tensor '", proto.name(), "'"));
  if (name) *name = proto.name();
  return t;
}

Tensor ReadOnnxTensorFile(const std::string& path, std::string* name) {
  std::string bytes = ReadWholeFile(path, kMaxProtobufBytes, "an ONNX tensor file");
  onnx::TensorProto proto;
  ParseMessage(bytes.data(), bytes.size(), &proto, StrCat("ONNX tensor file '", path, "'"));
  std::filesystem::path p(path);
  std::string dir = p.parent_path().empty() ? "." : p.parent_path().string();
  Tensor t = onnx_import::TensorFromProto(proto, dir, StrCat("ONNX tensor file '", path, "'"));
  if (name) *name = proto.name();
  return t;
}

std::vector<OnnxGraphInput> OnnxGraphInputs(const std::string& path, uint64_t max_model_bytes) {
  std::string bytes =
      ReadWholeFile(path, std::min(max_model_bytes, kMaxProtobufBytes), "an ONNX model");
  onnx::ModelProto model;
  ParseMessage(bytes.data(), bytes.size(), &model, StrCat("ONNX model '", path, "'"));
  std::set<std::string> initializers;
  for (const onnx::TensorProto& t : model.graph().initializer()) initializers.insert(t.name());
  std::vector<OnnxGraphInput> inputs;
  for (const onnx::ValueInfoProto& v : model.graph().input())
    if (!initializers.count(v.name())) inputs.push_back({v.name(), v.type().has_sequence_type()});
  return inputs;
}

std::vector<Tensor> ReadOnnxSequenceFile(const std::string& path, std::string* name) {
  std::string bytes = ReadWholeFile(path, kMaxProtobufBytes, "an ONNX sequence file");
  onnx::SequenceProto proto;
  const std::string what = StrCat("ONNX sequence file '", path, "'");
  ParseMessage(bytes.data(), bytes.size(), &proto, what);
  if (proto.elem_type() != onnx::SequenceProto::TENSOR &&
      proto.elem_type() != onnx::SequenceProto::UNDEFINED)
    Throw(ErrorCode::kUnsupported, what, ": only sequences of tensors are supported (elem_type ",
          proto.elem_type(), ")");
  if (proto.sequence_values_size() || proto.map_values_size() || proto.optional_values_size() ||
      proto.sparse_tensor_values_size())
    Throw(ErrorCode::kUnsupported, what, ": only sequences of tensors are supported");
  std::filesystem::path p(path);
  std::string dir = p.parent_path().empty() ? "." : p.parent_path().string();
  std::vector<Tensor> elements;
  for (int i = 0; i < proto.tensor_values_size(); ++i)
    elements.push_back(
        onnx_import::TensorFromProto(proto.tensor_values(i), dir, StrCat(what, ", element ", i)));
  if (name) *name = proto.name();
  return elements;
}

std::vector<std::string> SupportedOnnxOps() {
  std::vector<std::string> names = onnx_import::ConverterNames();
  names.push_back("Constant");  // handled by the importer itself
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace kiln
