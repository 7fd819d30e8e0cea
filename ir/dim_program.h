// DimProgram: dims compiled to one flat program over numbered symbols, for evaluating the same
// dims again and again under new bindings (a shape-generic executable binds all its shapes on
// every new shape: engine/generic_bind.h).
//
// Why not Dim::TryEval per dim: it looks every symbol up by name in a std::map and follows the
// shared nodes of every dim, scattered over the heap. On the first request of a new shape those
// are cold, and the lookups cost far more than the arithmetic (a conv net's seven shapes: 13-15
// us cold for a few dozen dims). A program is one contiguous array of steps; symbols are read by
// slot.
//
// Implemented in ir/dim.cc, beside the canonical form it walks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ir/dim.h"

namespace kiln {

class DimProgram {
 public:
  DimProgram() = default;
  // `symbols`: slots given in advance (the caller's numbering); a symbol of `dims` not among
  // them gets the next slot.
  explicit DimProgram(const std::vector<Dim>& dims, std::vector<std::string> symbols = {});

  // The symbol of each slot, in the order Eval reads their values.
  const std::vector<std::string>& symbols() const { return symbols_; }
  // How many dims it computes (Eval writes that many).
  size_t size() const { return num_dims_; }
  // Every dim with symbols()[i] = values[i], into out[0 .. size()). False where TryEval of any
  // of them would be nullopt (a division by zero, an overflow); `out` is then unspecified.
  bool Eval(const int64_t* values, int64_t* out) const;

 private:
  enum class Op : uint8_t { kConst, kSymbol, kAdd, kMul, kFloorDiv, kMod, kMin, kMax, kStore };
  struct Step {
    Op op;
    int64_t arg;  // kConst: the value; kSymbol: the slot; kStore: the dim's index
  };
  void Emit(const Dim& d);
  int64_t Slot(const std::string& name);

  std::vector<Step> steps_;
  std::vector<std::string> symbols_;
  size_t num_dims_ = 0;
  size_t max_stack_ = 0;
  size_t depth_ = 0;  // while compiling: the stack depth after the steps so far
};

}  // namespace kiln
