// The trace recorder (trace.h).
#include "ir/trace.h"

#include <algorithm>
#include <atomic>
#include <cstdio>

namespace kiln {
namespace {

thread_local Tracer* tls_tracer = nullptr;

int64_t Nanos(Tracer::Clock::duration d) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(d).count();
}

// Microseconds with nanosecond digits, as the format's `ts` and `dur` are.
void AppendMicros(std::string& out, int64_t ns) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%lld.%03lld", static_cast<long long>(ns / 1000),
                static_cast<long long>(ns % 1000));
  out += buf;
}

}  // namespace

std::string JsonQuote(std::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

Tracer::Tracer(size_t max_events) : epoch_(Clock::now()), max_events_(max_events) {}

int Tracer::ThreadId() {
  static std::atomic<int> next{1};
  thread_local const int id = next.fetch_add(1, std::memory_order_relaxed);
  return id;
}

void Tracer::Complete(std::string_view name, const char* category, Clock::time_point start,
                      Clock::time_point end, std::string args_json, int tid) {
  Event e{std::string(name),
          std::move(args_json),
          category,
          Nanos(start - epoch_),
          std::max<int64_t>(0, Nanos(end - start)),
          tid};
  std::lock_guard<std::mutex> lock(mu_);
  if (events_.size() >= max_events_) {
    ++dropped_;
    return;
  }
  events_.push_back(std::move(e));
}

size_t Tracer::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return events_.size();
}

size_t Tracer::dropped() const {
  std::lock_guard<std::mutex> lock(mu_);
  return dropped_;
}

std::string Tracer::Json() const {
  std::vector<Event> events;
  size_t dropped = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    events = events_;
    dropped = dropped_;
  }
  // By start; at equal starts the longer (enclosing) event first, so parents precede children.
  std::stable_sort(events.begin(), events.end(), [](const Event& a, const Event& b) {
    return a.start_ns != b.start_ns ? a.start_ns < b.start_ns : a.dur_ns > b.dur_ns;
  });
  std::vector<int> tids;
  for (const Event& e : events) tids.push_back(e.tid);
  std::sort(tids.begin(), tids.end());
  tids.erase(std::unique(tids.begin(), tids.end()), tids.end());

  std::string out = "{\"traceEvents\":[";
  bool first = true;
  for (int tid : tids) {
    out += first ? "" : ",";
    first = false;
    out += "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":" + std::to_string(tid) +
           ",\"args\":{\"name\":\"kiln thread " + std::to_string(tid) + "\"}}";
  }
  for (const Event& e : events) {
    out += first ? "{\"name\":" : ",{\"name\":";
    first = false;
    out += JsonQuote(e.name);
    out += ",\"cat\":\"";
    out += e.category;
    out += "\",\"ph\":\"X\",\"pid\":1,\"tid\":" + std::to_string(e.tid) + ",\"ts\":";
    AppendMicros(out, e.start_ns);
    out += ",\"dur\":";
    AppendMicros(out, e.dur_ns);
    if (!e.args.empty()) out += ",\"args\":{" + e.args + "}";
    out += '}';
  }
  out += "],\"displayTimeUnit\":\"ms\",\"otherData\":{\"producer\":\"kiln\",\"dropped_events\":" +
         std::to_string(dropped) + "}}";
  return out;
}

Tracer* CurrentTracer() {
  return tls_tracer;
}

TracerScope::TracerScope(Tracer* tracer) : previous_(tls_tracer) {
  tls_tracer = tracer;
}

TracerScope::~TracerScope() {
  tls_tracer = previous_;
}

TraceSpan::TraceSpan(const char* category, std::string_view name)
    : tracer_(tls_tracer), category_(category) {
  if (!tracer_) return;
  name_ = name;
  start_ = Tracer::Clock::now();
}

TraceSpan::~TraceSpan() {
  if (!tracer_) return;
  try {
    tracer_->Complete(name_, category_, start_, Tracer::Clock::now(), std::move(args_));
  } catch (...) {  // out of memory: the event is lost, the traced work is not
  }
}

}  // namespace kiln
