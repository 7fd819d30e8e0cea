// Target: what code is generated for, as a kind plus typed attributes with defaults. Code
// generators read the Target, never the device, so code can be compiled on a machine that does
// not have the device. A Target is a value: copyable, comparable, hashable, and printed
// canonically, so it can be part of a kernel cache key.
//
//   Target::Parse("llvm -mcpu=znver3 -mattr=+avx2,+fma")
//   Target::Parse("cuda -arch=sm_90 -max_threads_per_block=512")
//   Target::Parse(R"({"kind":"llvm","mcpu":"znver3","mattr":["+avx2"],"num_cores":4})")
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "devices/device_api.h"

namespace kiln {

// The target kinds, once. X(enum, name, the DeviceType its code runs on).
#define KILN_TARGET_KINDS(X) \
  X(kLLVM, "llvm", kCPU)     \
  X(kCUDA, "cuda", kCUDA)

enum class TargetKind {
#define KILN_X(e, n, d) e,
  KILN_TARGET_KINDS(KILN_X)
#undef KILN_X
};

std::string_view TargetKindName(TargetKind kind);  // "llvm", "cuda"

// Every attribute of every kind, once, in canonical (printing) order per kind.
// X(kind, name, value type, default, check): the check is a function in target.cc that returns
// "" for a valid value and otherwise says what a valid one looks like.
#define KILN_TARGET_ATTRS(X)                                                            \
  /* The LLVM CPU name (-mcpu); "" is the host CPU. */                                  \
  X(kLLVM, mcpu, String, "", CheckName)                                                 \
  /* Features added to or removed from mcpu's, in the user's order: "+avx2", "-fma". */ \
  X(kLLVM, mattr, Strings, {}, CheckFeatures)                                           \
  /* Threads a kernel may use; 0 is every core. */                                      \
  X(kLLVM, num_cores, Int, 0, CheckNonNegative)                                         \
  /* The GPU architecture NVRTC compiles for. */                                        \
  X(kCUDA, arch, String, "sm_90", CheckArch)                                            \
  X(kCUDA, max_threads_per_block, Int, 1024, CheckPositive)                             \
  /* Bytes of shared memory a block may use without opting in to more. */               \
  X(kCUDA, shared_memory_per_block, Int, 49152, CheckPositive)

// The value types of attributes; the alternatives of TargetAttrValue, in order.
enum class TargetAttrType { kInt, kString, kStrings };
using TargetAttrValue = std::variant<int64_t, std::string, std::vector<std::string>>;

class Target {
 public:
  // The host: Target() == Target::Host().
  Target() : Target(TargetKind::kLLVM) {}
  // A target of `kind` with every attribute at its default.
  explicit Target(TargetKind kind);
  // `llvm` with no attributes: the host CPU, all its features, all its cores.
  static Target Host();

  // A short string ("llvm -mcpu=znver3") or, when the text starts with '{', a JSON object.
  // Syntax errors are kParseError naming the position; an unknown kind or attribute, or a value
  // of the wrong type or out of range, is kInvalidArgument naming it and listing what is valid.
  static Target Parse(std::string_view text);
  // `kind -name=value ...`, separated by blanks; a list value is comma-separated; a name given
  // twice is an error.
  static Target FromString(std::string_view text);
  // A flat object: "kind" and attributes, whose values are strings, integers or arrays of
  // strings. Unknown keys are errors, not ignored, so a misspelt attribute is never lost.
  static Target FromJSON(std::string_view json);

  TargetKind kind() const { return kind_; }

  // Typed reads. An attribute `kind` does not have, or one of another type, is
  // kInvalidArgument naming it and listing the valid ones (with their types).
  int64_t GetInt(std::string_view name) const;
  const std::string& GetString(std::string_view name) const;
  const std::vector<std::string>& GetStrings(std::string_view name) const;
  // Checks the name, the type and the value as the parsers do; setting the default value is
  // the same as never setting it.
  void Set(std::string_view name, TargetAttrValue value);

  // Canonical forms: the kind, then the attributes that differ from their defaults, in the
  // order of KILN_TARGET_ATTRS. Parse(t.str()) == t and Parse(t.ToJSON()) == t, and equal
  // targets print identically.
  std::string str() const;     // llvm -mcpu=znver3 -mattr=+avx2,+fma
  std::string ToJSON() const;  // {"kind":"llvm","mcpu":"znver3","mattr":["+avx2","+fma"]}

  bool operator==(const Target& other) const = default;
  size_t Hash() const;

 private:
  TargetKind kind_;
  // One value per attribute of kind_, in KILN_TARGET_ATTRS order; defaults included, so
  // equality is plain comparison.
  std::vector<TargetAttrValue> values_;
};

std::ostream& operator<<(std::ostream& os, const Target& target);

// The device kind whose code `target` describes: llvm -> cpu, cuda -> cuda.
DeviceType DeviceTypeFor(const Target& target);

}  // namespace kiln

template <>
struct std::hash<kiln::Target> {
  size_t operator()(const kiln::Target& t) const { return t.Hash(); }
};
