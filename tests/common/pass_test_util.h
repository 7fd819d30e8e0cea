// Golden-test helpers for passes: text in, text out.
#pragma once

#include <memory>
#include <string>

#include "common/test_util.h"
#include "ir/structural.h"
#include "ir/text.h"
#include "ir/type_infer.h"
#include "passes/pass.h"

namespace kiln::test {

// Parses `input`, infers types, runs `pipeline` (a pipeline string, e.g. "FoldConstant") under a
// context with `opt_level` and immutability checking on, and prints the result.
inline std::string RunPasses(const std::string& pipeline, const std::string& input,
                             int opt_level = 3) {
  IRModule m = InferTypes(ParseModule(input));
  auto ctx = std::make_shared<PassContext>();
  ctx->opt_level = opt_level;
  ctx->SetConfig("testing.check_immutable", true);
  PassContextScope scope(ctx);
  IRModule out = (*ParsePipeline(pipeline))(m);
  return Print(out);
}

// Expects that running `pipeline` on `input` gives `expected` (both are parsed, typed and
// printed first, so they may be written without types and with any counter names (`%0`);
// named bindings are source names and must match).
inline void ExpectPassOutput(const std::string& pipeline, const std::string& input,
                             const std::string& expected, int opt_level = 3) {
  std::string got = RunPasses(pipeline, input, opt_level);
  std::string want = Print(InferTypes(ParseModule(expected)));
  EXPECT_EQ(got, want) << "pipeline: " << pipeline << "\ninput:\n" << input;
}

}  // namespace kiln::test
