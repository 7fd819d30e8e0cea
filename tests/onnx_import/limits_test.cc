// What the importer refuses before it reads or allocates (issue 18): files that are not regular
// files or are over the size limit, weights over the weight limit, external data that is mapped
// rather than read; and models that contradict themselves (two outputs of one name, an output
// declared with another element type than it computes).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "api/onnx/onnx_import.h"
#include "common/file_util.h"
#include "common/test_util.h"
#include "ir/interpreter.h"
#include "onnx/onnx_pb.h"
#include "onnx_import/onnx_builders.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using namespace onnx_test;  // NOLINT: the model builders
using ::testing::HasSubstr;

class OnnxLimits : public ::testing::Test {
 protected:
  std::string Write(const std::string& name, const std::string& bytes) {
    fs::path p = dir_ / name;
    test::WriteFile(p.string(), bytes);
    return p.string();
  }

  // y = x + w, w: f32[n] in `file` at `offset` (external data).
  onnx::ModelProto External(int64_t n, const std::string& file, int64_t offset) {
    onnx::ModelProto m = NewModel();
    AddInput(m, "x", {n});
    AddExternalInit(m, "w", n, file, offset, n * 4);
    AddNode(m, "Add", {"x", "w"}, {"y"});
    AddOutput(m, "y");
    return m;
  }

  test::TempDir tmp_{"kiln-onnx-limits"};
  fs::path dir_ = tmp_.path();
};

