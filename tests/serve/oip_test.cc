// The Open Inference Protocol codec of `kiln serve` (api/serve/oip.h): requests decoded into
// kiln's layout exactly (nested or flat JSON, binary data in order, f16/bf16 rounded to nearest
// even, integer ranges), every malformed request refused with a message naming the fault, and
// responses encoded exactly (JSON and binary).
#include "api/serve/oip.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

namespace kiln::serve {
namespace {

template <typename T>
std::vector<T> Values(const InputTensor& t) {
  std::vector<T> v(t.nbytes / sizeof(T));
  std::memcpy(v.data(), t.data.get(), t.nbytes);
  return v;
}

std::string Error(std::string_view body, std::optional<size_t> header = std::nullopt,
                  Limits limits = {}) {
  try {
    ParseInferRequest(body, header, limits);
  } catch (const HttpError& e) {
    EXPECT_EQ(e.status, 400);
    return e.message;
  }
  return "(no error)";
}

TEST(OipRequest, NestedAndFlatDataAreRowMajor) {
  InferRequest a = ParseInferRequest(
      R"({"id":"r","inputs":[{"name":"x","shape":[2,3],"datatype":"FP32","data":[[1,2,3],[4,5.5,6]]}]})",
      std::nullopt, {});
  InferRequest b = ParseInferRequest(
      R"({"inputs":[{"name":"x","shape":[2,3],"datatype":"FP32","data":[1,2,3,4,5.5,6]}]})",
      std::nullopt, {});
  EXPECT_EQ(a.id, "r");
  ASSERT_EQ(a.inputs.size(), 1u);
  EXPECT_EQ(a.inputs[0].shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(Values<float>(a.inputs[0]), (std::vector<float>{1, 2, 3, 4, 5.5f, 6}));
  EXPECT_EQ(Values<float>(a.inputs[0]), Values<float>(b.inputs[0]));
  EXPECT_TRUE(a.outputs.empty());
}

TEST(OipRequest, IntegersAreExactAndRangeChecked) {
  InferRequest r = ParseInferRequest(
      R"({"inputs":[{"name":"i","shape":[3],"datatype":"INT64","data":[9007199254740993,-9223372036854775808,9223372036854775807]},
                    {"name":"u","shape":[2],"datatype":"UINT64","data":[18446744073709551615,0]},
                    {"name":"b","shape":[2],"datatype":"BOOL","data":[true,false]},
                    {"name":"s","shape":[2],"datatype":"INT8","data":[-128,127]}]})",
      std::nullopt, {});
  EXPECT_EQ(Values<int64_t>(r.inputs[0]),
            (std::vector<int64_t>{9007199254740993, std::numeric_limits<int64_t>::min(),
                                  std::numeric_limits<int64_t>::max()}));
  EXPECT_EQ(Values<uint64_t>(r.inputs[1]),
            (std::vector<uint64_t>{std::numeric_limits<uint64_t>::max(), 0}));
  EXPECT_EQ(Values<uint8_t>(r.inputs[2]), (std::vector<uint8_t>{1, 0}));
  EXPECT_EQ(Values<int8_t>(r.inputs[3]), (std::vector<int8_t>{-128, 127}));

  EXPECT_EQ(Error(R"({"inputs":[{"name":"s","shape":[1],"datatype":"INT8","data":[128]}]})"),
            "input 's': element 0 (128) is not a INT8 value");
  EXPECT_EQ(Error(R"({"inputs":[{"name":"u","shape":[2],"datatype":"UINT16","data":[1,-1]}]})"),
            "input 'u': element 1 (-1) is not a UINT16 value");
  EXPECT_EQ(Error(R"({"inputs":[{"name":"i","shape":[1],"datatype":"INT32","data":[1.5]}]})"),
            "input 'i': element 0 (1.5) is not a INT32 value");
  EXPECT_EQ(Error(R"({"inputs":[{"name":"b","shape":[1],"datatype":"BOOL","data":[1]}]})"),
            "input 'b': element 0 (1) is not a BOOL value");
}

TEST(OipRequest, HalfAndBfloat16RoundToNearestEven) {
  InferRequest r = ParseInferRequest(
      R"({"inputs":[{"name":"h","shape":[7],"datatype":"FP16","data":[1.0,65504,65520,1e-8,0.1,-2.0,5.960464477539063e-8]},
                    {"name":"b","shape":[3],"datatype":"BF16","data":[1.0,0.1,-3.0]}]})",
      std::nullopt, {});
  // 65520 rounds up to infinity; 1e-8 is under half the smallest subnormal (2^-24).
  EXPECT_EQ(Values<uint16_t>(r.inputs[0]),
            (std::vector<uint16_t>{0x3c00, 0x7bff, 0x7c00, 0x0000, 0x2e66, 0xc000, 0x0001}));
  EXPECT_EQ(Values<uint16_t>(r.inputs[1]), (std::vector<uint16_t>{0x3f80, 0x3dcd, 0xc040}));
}

