// Target: parsing from short strings and JSON, canonical printing, defaults and every error.
#include "devices/target.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <unordered_set>
#include <vector>

#include "common/test_util.h"
#include "ir/error.h"

namespace kiln {
namespace {

using Strings = std::vector<std::string>;
using test::ErrorOf;

TEST(Target, Defaults) {
  Target llvm(TargetKind::kLLVM);
  EXPECT_EQ(llvm.GetString("mcpu"), "");
  EXPECT_EQ(llvm.GetStrings("mattr"), Strings{});
  EXPECT_EQ(llvm.GetInt("num_cores"), 0);
  Target cuda(TargetKind::kCUDA);
  EXPECT_EQ(cuda.GetString("arch"), "sm_90");
  EXPECT_EQ(cuda.GetInt("max_threads_per_block"), 1024);
  EXPECT_EQ(cuda.GetInt("shared_memory_per_block"), 49152);
  EXPECT_EQ(cuda.str(), "cuda");
  EXPECT_EQ(cuda.ToJSON(), R"({"kind":"cuda"})");
}

TEST(Target, HostIsPlainLLVM) {
  EXPECT_EQ(Target::Host(), Target(TargetKind::kLLVM));
  EXPECT_EQ(Target(), Target::Host());
  EXPECT_EQ(Target::Host().str(), "llvm");
  EXPECT_EQ(Target::Host().ToJSON(), R"({"kind":"llvm"})");
  EXPECT_EQ(Target::Parse("llvm"), Target::Host());
  EXPECT_EQ(DeviceTypeFor(Target::Host()), DeviceType::kCPU);
  EXPECT_EQ(DeviceTypeFor(Target(TargetKind::kCUDA)), DeviceType::kCUDA);
  EXPECT_EQ(TargetKindName(TargetKind::kCUDA), "cuda");
}

TEST(Target, ParsesShortStrings) {
  Target t = Target::Parse("llvm -mcpu=znver1 -mattr=+avx2,+fma");
  EXPECT_EQ(t.kind(), TargetKind::kLLVM);
  EXPECT_EQ(t.GetString("mcpu"), "znver1");
  EXPECT_EQ(t.GetStrings("mattr"), (Strings{"+avx2", "+fma"}));
  EXPECT_EQ(t.GetInt("num_cores"), 0);

  Target c = Target::Parse("cuda -arch=sm_80 -max_threads_per_block=512");
  EXPECT_EQ(c.GetString("arch"), "sm_80");
  EXPECT_EQ(c.GetInt("max_threads_per_block"), 512);
  EXPECT_EQ(c.GetInt("shared_memory_per_block"), 49152);
  EXPECT_EQ(DeviceTypeFor(c), DeviceType::kCUDA);
}

TEST(Target, PrintsCanonically) {
  // Attribute order, blanks and explicitly given defaults do not change the printed form.
  Target t = Target::Parse("  llvm\t-num_cores=4   -mattr=+avx2,+fma -mcpu=znver1 ");
  EXPECT_EQ(t.str(), "llvm -mcpu=znver1 -mattr=+avx2,+fma -num_cores=4");
  EXPECT_EQ(t, Target::Parse("llvm -mcpu=znver1 -mattr=+avx2,+fma -num_cores=4"));
  EXPECT_EQ(Target::Parse("cuda -arch=sm_90 -max_threads_per_block=512").str(),
            "cuda -max_threads_per_block=512");
  EXPECT_EQ(Target::Parse("llvm -mcpu= -mattr= -num_cores=0"), Target::Host());
  // The user's feature order is kept: it is what LLVM sees, so it is part of the target.
  Target swapped = Target::Parse("llvm -mattr=+fma,+avx2");
  EXPECT_EQ(swapped.str(), "llvm -mattr=+fma,+avx2");
  EXPECT_NE(swapped, Target::Parse("llvm -mattr=+avx2,+fma"));
  std::ostringstream os;
  os << t;
  EXPECT_EQ(os.str(), t.str());
}

TEST(Target, ParsesJSON) {
  Target t = Target::Parse(R"({"kind":"llvm","mcpu":"znver3","mattr":["+avx2"],"num_cores":4})");
  EXPECT_EQ(t, Target::Parse("llvm -mcpu=znver3 -mattr=+avx2 -num_cores=4"));
  EXPECT_EQ(t.ToJSON(), R"({"kind":"llvm","mcpu":"znver3","mattr":["+avx2"],"num_cores":4})");
  // Blanks, any key order, escapes, empty arrays and defaults.
  Target c = Target::FromJSON(
      " {\n \"shared_memory_per_block\" : 98304, \"arch\": \"\\u0073m_90a\", \"kind\": "
      "\"cuda\" } ");
  EXPECT_EQ(c.str(), "cuda -arch=sm_90a -shared_memory_per_block=98304");
  EXPECT_EQ(c.ToJSON(), R"({"kind":"cuda","arch":"sm_90a","shared_memory_per_block":98304})");
  EXPECT_EQ(Target::Parse(R"({"kind":"llvm","mattr":[],"num_cores":0})"), Target::Host());
}

TEST(Target, RoundTrips) {
  for (const char* text : {"llvm", "llvm -mcpu=znver1", "llvm -mattr=+avx2,+fma,-avx512f",
                           "llvm -mcpu=cortex-a72 -mattr=+neon -num_cores=16",
                           "llvm -mcpu=x86-64-v3 -num_cores=1", "cuda", "cuda -arch=sm_80",
                           "cuda -arch=sm_90a -max_threads_per_block=256 "
                           "-shared_memory_per_block=232448"}) {
    SCOPED_TRACE(text);
    Target t = Target::Parse(text);
    EXPECT_EQ(t.str(), text);
    EXPECT_EQ(Target::Parse(t.str()), t);
    EXPECT_EQ(Target::Parse(t.ToJSON()), t);
    EXPECT_EQ(Target::FromJSON(t.ToJSON()).ToJSON(), t.ToJSON());
    EXPECT_EQ(Target::Parse(t.ToJSON()).Hash(), t.Hash());
  }
}

TEST(Target, HashesWithEquality) {
  std::unordered_set<Target> set;
  set.insert(Target::Parse("llvm -mcpu=znver3"));
  set.insert(Target::Parse(R"({"kind":"llvm","mcpu":"znver3"})"));
  set.insert(Target::Parse("llvm"));
  set.insert(Target::Parse("cuda"));
  EXPECT_EQ(set.size(), 3u);
  EXPECT_NE(Target::Parse("llvm"), Target::Parse("cuda"));
}

TEST(Target, SetChecksNameTypeAndValue) {
  Target t = Target::Host();
  t.Set("num_cores", int64_t{8});
  t.Set("mattr", Strings{"+avx2"});
  EXPECT_EQ(t.str(), "llvm -mattr=+avx2 -num_cores=8");
  t.Set("num_cores", int64_t{0});  // back to the default: same as never set
  EXPECT_EQ(t, Target::Parse("llvm -mattr=+avx2"));
  EXPECT_EQ(std::string(ErrorOf([&] { t.Set("num_cores", std::string("8")); }).what()),
            "target attribute 'num_cores' of 'llvm' takes an integer, not a string (\"8\")");
  EXPECT_EQ(std::string(ErrorOf([&] { t.GetInt("mcpu"); }).what()),
            "target attribute 'mcpu' of 'llvm' is a string, not an integer");
  EXPECT_EQ(std::string(ErrorOf([&] { t.GetString("mattr"); }).what()),
            "target attribute 'mattr' of 'llvm' is a list of strings, not a string");
  EXPECT_EQ(std::string(ErrorOf([&] { t.GetStrings("num_cores"); }).what()),
            "target attribute 'num_cores' of 'llvm' is an integer, not a list of strings");
  Error e = ErrorOf([&] { t.GetString("arch"); });
  EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(std::string(e.what()),
            "target 'llvm' has no attribute 'arch' (valid: mcpu (a string), mattr (a list of "
            "strings), num_cores (an integer))");
}

struct BadTarget {
  const char* text;
  ErrorCode code;
  const char* message;
};

TEST(Target, ShortStringErrors) {
  const std::vector<BadTarget> cases = {
      {"", ErrorCode::kParseError,
       "empty target string: expected a kind (llvm, cuda) and -name=value attributes"},
      {"rocm -mcpu=gfx90a", ErrorCode::kInvalidArgument,
       "unknown target kind 'rocm' (valid kinds: llvm, cuda)"},
      {"llvm -arch=sm_90", ErrorCode::kInvalidArgument,
       "target 'llvm' has no attribute 'arch' (valid: mcpu (a string), mattr (a list of "
       "strings), num_cores (an integer))"},
      {"cuda -mcpu=znver3", ErrorCode::kInvalidArgument,
       "target 'cuda' has no attribute 'mcpu' (valid: arch (a string), max_threads_per_block "
       "(an integer), shared_memory_per_block (an integer))"},
      {"llvm mcpu=znver3", ErrorCode::kParseError,
       "target string 'llvm mcpu=znver3': expected -name=value, got 'mcpu=znver3'"},
      {"llvm -mcpu", ErrorCode::kParseError,
       "target string 'llvm -mcpu': expected -name=value, got '-mcpu'"},
      {"llvm -=3", ErrorCode::kParseError,
       "target string 'llvm -=3': expected -name=value, got '-=3'"},
      {"llvm -mcpu=zn ver3", ErrorCode::kParseError,
       "target string 'llvm -mcpu=zn ver3': expected -name=value, got 'ver3'"},
      {"llvm -num_cores=four", ErrorCode::kInvalidArgument,
       "target attribute 'num_cores' of 'llvm' takes an integer, got 'four'"},
      {"llvm -num_cores=4x", ErrorCode::kInvalidArgument,
       "target attribute 'num_cores' of 'llvm' takes an integer, got '4x'"},
      {"llvm -num_cores=", ErrorCode::kInvalidArgument,
       "target attribute 'num_cores' of 'llvm' takes an integer, got ''"},
      {"llvm -num_cores=99999999999999999999", ErrorCode::kInvalidArgument,
       "target attribute 'num_cores' of 'llvm' takes an integer, got '99999999999999999999'"},
      {"llvm -num_cores=-1", ErrorCode::kInvalidArgument,
       "target attribute 'num_cores' of 'llvm' must be an integer >= 0, got -1"},
      {"llvm -mcpu=a -mcpu=b", ErrorCode::kInvalidArgument,
       "target string 'llvm -mcpu=a -mcpu=b' gives attribute 'mcpu' twice"},
      {"llvm -mcpu=a,b", ErrorCode::kInvalidArgument,
       "target attribute 'mcpu' of 'llvm' must be a name of letters, digits and '_', '.', '-', "
       "'+', got \"a,b\""},
      {"llvm -mattr=avx2", ErrorCode::kInvalidArgument,
       "target attribute 'mattr' of 'llvm' must be features like +avx2 or -fma ('avx2' is not "
       "one), got [\"avx2\"]"},
      {"llvm -mattr=+avx2,,+fma", ErrorCode::kInvalidArgument,
       "target attribute 'mattr' of 'llvm' must be features like +avx2 or -fma ('' is not one), "
       "got [\"+avx2\",\"\",\"+fma\"]"},
      {"llvm -mattr=+avx2,-avx2", ErrorCode::kInvalidArgument,
       "target attribute 'mattr' of 'llvm' must be each feature once ('avx2' is given twice), "
       "got [\"+avx2\",\"-avx2\"]"},
      {"cuda -arch=90", ErrorCode::kInvalidArgument,
       "target attribute 'arch' of 'cuda' must be a GPU architecture like sm_90 or sm_90a, got "
       "\"90\""},
      {"cuda -arch=sm_", ErrorCode::kInvalidArgument,
       "target attribute 'arch' of 'cuda' must be a GPU architecture like sm_90 or sm_90a, got "
       "\"sm_\""},
      {"cuda -arch=sm_90ab", ErrorCode::kInvalidArgument,
       "target attribute 'arch' of 'cuda' must be a GPU architecture like sm_90 or sm_90a, got "
       "\"sm_90ab\""},
      {"cuda -max_threads_per_block=0", ErrorCode::kInvalidArgument,
       "target attribute 'max_threads_per_block' of 'cuda' must be an integer > 0, got 0"},
      {"cuda -shared_memory_per_block=-4", ErrorCode::kInvalidArgument,
       "target attribute 'shared_memory_per_block' of 'cuda' must be an integer > 0, got -4"},
  };
  for (const BadTarget& c : cases) {
    SCOPED_TRACE(c.text);
    Error e = ErrorOf([&] { Target::Parse(c.text); });
    EXPECT_EQ(e.code(), c.code);
    EXPECT_EQ(std::string(e.what()), c.message);
  }
}

TEST(Target, JSONErrors) {
  const std::vector<BadTarget> cases = {
      {"{", ErrorCode::kParseError,
       "target JSON: expected '\"', found the end of the text at position 1"},
      {"{}", ErrorCode::kInvalidArgument, "target JSON has no \"kind\" (valid kinds: llvm, cuda)"},
      {R"({"mcpu":"znver3"})", ErrorCode::kInvalidArgument,
       "target JSON has no \"kind\" (valid kinds: llvm, cuda)"},
      {R"({"kind":3})", ErrorCode::kInvalidArgument,
       "target JSON: \"kind\" must be a string, not an integer (valid kinds: llvm, cuda)"},
      {R"({"kind":"rocm"})", ErrorCode::kInvalidArgument,
       "unknown target kind 'rocm' (valid kinds: llvm, cuda)"},
      {R"({"kind":"llvm")", ErrorCode::kParseError,
       "target JSON: expected ',' or '}', found the end of the text at position 14"},
      {R"({"kind":"llvm"} x)", ErrorCode::kParseError,
       "target JSON: expected the end after the object, found 'x' at position 16"},
      {R"({"kind":"llvm","mcpu":})", ErrorCode::kParseError,
       "target JSON: expected a string, an integer or an array of strings, found '}' at "
       "position 22"},
      {R"({"kind":"llvm","mcpu":true})", ErrorCode::kParseError,
       "target JSON: expected a string, an integer or an array of strings, found 't' at "
       "position 22"},
      {R"({"kind":"llvm" "mcpu":"x"})", ErrorCode::kParseError,
       "target JSON: expected ',' or '}', found '\"' at position 15"},
      {R"({kind:"llvm"})", ErrorCode::kParseError,
       "target JSON: expected '\"', found 'k' at position 1"},
      {R"({"kind":"llvm","kind":"cuda"})", ErrorCode::kParseError,
       "target JSON: key \"kind\" is given twice at position 15"},
      {R"({"kind":"llvm","num_cores":1.5})", ErrorCode::kParseError,
       "target JSON: expected an integer (fractions and exponents are not supported) at "
       "position 27"},
      {R"({"kind":"llvm","num_cores":99999999999999999999})", ErrorCode::kParseError,
       "target JSON: integer out of range at position 27"},
      {R"({"kind":"llvm","num_cores":-})", ErrorCode::kParseError,
       "target JSON: expected an integer at position 27"},
      {R"({"kind":"llvm","mattr":["+avx2",1]})", ErrorCode::kParseError,
       "target JSON: expected a string in the array, found '1' at position 32"},
      {R"({"kind":"llvm","mattr":["+avx2"})", ErrorCode::kParseError,
       "target JSON: expected ',' or ']', found '}' at position 31"},
      {R"({"kind":"llvm","mcpu":"zn)", ErrorCode::kParseError,
       "target JSON: unterminated string at position 25"},
      {R"({"kind":"llvm","mcpu":"\q"})", ErrorCode::kParseError,
       "target JSON: unknown escape '\\q' at position 23"},
      {R"({"kind":"llvm","mcpu":"\u00zz"})", ErrorCode::kParseError,
       "target JSON: expected 4 hex digits after \\u at position 27"},
      {"{\"kind\":\"llvm\",\"mcpu\":\"a\nb\"}", ErrorCode::kParseError,
       "target JSON: control character in a string at position 24"},
      {R"({"kind":"llvm","bogus":1})", ErrorCode::kInvalidArgument,
       "target 'llvm' has no attribute 'bogus' (valid: mcpu (a string), mattr (a list of "
       "strings), num_cores (an integer))"},
      {R"({"kind":"llvm","num_cores":"4"})", ErrorCode::kInvalidArgument,
       "target attribute 'num_cores' of 'llvm' takes an integer, not a string (\"4\")"},
      {R"({"kind":"llvm","mattr":"+avx2"})", ErrorCode::kInvalidArgument,
       "target attribute 'mattr' of 'llvm' takes a list of strings, not a string (\"+avx2\")"},
      {R"({"kind":"cuda","arch":["sm_90"]})", ErrorCode::kInvalidArgument,
       "target attribute 'arch' of 'cuda' takes a string, not a list of strings ([\"sm_90\"])"},
      {R"({"kind":"llvm","mcpu":"zn ver3"})", ErrorCode::kInvalidArgument,
       "target attribute 'mcpu' of 'llvm' must be a name of letters, digits and '_', '.', '-', "
       "'+', got \"zn ver3\""},
  };
  for (const BadTarget& c : cases) {
    SCOPED_TRACE(c.text);
    Error e = ErrorOf([&] { Target::Parse(c.text); });
    EXPECT_EQ(e.code(), c.code);
    EXPECT_EQ(std::string(e.what()), c.message);
  }
}

}  // namespace
}  // namespace kiln
