// The trace recorder (ir/trace.h): spans record only under a current tracer, nest and order
// as the Chrome trace format wants, names are escaped, threads get their own ids, and a full
// tracer drops and counts instead of growing.
#include "ir/trace.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

namespace kiln {
namespace {

TEST(Tracer, SpansRecordOnlyUnderACurrentTracer) {
  Tracer tracer;
  { TraceSpan ignored("pass", "nowhere"); }
  EXPECT_EQ(tracer.size(), 0u);
  {
    TracerScope scope(&tracer);
    EXPECT_EQ(CurrentTracer(), &tracer);
    TraceSpan outer("run", "model");
    EXPECT_TRUE(outer.active());
    outer.SetArgs("\"inputs\":[\"f32[1]\"]");
    {
      TracerScope none(nullptr);  // an engine without tracing hides the caller's tracer
      TraceSpan hidden("run", "other");
      EXPECT_FALSE(hidden.active());
    }
    TraceSpan inner("kernel", "k");
  }
  EXPECT_EQ(CurrentTracer(), nullptr);
  EXPECT_EQ(tracer.size(), 2u);
  std::string json = tracer.Json();
  // The enclosing span first even though it ended last; its arguments kept.
  size_t model = json.find("\"name\":\"model\""), k = json.find("\"name\":\"k\"");
  ASSERT_NE(model, std::string::npos);
  ASSERT_NE(k, std::string::npos);
  EXPECT_LT(model, k);
  EXPECT_NE(json.find("\"args\":{\"inputs\":[\"f32[1]\"]}"), std::string::npos);
  EXPECT_NE(json.find("\"ph\":\"X\""), std::string::npos);
  EXPECT_NE(json.find("\"thread_name\""), std::string::npos);
  EXPECT_NE(json.find("\"dropped_events\":0"), std::string::npos);
}

TEST(Tracer, EqualStartsPutTheLongerEventFirst) {
  Tracer tracer;
  auto t0 = Tracer::Clock::now();
  tracer.Complete("child", "pass", t0, t0 + std::chrono::microseconds(5));
  tracer.Complete("parent", "compile", t0, t0 + std::chrono::microseconds(50));
  std::string json = tracer.Json();
  EXPECT_LT(json.find("\"parent\""), json.find("\"child\""));
  EXPECT_NE(json.find("\"dur\":50.000"), std::string::npos);
}

TEST(Tracer, NamesAreEscaped) {
  Tracer tracer;
  auto t0 = Tracer::Clock::now();
  tracer.Complete("a \"quoted\"\\name\n", "pass", t0, t0);
  EXPECT_NE(tracer.Json().find(R"("name":"a \"quoted\"\\name\u000a")"), std::string::npos);
  EXPECT_EQ(JsonQuote("x\ty"), "\"x\\u0009y\"");
}

TEST(Tracer, ThreadsHaveTheirOwnIds) {
  Tracer tracer;
  int here = Tracer::ThreadId(), there = 0;
  std::thread t([&] {
    there = Tracer::ThreadId();
    TracerScope scope(&tracer);
    TraceSpan span("run", "on a thread");
  });
  t.join();
  EXPECT_NE(here, there);
  EXPECT_EQ(here, Tracer::ThreadId());
  EXPECT_NE(tracer.Json().find("\"tid\":" + std::to_string(there)), std::string::npos);
}

TEST(Tracer, AFullTracerDropsAndCounts) {
  Tracer tracer(3);
  auto t0 = Tracer::Clock::now();
  for (int i = 0; i < 5; ++i) tracer.Complete("e", "kernel", t0, t0);
  EXPECT_EQ(tracer.size(), 3u);
  EXPECT_EQ(tracer.dropped(), 2u);
  EXPECT_NE(tracer.Json().find("\"dropped_events\":2"), std::string::npos);
}

}  // namespace
}  // namespace kiln
