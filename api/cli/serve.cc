// `kiln serve MODEL_DIR`: the Open Inference Protocol server (api/serve/server.h) as a command.
// It serves until SIGINT or SIGTERM, then lets the requests in flight finish and exits 0.
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "api/cli/cli.h"
#include "api/serve/server.h"

namespace kiln::cli {

int ServeCommand(const std::vector<std::string>& args) {
  std::string dir;
  serve::ServeOptions so;
  OptionsPtr options;
  {
    kiln_options* o = nullptr;
    Check(kiln_options_create(&o), "options");
    options.reset(o);
  }
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&]() -> const std::string& {
      if (i + 1 >= args.size()) throw UsageError{a + " needs a value"};
      return args[++i];
    };
    auto positive = [&](int64_t min) {
      int64_t v = ParseInt(a, value());
      if (v < min) throw UsageError{a + " must be at least " + std::to_string(min)};
      return v;
    };
    if (a == "--host") {
      so.host = value();
    } else if (a == "--port") {
      int64_t p = ParseInt(a, value());
      if (p < 0 || p > 65535) throw UsageError{"--port must be 0 to 65535"};
      so.port = static_cast<int>(p);
    } else if (a == "--max-batch") {
      so.batch.max_batch = positive(1);
    } else if (a == "--batch-delay-us") {
      so.batch.max_delay = std::chrono::microseconds(positive(0));
    } else if (a == "--max-request-bytes") {
      so.max_request_bytes = static_cast<size_t>(positive(1));
    } else if (a == "--max-elements") {
      int64_t n = positive(1);
      if (n > (int64_t{1} << 40)) throw UsageError{"--max-elements must be at most 2^40"};
      so.limits.max_elements = static_cast<size_t>(n);
    } else if (a == "--http-threads") {
      so.http_threads = static_cast<int>(positive(1));
    } else if (a == "--threads") {
      Check(kiln_options_set_num_threads(options.get(), static_cast<int>(positive(0))), a);
    } else if (a == "--opt-level") {
      Check(kiln_options_set_opt_level(options.get(), static_cast<int>(ParseInt(a, value()))), a);
    } else if (a == "--policy") {
      Check(kiln_options_set_compile_policy(options.get(), value().c_str()), a);
    } else if (a == "--cache-dir") {
      Check(kiln_options_set_cache_dir(options.get(), value().c_str()), a);
    } else if (!a.empty() && a[0] == '-') {
      throw UsageError{"kiln serve: unknown option '" + a + "'"};
    } else if (dir.empty()) {
      dir = a;
    } else {
      throw UsageError{"kiln serve takes one MODEL_DIR"};
    }
  }
  if (dir.empty()) throw UsageError{"kiln serve needs a MODEL_DIR"};

  // SIGINT and SIGTERM are taken by one thread (sigwait), blocked in every other: this before
  // any thread starts, since threads inherit the mask.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  kiln_engine* e = nullptr;
  Check(kiln_engine_create(options.get(), &e), "engine");
  EnginePtr engine(e);
  int port = 0;
  {
    serve::Server server(dir, engine.get(), so);
    port = server.Bind();
    std::atomic<bool> served{false};
    std::thread signals([&] {
      int sig = 0;
      sigwait(&stop_signals, &sig);
      if (!served.load()) server.StopWhenServing();
    });
    std::printf("kiln serve: listening on http://%s:%d\n", so.host.c_str(), port);
    std::fflush(stdout);
    server.Serve();
    served.store(true);
    pthread_kill(signals.native_handle(), SIGTERM);  // wakes it if the server stopped by itself
    signals.join();
  }
  std::printf("kiln serve: stopped\n");
  return 0;
}

}  // namespace kiln::cli
