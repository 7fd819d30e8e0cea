// A global operator new that counts, for tests that check a path allocates nothing on the heap.
// Include it from exactly one .cc of a test binary (it defines the replaceable allocation
// functions), then measure with CountAllocations.
#pragma once

#include <atomic>
#include <cstdlib>
#include <functional>
#include <new>

namespace kiln::test::detail {
inline std::atomic<bool> counting{false};
inline std::atomic<long> allocations{0};

inline void* Allocate(size_t n, size_t align = 0) {
  if (counting.load(std::memory_order_relaxed)) allocations.fetch_add(1, std::memory_order_relaxed);
  if (n == 0) n = 1;
  void* p = align ? std::aligned_alloc(align, (n + align - 1) / align * align) : std::malloc(n);
  if (!p) throw std::bad_alloc();
  return p;
}
}  // namespace kiln::test::detail

void* operator new(size_t n) {
  return kiln::test::detail::Allocate(n);
}
void* operator new[](size_t n) {
  return kiln::test::detail::Allocate(n);
}
void* operator new(size_t n, std::align_val_t a) {
  return kiln::test::detail::Allocate(n, static_cast<size_t>(a));
}
void* operator new[](size_t n, std::align_val_t a) {
  return kiln::test::detail::Allocate(n, static_cast<size_t>(a));
}
void* operator new(size_t n, const std::nothrow_t&) noexcept {
  try {
    return kiln::test::detail::Allocate(n);
  } catch (...) {
    return nullptr;
  }
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete[](void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, size_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, size_t) noexcept {
  std::free(p);
}
void operator delete(void* p, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete(void* p, size_t, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, size_t, std::align_val_t) noexcept {
  std::free(p);
}

namespace kiln::test {

// Heap allocations (operator new, any thread) while `fn` runs.
inline long CountAllocations(const std::function<void()>& fn) {
  detail::allocations = 0;
  detail::counting = true;
  fn();
  detail::counting = false;
  return detail::allocations.load();
}

}  // namespace kiln::test
