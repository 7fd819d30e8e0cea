// The one exception type kiln throws internally. The C API turns it into a status code at
// the boundary; nothing else catches it except code that adds context and rethrows.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace kiln {

// Append-only: the C API maps these one to one onto its status enum.
enum class ErrorCode {
  kInvalidArgument = 1,
  kNotFound,
  kUnsupported,
  kTypeError,
  kCompileError,
  kOutOfMemory,
  kCancelled,
  kInternal,
  kParseError,
};

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, std::string message)
      : std::runtime_error(std::move(message)), code_(code) {}
  ErrorCode code() const { return code_; }

 private:
  ErrorCode code_;
};

namespace detail {
inline void StreamAll(std::ostringstream&) {}
template <typename T, typename... Rest>
void StreamAll(std::ostringstream& os, const T& first, const Rest&... rest) {
  os << first;
  StreamAll(os, rest...);
}
}  // namespace detail

// Builds a message from its parts with operator<<, so call sites read as one sentence.
template <typename... Parts>
std::string StrCat(const Parts&... parts) {
  std::ostringstream os;
  detail::StreamAll(os, parts...);
  return os.str();
}

template <typename... Parts>
[[noreturn]] void Throw(ErrorCode code, const Parts&... parts) {
  throw Error(code, StrCat(parts...));
}

}  // namespace kiln

// Internal invariant check: a failure is a kiln bug, reported as kInternal (never abort()).
#define KILN_CHECK(cond, ...)                                                                  \
  do {                                                                                         \
    if (!(cond))                                                                               \
      ::kiln::Throw(::kiln::ErrorCode::kInternal, __FILE__, ":", __LINE__, ": check '", #cond, \
                    "' failed. " __VA_OPT__(, ) __VA_ARGS__);                                  \
  } while (0)