TEST(OipRequest, BinaryDataIsTakenInInputOrder) {
  std::string header =
      R"({"inputs":[{"name":"a","shape":[2],"datatype":"INT32","parameters":{"binary_data_size":8}},
                    {"name":"j","shape":[1],"datatype":"FP64","data":[2.5]},
                    {"name":"c","shape":[3],"datatype":"UINT8","parameters":{"binary_data_size":3}}],
          "outputs":[{"name":"y","parameters":{"binary_data":true}},{"name":"z"}]})";
  int32_t a[2] = {-7, 123456};
  std::string body = header;
  body.append(reinterpret_cast<const char*>(a), sizeof a);
  body += "\x01\x02\xff";
  InferRequest r = ParseInferRequest(body, header.size(), {});
  ASSERT_EQ(r.inputs.size(), 3u);
  EXPECT_EQ(Values<int32_t>(r.inputs[0]), (std::vector<int32_t>{-7, 123456}));
  EXPECT_EQ(Values<double>(r.inputs[1]), (std::vector<double>{2.5}));
  EXPECT_EQ(Values<uint8_t>(r.inputs[2]), (std::vector<uint8_t>{1, 2, 255}));
  ASSERT_EQ(r.outputs.size(), 2u);
  EXPECT_TRUE(r.outputs[0].binary);
  EXPECT_FALSE(r.outputs[1].binary);

  EXPECT_EQ(Error(body + "x", header.size()), "the binary data has 12 bytes; the inputs use 11");
  EXPECT_EQ(Error(body.substr(0, body.size() - 1), header.size()),
            "input 'c': the binary data ends before its 3 bytes");
  EXPECT_EQ(Error(body, body.size() + 1),
            "Inference-Header-Content-Length is " + std::to_string(body.size() + 1) +
                ", past the body's " + std::to_string(body.size()) + " bytes");
  EXPECT_EQ(Error(header),
            "input 'a': binary_data_size is set, but the request has no "
            "Inference-Header-Content-Length header");
}

TEST(OipRequest, MalformedRequestsNameTheFault) {
  EXPECT_EQ(Error("{}"), "the request has no \"inputs\" array");
  EXPECT_EQ(Error(R"({"inputs":[1]})"), "inputs[0] must be an object");
  EXPECT_EQ(Error(R"({"inputs":[{"shape":[1]}]})"), "inputs[0] has no \"name\" string");
  EXPECT_EQ(Error(R"({"id":5,"inputs":[]})"), "\"id\" must be a string");
  EXPECT_EQ(Error(R"({"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":[1]},
                              {"name":"x","shape":[1],"datatype":"FP32","data":[1]}]})"),
            "input 'x' is given twice");
  EXPECT_EQ(Error(R"({"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":[1,2]}]})"),
            "input 'x': \"data\" has more than the shape's 1 elements");
  EXPECT_EQ(Error(R"({"inputs":[{"name":"x","shape":[2],"datatype":"FP32","data":1}]})"),
            "input 'x': \"data\" must be an array");
  EXPECT_EQ(Error(R"({"inputs":[{"name":"x","shape":[2],"datatype":"FP32"}]})"),
            "input 'x' has no \"data\" (nor a binary_data_size parameter)");
  EXPECT_EQ(Error(R"({"inputs":[{"name":"x","shape":[2.5],"datatype":"FP32","data":[]}]})"),
            "input 'x': shape [2.5] must hold integers >= 0");
  EXPECT_EQ(Error(R"({"inputs":[{"name":"x","shape":[1000,1000],"datatype":"FP32","data":[]}]})",
                  std::nullopt, Limits{999999}),
            "input 'x': shape [1000,1000] has more than the limit of 999999 elements");
  EXPECT_EQ(
      Error(
          R"({"inputs":[{"name":"x","shape":[4294967296,4294967296,4294967296],"datatype":"FP32","data":[]}]})"),
      "input 'x': shape [4294967296,4294967296,4294967296] has more than the limit of 268435456 "
      "elements");
  // A small request asking for a large tensor is refused before any memory is taken.
  EXPECT_EQ(Error(R"({"inputs":[{"name":"x","shape":[100000000],"datatype":"FP64","data":[1]}]})"),
            "input 'x': \"data\" cannot hold the shape's 100000000 elements in a 74-byte request");
  EXPECT_EQ(Error(R"({"inputs":[],"outputs":[{"name":"y"},{"name":"y"}]})"),
            "output 'y' is asked for twice");
  EXPECT_EQ(Error(R"({"inputs":[],"parameters":{"binary_data_output":1}})"),
            "the request: parameters.binary_data_output must be true or false");
  EXPECT_NE(Error("{\"inputs\":[").find("the request is not valid JSON"), std::string::npos);
  // Deep nesting is walked without recursion.
  std::string deep = R"({"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":)" +
                     std::string(200000, '[') + "1" + std::string(200000, ']') + "}]}";
  EXPECT_EQ(ParseInferRequest(deep, std::nullopt, {}).inputs[0].nbytes, 4u);
  // Deep nesting where a message would show the value is named, not printed (printing
  // recurses): in a shape, as an element, as binary_data_size.
  const std::string nest = std::string(200000, '[') + std::string(200000, ']');
  EXPECT_EQ(Error(R"({"inputs":[{"name":"x","datatype":"FP32","shape":)" + nest + "}]}"),
            "input 'x': shape (not a list of numbers) must hold integers >= 0");
  EXPECT_EQ(Error(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":[{"a":)" + nest +
                  "}]}]}"),
            "input 'x': element 0 (an object) is not a FP32 value");
  const std::string sized =
      R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1],"parameters":{"binary_data_size":)" +
      nest + "}}]}";
  EXPECT_EQ(Error(sized, sized.size()),
            "input 'x': binary_data_size is an array, the shape and datatype make 4 bytes");
  // Past f32's range a value becomes an infinity (the conversion would be undefined).
  InferRequest big = ParseInferRequest(
      R"({"inputs":[{"name":"x","shape":[2],"datatype":"FP32","data":[1e300,-1e300]}]})",
      std::nullopt, {});
  EXPECT_EQ(Values<float>(big.inputs[0]), (std::vector<float>{INFINITY, -INFINITY}));
}

