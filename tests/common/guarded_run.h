// Kernels run on inputs copied right against an inaccessible page (after their end, or before
// their start), so that a read out of bounds faults instead of passing unseen: for lowerings
// whose every element reads clamped indices (concat's selects, gather's loaded indices, a padded
// copy of an input that may be empty).
#pragma once

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/kernel_test_util.h"

namespace kiln::test {

// A copy of a tensor's data next to a guard page. An empty tensor gets room for one element:
// buffers of empty tensors still have some storage (Tensor::Empty allocates 64 bytes), and the
// lowerings read at most the first element of one.
class GuardedCopy {
 public:
  enum Side { kGuardAfter, kGuardBefore };
  GuardedCopy(const Tensor& t, Side side) {
    const size_t bytes = static_cast<size_t>(t.numel() * DTypeSize(t.dtype()));
    const size_t storage = std::max<size_t>(bytes, DTypeSize(t.dtype()));
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    size_ = (storage + page - 1) / page * page + page;
    void* p = mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    EXPECT_NE(p, MAP_FAILED);
    base_ = static_cast<char*>(p);
    if (side == kGuardAfter) {
      EXPECT_EQ(mprotect(base_ + size_ - page, page, PROT_NONE), 0);
      data_ = base_ + size_ - page - storage;
    } else {
      EXPECT_EQ(mprotect(base_, page, PROT_NONE), 0);
      data_ = base_ + page;
    }
    if (bytes > 0) std::memcpy(data_, t.raw_data(), bytes);
  }
  GuardedCopy(const GuardedCopy&) = delete;
  GuardedCopy& operator=(const GuardedCopy&) = delete;
  ~GuardedCopy() { munmap(base_, size_); }
  void* data() const { return data_; }

 private:
  char* base_ = nullptr;
  size_t size_ = 0;
  char* data_ = nullptr;
};

// Like test::RunCompiled, with every input in guarded memory.
inline std::vector<Tensor> RunGuarded(const Function& fn, const std::vector<Tensor>& inputs,
                                      GuardedCopy::Side side) {
  std::vector<Type> types;
  for (const Tensor& t : inputs) types.push_back(TypeOfTensor(t));
  std::map<std::string, int64_t> symbols = BindInputShapes(fn, types);
  Function concrete = BindSymbols(fn, symbols);
  CompiledKernel k = CompileKernel(fn, "guarded", TestCodegen());
  std::vector<std::unique_ptr<GuardedCopy>> copies;
  std::vector<void*> buffers;
  for (const Tensor& t : inputs) {
    copies.push_back(std::make_unique<GuardedCopy>(t, side));
    buffers.push_back(copies.back()->data());
  }
  for (const Tensor& t : k.lowered.constants) buffers.push_back(t.raw_data());
  std::vector<Type> out_types = {concrete->body->type};
  if (const TupleTypeNode* tup = AsTuple(concrete->body->type)) out_types = tup->fields;
  std::vector<Tensor> outputs;
  for (const Type& t : out_types) {
    const TensorTypeNode* tt = AsTensor(t);
    outputs.push_back(Tensor::Empty(tt->dtype, ConstShape(tt->shape)));
    buffers.push_back(outputs.back().raw_data());
  }
  std::vector<int64_t> scalars;
  for (const std::string& name : k.lowered.symbols) scalars.push_back(symbols.at(name));
  k.entry->cpu(buffers.data(), scalars.data());
  return outputs;
}

// A single call of `op` on parameters of the given (possibly symbolic) shapes.
inline Function OpFunction(const std::string& op, const std::vector<Shape>& shapes,
                           const std::vector<DType>& dtypes, const Attrs& attrs) {
  std::vector<Var> params;
  std::vector<Expr> args;
  for (size_t i = 0; i < shapes.size(); ++i) {
    params.push_back(MakeVar(StrCat("x", i), TensorType(shapes[i], dtypes[i])));
    args.push_back(params.back());
  }
  return InferTypes(
      MakeFunction(params, MakeCall(op, args, attrs), nullptr, Attrs{{"primitive", true}}));
}

// Runs `fn` on guarded inputs, guards on either side, and compares with the reference (exactly
// unless tolerances are given).
inline ::testing::AssertionResult GuardedMatchesReference(const std::string& op, const Function& fn,
                                                          const std::vector<Tensor>& inputs,
                                                          const Attrs& attrs, double atol = 0,
                                                          double rtol = 0) {
  std::vector<Tensor> want = RunOpReference(op, inputs, attrs);
  for (GuardedCopy::Side side : {GuardedCopy::kGuardAfter, GuardedCopy::kGuardBefore}) {
    std::vector<Tensor> got = RunGuarded(fn, inputs, side);
    for (size_t i = 0; i < want.size(); ++i) {
      ::testing::AssertionResult r = TensorsNear(got.at(i), want[i], atol, rtol);
      if (!r) return r << " (output " << i << ")";
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace kiln::test
