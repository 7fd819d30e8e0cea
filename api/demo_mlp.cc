// The main job for now: build a small MLP in code with a symbolic batch dimension, print the
// types kiln infers for it, then run it for batch 3 on the reference interpreter.
#include <cmath>
#include <cstdio>
#include <random>

#include "ir/error.h"
#include "ir/interpreter.h"
#include "ir/text.h"
#include "ir/type_infer.h"

namespace {

kiln::Tensor Weights(const std::vector<int64_t>& shape, uint64_t seed) {
  kiln::Tensor t = kiln::Tensor::Empty(kiln::DType::kFloat32, shape);
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.0f, 0.5f);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = dist(rng);
  return t;
}

}  // namespace

int main() {
  using namespace kiln;
  try {
    Dim batch = Dim::Symbol("batch");
    Var x = MakeVar("x", TensorType({batch, 4}, DType::kFloat32));
    Expr h = MakeCall("matmul", {x, MakeConstant(Weights({4, 16}, 1), "w1")}, {}, "fc1");
    h = MakeCall("add", {h, MakeConstant(Weights({16}, 2), "b1")}, {}, "fc1_bias");
    h = MakeCall("relu", {h}, {}, "act1");
    h = MakeCall("matmul", {h, MakeConstant(Weights({16, 10}, 3), "w2")}, {}, "fc2");
    h = MakeCall("add", {h, MakeConstant(Weights({10}, 4), "b2")}, {}, "fc2_bias");
    h = MakeCall("softmax", {h}, {{"axis", int64_t{-1}}}, "probs");
    Function mlp = InferTypes(MakeFunction({x}, h));

    // Weights go to a side table so the listing shows the graph, not the numbers.
    std::vector<Tensor> weights;
    PrintOptions opts;
    opts.max_inline_constant = 8;
    std::printf("MLP with a symbolic batch, as kiln infers it:\n\n%s\n",
                Print(IRModule({{"main", mlp}}), opts, &weights).c_str());
    std::printf("output type: %s\n\n", TypeToString(mlp->body->type).c_str());

    Tensor input = Weights({3, 4}, 5);
    std::vector<Tensor> out = Interpret(mlp, {input});
    std::printf("batch 3 on the reference interpreter -> %s\n", out[0].TypeString().c_str());
    for (int64_t r = 0; r < out[0].shape()[0]; ++r) {
      std::printf("  [");
      for (int64_t c = 0; c < out[0].shape()[1]; ++c)
        std::printf("%s%.4f", c ? ", " : "", out[0].data<float>()[r * out[0].shape()[1] + c]);
      std::printf("]\n");
    }
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "kiln-demo: %s\n", e.what());
    return 1;
  }
}
