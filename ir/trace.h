// Traces in the Chrome / Perfetto JSON trace format ("Trace Event Format": complete events,
// `"ph": "X"`, with microsecond timestamps), for `kiln run --trace` and EngineOptions::trace:
// what a compile did (its phases and every pass), and every run and kernel launch, per thread.
//
// A Tracer collects events; code records into the tracer current on its thread (TracerScope
// sets it), through TraceSpan, which costs one thread-local load where no tracer is current.
// Spans on one thread nest by time, as the viewers draw them.
// Threading: a Tracer is thread-safe; the current tracer is per thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

class Tracer {
 public:
  using Clock = std::chrono::steady_clock;
  // At most `max_events` are kept (later ones are counted as dropped), so a long traced run
  // has bounded memory: an event is 100 to 300 bytes, so about 50 MB at the default.
  explicit Tracer(size_t max_events = size_t{1} << 18);

  // One complete event. `args_json` is a JSON object's members without braces
  // (`"shape": "f32[3, 8]"`), or empty. `tid` is the thread it is drawn on (ThreadId()).
  void Complete(std::string_view name, const char* category, Clock::time_point start,
                Clock::time_point end, std::string args_json = "", int tid = ThreadId());

  // The trace: {"traceEvents": [...], "displayTimeUnit": "ms", "otherData": {...}}, the events
  // ordered by start time, an enclosing event before the ones it contains, and a thread-name
  // event per thread. Timestamps count from the tracer's creation.
  std::string Json() const;
  size_t size() const;
  size_t dropped() const;

  // This thread's small id in traces (1, 2, ... in order of first use in the process).
  static int ThreadId();

 private:
  struct Event {
    std::string name, args;
    const char* category;
    int64_t start_ns, dur_ns;
    int tid;
  };
  const Clock::time_point epoch_;
  const size_t max_events_;
  mutable std::mutex mu_;
  std::vector<Event> events_;  // guarded by mu_
  size_t dropped_ = 0;         // guarded by mu_
};

// The tracer current on this thread (null: none, and spans record nothing).
Tracer* CurrentTracer();

// Makes `tracer` (may be null) current on this thread until destroyed.
class TracerScope {
 public:
  explicit TracerScope(Tracer* tracer);
  ~TracerScope();
  TracerScope(const TracerScope&) = delete;
  TracerScope& operator=(const TracerScope&) = delete;

 private:
  Tracer* previous_;
};

// A complete event from construction to destruction in the current tracer, if any. The name
// is copied only when a tracer is current.
class TraceSpan {
 public:
  TraceSpan(const char* category, std::string_view name);
  ~TraceSpan();
  TraceSpan(const TraceSpan&) = delete;
  TraceSpan& operator=(const TraceSpan&) = delete;
  bool active() const { return tracer_ != nullptr; }
  // Sets the event's arguments (a JSON object's members); call only when active().
  void SetArgs(std::string args_json) { args_ = std::move(args_json); }

 private:
  Tracer* tracer_;
  const char* category_;
  std::string name_, args_;
  Tracer::Clock::time_point start_;
};

// `s` as a JSON string literal, quotes included.
std::string JsonQuote(std::string_view s);

}  // namespace kiln
