#include <gtest/gtest.h>
#include <iostream>
#include "common/kernel_test_util.h"
#include "ir/loop/loop_text.h"
#include "passes/compile.h"
namespace kiln {
TEST(Explore, Lowering) {
  for (const char* op : {"softmax", "layer_norm"}) {
    std::vector<Tensor> in{test::RandomTensor(DType::kFloat32, {4, 16})};
    if (std::string(op) == "layer_norm") { in.push_back(test::RandomTensor(DType::kFloat32, {16})); }
    Function fn = test::SingleOpFunction(op, in, {}, false);
    LoweredKernel k = LowerToLoops(fn, op);
    loop::PrimFunc f = LowerReductions(k.func);
    std::cout << loop::Print(f) << "\n";
    std::cout << loop::Print(RunLoopPipeline(k.func)) << "\n";
  }
}
}
