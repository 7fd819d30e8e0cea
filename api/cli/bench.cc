// kiln bench (api/cli/kiln.cc's file comment): one engine, one model, a list of shapes run in
// order, and per shape what a server would see: the first call, the latency while the shape is
// served by the model's shape-generic kernels (tier 0), the latency once it is specialized,
// and when the switch happened.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "api/cli/cli.h"

namespace kiln::cli {
namespace {

using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// "x=1x784 y=3x4;x=7x784 y=5x4" -> one map per shape, input name -> dims.
std::vector<std::map<std::string, std::vector<int64_t>>> ParseShapeList(const std::string& text) {
  std::vector<std::map<std::string, std::vector<int64_t>>> list;
  std::stringstream all(text);
  for (std::string one; std::getline(all, one, ';');) {
    std::map<std::string, std::vector<int64_t>> shape;
    std::istringstream words(one);
    for (std::string w; words >> w;) {
      auto [name, dims] = SplitAssignment("--shapes", w);
      shape[name] = ParseShape("--shapes", dims);
    }
    if (shape.empty()) throw UsageError{"--shapes: an empty shape in '" + text + "'"};
    list.push_back(std::move(shape));
  }
  if (list.empty()) throw UsageError{"--shapes wants NAME=DIMS[;NAME=DIMS...]"};
  return list;
}

std::string ShapeText(const std::map<std::string, std::vector<int64_t>>& shape) {
  std::string s;
  for (const auto& [name, dims] : shape) {
    if (!s.empty()) s += ' ';
    s += name + "=";
    for (size_t d = 0; d < dims.size(); ++d) {
      if (d) s += 'x';
      s += std::to_string(dims[d]);
    }
  }
  return s;
}

struct Row {
  std::string shape;
  double first_ms = 0;
  std::vector<double> generic_ms, specialized_ms;
  double switch_ms = -1;  // after the first call; -1: never served specialized
};

}  // namespace

int BenchCommand(const std::vector<std::string>& args) {
  std::string model_path, shapes_text, policy = "tiered", cache_dir, record, warm, trace_path;
  int64_t iters = 100;
  int threads = 0, compile_nice = -1;  // -1: the engine's default
  bool json = false;
  std::vector<std::string> configs;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&]() -> const std::string& {
      if (i + 1 >= args.size()) throw UsageError{a + " needs a value"};
      return args[++i];
    };
    if (a == "--shapes") {
      shapes_text = value();
    } else if (a == "--iters") {
      iters = ParseInt(a, value());
      if (iters < 1) throw UsageError{"--iters must be at least 1"};
    } else if (a == "--policy") {
      policy = value();
    } else if (a == "--threads") {
      threads = static_cast<int>(ParseInt(a, value()));
    } else if (a == "--compile-nice") {
      compile_nice = static_cast<int>(ParseInt(a, value()));
    } else if (a == "--cache-dir") {
      cache_dir = value();
    } else if (a == "--record") {
      record = value();
    } else if (a == "--warm") {
      warm = value();
    } else if (a == "--trace") {
      trace_path = value();
    } else if (a == "--config") {
      configs.push_back(value());
    } else if (a == "--json") {
      json = true;
    } else if (!a.empty() && a[0] == '-') {
      throw UsageError{"kiln bench: unknown option '" + a + "'"};
    } else if (model_path.empty()) {
      model_path = a;
    } else {
      throw UsageError{"kiln bench: more than one model given"};
    }
  }
  if (model_path.empty()) throw UsageError{"kiln bench: no MODEL given"};
  if (shapes_text.empty()) throw UsageError{"kiln bench: --shapes is required"};
  auto shapes = ParseShapeList(shapes_text);

  kiln_options* o = nullptr;
  Check(kiln_options_create(&o), "options");
  OptionsPtr options(o);
  if (kiln_options_set_compile_policy(o, policy.c_str())) throw UsageError{kiln_last_error()};
  if (kiln_options_set_num_threads(o, threads)) throw UsageError{kiln_last_error()};
  if (compile_nice != -1 && kiln_options_set_compile_nice(o, compile_nice))
    throw UsageError{kiln_last_error()};
  if (!cache_dir.empty()) Check(kiln_options_set_cache_dir(o, cache_dir.c_str()), "--cache-dir");
  if (!trace_path.empty()) Check(kiln_options_set_trace(o, 1), "--trace");
  for (const std::string& c : configs) SetConfig(o, "--config", c);
  ModelPtr model = LoadModel(model_path);
  kiln_engine* e = nullptr;
  Check(kiln_engine_create(o, &e), "engine");
  EnginePtr engine(e);
  std::vector<IoType> io = ModelIo(model.get(), true);
  std::vector<IoType> outs = ModelIo(model.get(), false);

  // --warm: the shapes an earlier process recorded, compiled before the first request (from
  // the disk cache when --cache-dir has it).
  double warm_ms = -1;
  if (!warm.empty()) {
    Clock::time_point t0 = Clock::now();
    Check(kiln_engine_precompile_shapes(engine.get(), model.get(), warm.c_str()), "--warm");
    warm_ms = MsSince(t0);
  }

  std::mt19937 rng(0);
  std::vector<Row> rows;
  for (const auto& shape : shapes) {
    for (const auto& [name, dims] : shape)
      if (std::none_of(io.begin(), io.end(), [&](const IoType& t) { return t.name == name; }))
        throw UsageError{"--shapes: the model has no input '" + name + "'"};
    std::vector<TensorPtr> owned;
    std::vector<const kiln_tensor*> in;
    for (const IoType& t : io) {
      auto given = shape.find(t.name);
      std::vector<int64_t> dims = given != shape.end() ? given->second : t.dims;
      if (given == shape.end())
        for (int64_t d : dims)
          if (d < 0) throw UsageError{"--shapes: no shape for input '" + t.name + "'"};
      if (dims.size() != t.dims.size())
        throw UsageError{"--shapes: input '" + t.name + "' has rank " +
                         std::to_string(t.dims.size())};
      kiln_tensor* k = nullptr;
      Check(kiln_tensor_create(t.dtype, dims.size(), dims.data(), &k), "input '" + t.name + "'");
      owned.emplace_back(k);
      FillRandom(k, rng);
      in.push_back(k);
    }
    std::vector<kiln_tensor*> out(outs.size(), nullptr);
    auto run = [&] {
      Check(kiln_engine_run(engine.get(), model.get(), in.size(), nullptr, in.data(), out.size(),
                            nullptr, out.data()),
            "run");
    };
    Row row;
    row.shape = ShapeText(shape);
    Clock::time_point t0 = Clock::now();
    run();
    row.first_ms = MsSince(t0);
    std::vector<TensorPtr> keep(out.begin(), out.end());  // later runs write into them
    // Tier 0 until the background compile publishes the specialized executable; then, whatever
    // the compile pool still has (this shape's specialization, the generic tier) done, as many
    // runs again. The next shape's first call so follows a shape's runs, as in a server under
    // traffic, not the wait: the compile threads may take this thread's core meanwhile, and
    // its L2 with it (a batch-1 MLP waiting on its generic build: the next shape's first call
    // read its weights from memory, 0.17-0.22 ms instead of 0.10, its p50 0.04).
    auto runs = [&] {
      for (int64_t i = 0; i < iters; ++i) {
        bool specialized = ServedSpecialized(engine.get(), model.get(), in);
        if (specialized && row.switch_ms < 0) row.switch_ms = MsSince(t0);
        Clock::time_point s = Clock::now();
        run();
        (specialized ? row.specialized_ms : row.generic_ms).push_back(MsSince(s));
      }
    };
    runs();
    Check(kiln_engine_wait_background_compiles(engine.get()), "wait");
    runs();
    rows.push_back(std::move(row));
  }

  // Its message on stderr: --json's stdout is the JSON alone.
  if (!trace_path.empty()) WriteTrace(engine.get(), trace_path, json ? stderr : stdout);
  if (!record.empty())
    Check(kiln_engine_save_shapes(engine.get(), model.get(), record.c_str()), "--record");
  // What compiled: the counters a warm start should keep at zero.
  char* stats_json = nullptr;
  Check(kiln_engine_stats_json(engine.get(), &stats_json), "stats");
  std::string stats = stats_json;
  kiln_string_free(stats_json);
  auto counter = [&stats](const char* key) {
    size_t at = stats.find(std::string("\"") + key + "\":");
    return at == std::string::npos ? std::string("?")
                                   : stats.substr(at + std::strlen(key) + 3,
                                                  stats.find(',', at) - at - std::strlen(key) - 3);
  };
  auto ms_or_dash = [](double v) {
    char b[32];
    std::snprintf(b, sizeof b, "%.4f", v);
    return v < 0 ? std::string("-") : std::string(b);
  };
  if (json) {
    std::printf("{\"shapes\":[");
    for (size_t i = 0; i < rows.size(); ++i) {
      const Row& r = rows[i];
      std::printf(
          "%s{\"shape\":\"%s\",\"first_ms\":%.4f,\"generic_p50_ms\":%s,\"generic_runs\":%zu,"
          "\"specialized_p50_ms\":%s,\"specialized_runs\":%zu,\"switch_ms\":%s}",
          i ? "," : "", r.shape.c_str(), r.first_ms,
          r.generic_ms.empty() ? "null" : ms_or_dash(Percentile(r.generic_ms, 50)).c_str(),
          r.generic_ms.size(),
          r.specialized_ms.empty() ? "null" : ms_or_dash(Percentile(r.specialized_ms, 50)).c_str(),
          r.specialized_ms.size(), r.switch_ms < 0 ? "null" : ms_or_dash(r.switch_ms).c_str());
    }
    std::printf("],\"warm_ms\":%s,\"kernel_compiles\":%s,\"disk_hits\":%s}\n",
                warm_ms < 0 ? "null" : ms_or_dash(warm_ms).c_str(),
                counter("kernel_compiles").c_str(), counter("disk_hits").c_str());
    return 0;
  }
  std::printf("policy %s, %lld runs a phase\n", policy.c_str(), static_cast<long long>(iters));
  std::printf("%-28s %12s %14s %6s %16s %14s %12s\n", "shape", "first ms", "tier-0 p50 ms", "runs",
              "specialized p50", "switch at ms", "first/spec");
  for (const Row& r : rows) {
    double g = r.generic_ms.empty() ? -1 : Percentile(r.generic_ms, 50);
    double s = r.specialized_ms.empty() ? -1 : Percentile(r.specialized_ms, 50);
    std::printf("%-28s %12.4f %14s %6zu %16s %14s %12s\n", r.shape.c_str(), r.first_ms,
                ms_or_dash(g).c_str(), r.generic_ms.size(), ms_or_dash(s).c_str(),
                ms_or_dash(r.switch_ms).c_str(), s > 0 ? ms_or_dash(r.first_ms / s).c_str() : "-");
  }
  std::printf("kernel compiles %s, disk cache hits %s, specializations %s%s\n",
              counter("kernel_compiles").c_str(), counter("disk_hits").c_str(),
              counter("specializations").c_str(),
              warm_ms < 0 ? "" : (", warm start " + ms_or_dash(warm_ms) + " ms").c_str());
  return 0;
}

}  // namespace kiln::cli