// Seconds `f` takes.
template <typename F>
double Seconds(F&& f) {
  auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

TEST_F(OnnxLimits, DevicesDirectoriesAndMissingFilesAreRefusedWithoutReading) {
  // /dev/zero never ends: reading it whole would never return.
  Error e = test::ErrorOf([] { ImportOnnxFile("/dev/zero"); });
  EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(e.what(), HasSubstr("'/dev/zero' is not a regular file"));
  EXPECT_THAT(test::ErrorOf([] { ReadOnnxTensorFile("/dev/zero"); }).what(),
              HasSubstr("is not a regular file"));
  EXPECT_THAT(test::ErrorOf([&] { ImportOnnxFile(dir_.string()); }).what(),
              HasSubstr("is a directory"));
  EXPECT_THAT(test::ErrorOf([&] { ImportOnnxFile((dir_ / "none.onnx").string()); }).what(),
              HasSubstr("cannot open"));
}

TEST_F(OnnxLimits, FilesOverTheLimitAreRefusedBeforeTheyAreRead) {
  // A sparse 3 GiB file: over protobuf's 2 GiB, refused from its size alone.
  fs::path big = dir_ / "big.onnx";
  { std::ofstream(big, std::ios::binary) << 'x'; }
  fs::resize_file(big, uint64_t{3} << 30);
  Error e(ErrorCode::kInternal, "not run");
  EXPECT_LT(Seconds([&] { e = test::ErrorOf([&] { ImportOnnxFile(big.string()); }); }), 1.0);
  EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(e.what(), HasSubstr("3221225472 bytes, over the limit of 2147483647"));
  EXPECT_THAT(e.what(), HasSubstr("protobuf's 2 GiB"));

  // A real model over a lower limit, from a file and from a buffer.
  std::string bytes = Bytes(OneNode("Relu", {test::RandomTensor(DType::kFloat32, {3}, 1)}));
  std::string file = Write("m.onnx", bytes);
  OnnxImportOptions small;
  small.max_model_bytes = bytes.size() - 1;
  EXPECT_THAT(test::ErrorOf([&] { ImportOnnxFile(file, small); }).what(),
              HasSubstr("over the limit of " + std::to_string(bytes.size() - 1)));
  EXPECT_THAT(test::ErrorOf([&] { ImportOnnxBuffer(bytes.data(), bytes.size(), small); }).what(),
              HasSubstr("(max_model_bytes)"));
  small.max_model_bytes = bytes.size();
  EXPECT_NO_THROW(ImportOnnxFile(file, small));
}

TEST_F(OnnxLimits, WeightsOverTheLimitAreRefusedBeforeTheyAreAllocated) {
  // 2^32 floats of external data in a sparse 16 GiB file: reading it would take 16 GiB.
  const int64_t n = int64_t{1} << 32;
  fs::path data = dir_ / "w.bin";
  { std::ofstream(data, std::ios::binary) << 'x'; }
  fs::resize_file(data, static_cast<uint64_t>(n) * 4);
  std::string file = Write("m.onnx", Bytes(External(n, "w.bin", 0)));
  OnnxImportOptions limited;
  limited.max_weight_bytes = uint64_t{1} << 30;
  Error e(ErrorCode::kInternal, "not run");
  EXPECT_LT(Seconds([&] { e = test::ErrorOf([&] { ImportOnnxFile(file, limited); }); }), 1.0);
  EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(e.what(), HasSubstr("initializer 'w': its 17179869184 bytes bring the model's "
                                  "weights over the limit of 1073741824 bytes (max_weight_bytes)"));

  // Inline weights count too, all of them together.
  onnx::ModelProto m = NewModel();
  AddInput(m, "x", {int64_t{300}});
  AddInit(m, "a", test::RandomTensor(DType::kFloat32, {300}, 2));
  AddInit(m, "b", test::RandomTensor(DType::kFloat32, {300}, 3));
  AddNode(m, "Add", {"x", "a"}, {"t"});
  AddNode(m, "Add", {"t", "b"}, {"y"});
  AddOutput(m, "y");
  std::string bytes = Bytes(m);
  limited.max_weight_bytes = 2 * 300 * 4 - 1;
  EXPECT_THAT(test::ErrorOf([&] { ImportOnnxBuffer(bytes.data(), bytes.size(), limited); }).what(),
              HasSubstr("initializer 'b'"));
  limited.max_weight_bytes = 2 * 300 * 4;
  EXPECT_NO_THROW(ImportOnnxBuffer(bytes.data(), bytes.size(), limited));
}

TEST_F(OnnxLimits, LargeExternalDataIsMappedAndReadsTheSameAsSmall) {
  // 100,000 floats (mapped: 64 KiB and more at an aligned offset) and the same at an odd offset
  // (read): both give the file's values.
  const int64_t n = 100000;
  std::vector<float> w(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) w[static_cast<size_t>(i)] = static_cast<float>(i % 977) * 0.5f;
  const std::string bytes(reinterpret_cast<const char*>(w.data()), w.size() * 4);
  Write("aligned.bin", std::string(4096, '\0') + bytes);
  Write("odd.bin", std::string(4096 + 3, '\0') + bytes);
  Tensor x = test::RandomTensor(DType::kFloat32, {n}, 4);
  for (auto [file, offset] :
       {std::pair<const char*, int64_t>{"aligned.bin", 4096}, {"odd.bin", 4096 + 3}}) {
    SCOPED_TRACE(file);
    std::string model = Write("m.onnx", Bytes(External(n, file, offset)));
    ImportedModel imported = ImportOnnxFile(model);
    std::vector<Tensor> y = Interpret(imported.graph, {x});
    ASSERT_EQ(y.size(), 1u);
    for (int64_t i = 0; i < n; i += 997)
      ASSERT_EQ(y[0].GetAsDouble(i),
                static_cast<float>(x.GetAsDouble(i)) + w[static_cast<size_t>(i)])
          << i;
  }
}

TEST_F(OnnxLimits, ContradictoryOutputsAreRefused) {
  // Declared INT64, computed f32.
  onnx::ModelProto m = NewModel();
  AddInput(m, "x", {int64_t{3}});
  AddNode(m, "Relu", {"x"}, {"y"});
  AddOutput(m, "y", onnx::TensorProto::INT64);
  Error e = ImportError(m);
  EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(e.what(),
              HasSubstr("graph output 'y' is declared INT64 but the graph computes f32 for it"));

  // Two outputs of one name.
  onnx::ModelProto twice = NewModel();
  AddInput(twice, "x", {int64_t{3}});
  AddNode(twice, "Relu", {"x"}, {"y"});
  AddOutput(twice, "y");
  AddOutput(twice, "y");
  EXPECT_THAT(ImportError(twice).what(), HasSubstr("two graph outputs are named 'y'"));

  // Two inputs of one name (the ONNX checker's finding).
  onnx::ModelProto inputs = NewModel();
  AddInput(inputs, "x", {int64_t{3}});
  AddInput(inputs, "x", {int64_t{3}});
  AddNode(inputs, "Relu", {"x"}, {"y"});
  AddOutput(inputs, "y");
  EXPECT_THAT(ImportError(inputs).what(),
              HasSubstr("'x' has been used as graph input names multiple times"));

  // An undeclared element type, and a second output of the right one, are fine.
  onnx::ModelProto ok = NewModel();
  AddInput(ok, "x", {int64_t{3}});
  AddNode(ok, "Relu", {"x"}, {"y"});
  AddNode(ok, "Shape", {"x"}, {"s"});
  AddOutput(ok, "y", onnx::TensorProto::UNDEFINED);
  AddOutput(ok, "s", onnx::TensorProto::INT64);
  EXPECT_NO_THROW(Import(ok));
}

}  // namespace
}  // namespace kiln