TEST(OipResponse, JsonIsExactAndBinaryFollowsTheHeader) {
  float f[3] = {1.5f, std::nanf(""), -0.1f};
  int64_t i[2] = {9007199254740993, -1};
  uint8_t b[2] = {1, 0};
  std::vector<OutputView> outs = {
      {"f", KILN_F32, {3}, f, sizeof f, nullptr},
      {"i", KILN_I64, {1, 2}, i, sizeof i, nullptr},
      {"b", KILN_BOOL, {2}, b, sizeof b, nullptr},
  };
  Response json = EncodeInferResponse("m", "id7", outs, {false, false, false});
  EXPECT_FALSE(json.header_length);
  EXPECT_EQ(json.body,
            R"({"model_name":"m","model_version":"1","id":"id7","outputs":[)"
            R"({"name":"f","datatype":"FP32","shape":[3],"data":[1.5,null,-0.100000001]},)"
            R"({"name":"i","datatype":"INT64","shape":[1,2],"data":[9007199254740993,-1]},)"
            R"({"name":"b","datatype":"BOOL","shape":[2],"data":[true,false]}]})");

  Response bin = EncodeInferResponse("m", "", outs, {true, false, true});
  ASSERT_TRUE(bin.header_length);
  std::string header = bin.body.substr(0, *bin.header_length);
  EXPECT_NE(header.find(
                R"("name":"f","datatype":"FP32","shape":[3],"parameters":{"binary_data_size":12})"),
            std::string::npos);
  EXPECT_EQ(header.find("\"id\""), std::string::npos);
  ASSERT_EQ(bin.body.size(), *bin.header_length + sizeof f + sizeof b);
  EXPECT_EQ(std::memcmp(bin.body.data() + *bin.header_length, f, sizeof f), 0);
  EXPECT_EQ(std::memcmp(bin.body.data() + *bin.header_length + sizeof f, b, sizeof b), 0);
}

TEST(OipDatatypes, EveryKilnDtypeHasAProtocolNameBothWays) {
  for (int d = KILN_F32; d <= KILN_U64; ++d) {
    const char* name = OipDatatype(static_cast<kiln_dtype>(d));
    ASSERT_NE(name, nullptr) << d;
    kiln_dtype back = KILN_F32;
    EXPECT_TRUE(DtypeFromOip(name, &back));
    EXPECT_EQ(back, d);
  }
  kiln_dtype out;
  EXPECT_FALSE(DtypeFromOip("BYTES", &out));
}

}  // namespace
}  // namespace kiln::serve
