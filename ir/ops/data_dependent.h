// What the data-dependent ops (ir/ops/data_dependent.cc) share with their bounded forms
// (ir/ops/bounded.cc): the attribute checks and relations both validate the same way, and the
// exact reference kernels the bounded forms' reference kernels place at the upper bound.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ir/op.h"

namespace kiln::ops {

// compress's and unique's axis attribute: [] (flatten the input) or [axis], normalized.
std::optional<int> CompressAxis(const TypeRelContext& ctx, int rank);
std::string CheckAtMostOne(const AttrValue& v);
// non_max_suppression's center_point_box: 0 or 1.
std::string CheckCenterPointBox(const AttrValue& v);
// non_max_suppression's relation: validates boxes, scores and the scalar inputs.
Type NmsRel(TypeRelContext& ctx);

// The exact reference kernels: they allocate their outputs (OpDef::data_dependent_shape).
void NonZeroKernel(const std::vector<Tensor>& in, const Attrs& attrs, std::vector<Tensor>& out);
void CompressKernel(const std::vector<Tensor>& in, const Attrs& attrs, std::vector<Tensor>& out);
void UniqueKernel(const std::vector<Tensor>& in, const Attrs& attrs, std::vector<Tensor>& out);
void NmsKernel(const std::vector<Tensor>& in, const Attrs& attrs, std::vector<Tensor>& out);

}  // namespace kiln::ops
