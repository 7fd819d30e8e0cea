// Helpers the LLVM code generator's tests share (llvm_codegen_test.cc, llvm_codegen_loops_test.cc):
// hand-built PrimFuncs and calls of their compiled kernels.
#pragma once

#include <gmock/gmock.h>

#include <memory>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "ir/loop/loop.h"
#include "ir/tensor.h"
#include "jit/kernel.h"

namespace kiln::codegen_test {

using loop::Buffer;
using loop::Expr;
using loop::ForKind;
using loop::Stmt;
using loop::Var;

inline loop::PrimFunc MakeFunc(const std::string& name, std::vector<Buffer> buffers, int num_inputs,
                               std::vector<Var> scalars, Stmt body) {
  auto f = std::make_shared<loop::PrimFuncNode>();
  f->name = name;
  f->buffer_params = std::move(buffers);
  f->num_inputs = num_inputs;
  f->scalar_params = std::move(scalars);
  f->body = std::move(body);
  return f;
}

inline Buffer Buf(const std::string& name, DType t, std::vector<Expr> shape) {
  return loop::MakeBuffer(name, t, std::move(shape));
}

inline Expr I(int64_t v) {
  return loop::IntImm(v);
}

// out[i] = value(i) for i in [0, n): the shape of most tests.
inline Stmt Loop1D(const Var& i, const Expr& n, Stmt body, ForKind kind = ForKind::kSerial) {
  return loop::For(i, I(0), n, kind, std::move(body));
}

inline void Call(KernelFn fn, std::vector<void*> buffers, std::vector<int64_t> scalars = {}) {
  fn(buffers.data(), scalars.data());
}

// Bitwise equal, or both NaN.
inline ::testing::AssertionResult SameTensor(const Tensor& actual, const Tensor& expected) {
  return test::TensorsNear(actual, expected, 0, 0);
}

}  // namespace kiln::codegen_test
