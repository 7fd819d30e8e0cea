#include "passes/graph/derived_constant.h"

#include <map>
#include <memory>
#include <mutex>
#include <utility>

namespace kiln {

Expr DerivedConstant(const Expr& src, const std::string& variant,
                     const std::function<Tensor()>& make) {
  // The derived node lives as long as a graph holds it, its buffer as long as an executable
  // does (Executable::constants): the background compile of a shape starts after the graphs
  // of the earlier ones are gone, and without the buffer's entry it packed one more copy of
  // the weights per shape (2.7 MB for the MLP), which also left the shape-generic kernels and
  // each specialization reading weights from different memory, cold in the caches.
  struct Entry {
    std::weak_ptr<const ExprNode> src, derived;
    std::weak_ptr<void> storage;
    Tensor shape_of;  // dtype, shape and data pointer of the buffer; holds no storage
  };
  static std::mutex mu;
  static std::map<std::pair<const ExprNode*, std::string>, Entry> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto key = std::make_pair(src.get(), variant);
  if (auto it = cache.find(key); it != cache.end() && it->second.src.lock() == src) {
    if (Expr hit = it->second.derived.lock()) return hit;
    if (std::shared_ptr<void> storage = it->second.storage.lock()) {
      const Tensor& t = it->second.shape_of;
      Expr out = MakeConstant(Tensor::Wrap(t.dtype(), t.shape(), t.raw_data(), storage));
      it->second.derived = out;
      return out;
    }
  }
  std::erase_if(cache, [](const auto& e) {
    return e.second.derived.expired() && e.second.storage.expired();
  });
  Tensor value = make();
  Entry entry{src,
              {},
              value.weak_owner(),
              Tensor::Wrap(value.dtype(), value.shape(), value.raw_data(), nullptr)};
  Expr out = MakeConstant(std::move(value));
  entry.derived = out;
  cache[std::move(key)] = std::move(entry);
  return out;
}

}  // namespace kiln
