// kiln run (api/cli/kiln.cc's file comment): compile a model for the given shapes, time it,
// and with --versus time a second engine beside it.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "api/cli/cli.h"

namespace kiln::cli {
namespace {

// ---- kiln run -----------------------------------------------------------------------------

// --print-ir and --time-passes: C hooks over the pass instrument protocol. The CLI runs on one
// thread, so they need no locks.
struct PassObserver {
  std::string print_after;  // "" none, "all", or pass names separated by commas
  bool time = false;
  struct Open {
    std::string pass;
    std::chrono::steady_clock::time_point start;
  };
  std::vector<Open> open;
  std::vector<std::string> order;                        // first-run order
  std::map<std::string, std::pair<int, double>> totals;  // calls, ms (inclusive)
};

void BeforePass(const char* pass, const char*, void* user_data) {
  auto* o = static_cast<PassObserver*>(user_data);
  if (o->time) o->open.push_back({pass, std::chrono::steady_clock::now()});
}

void AfterPass(const char* pass, const char* module_text, void* user_data) {
  auto* o = static_cast<PassObserver*>(user_data);
  if (o->time && !o->open.empty()) {
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() -
                                                          o->open.back().start)
                    .count();
    o->open.pop_back();
    auto [it, fresh] = o->totals.try_emplace(pass, 0, 0.0);
    if (fresh) o->order.push_back(pass);
    it->second.first += 1;
    it->second.second += ms;
  }
  // Text comes only for the passes asked for (every pass for "all").
  if (module_text) std::printf("// IR after %s\n%s\n", pass, module_text);
}

}  // namespace

int RunCommand(const std::vector<std::string>& args) {
  std::string model_path;
  std::map<std::string, std::vector<int64_t>> shapes;
  std::map<std::string, std::string> input_files;
  int64_t iters = 10, warmup = 2;
  bool stats = false, explain = false;
  std::string trace_path;
  PassObserver observer;
  auto new_options = [] {
    kiln_options* o = nullptr;
    Check(kiln_options_create(&o), "options");
    return OptionsPtr(o);
  };
  OptionsPtr options = new_options();
  // Every option that shapes compilation, replayed onto the --versus engine's options.
  std::vector<std::function<void(kiln_options*)>> setters;
  auto set = [&](std::function<void(kiln_options*)> f) {
    f(options.get());
    setters.push_back(std::move(f));
  };
  std::vector<std::string> versus;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&]() -> const std::string& {
      if (i + 1 >= args.size()) throw UsageError{a + " needs a value"};
      return args[++i];
    };
    if (a == "--shape") {
      auto [name, text] = SplitAssignment(a, value());
      shapes[name] = ParseShape(a, text);
    } else if (a == "--input") {
      auto [name, file] = SplitAssignment(a, value());
      input_files[name] = file;
    } else if (a == "--iters") {
      iters = ParseInt(a, value());
      if (iters < 1) throw UsageError{"--iters must be at least 1"};
    } else if (a == "--warmup") {
      warmup = ParseInt(a, value());
      if (warmup < 0) throw UsageError{"--warmup must not be negative"};
    } else if (a == "--threads") {
      int n = static_cast<int>(ParseInt(a, value()));
      set([n](kiln_options* o) {
        if (kiln_options_set_num_threads(o, n)) throw UsageError{kiln_last_error()};
      });
    } else if (a == "--opt-level") {
      int n = static_cast<int>(ParseInt(a, value()));
      set([n](kiln_options* o) {
        if (kiln_options_set_opt_level(o, n)) throw UsageError{kiln_last_error()};
      });
    } else if (a == "--disable-pass") {
      set([p = value()](kiln_options* o) {
        if (kiln_options_disable_pass(o, p.c_str())) throw UsageError{kiln_last_error()};
      });
    } else if (a == "--target") {
      set([t = value()](kiln_options* o) {
        if (kiln_options_set_target(o, t.c_str())) throw UsageError{kiln_last_error()};
      });
    } else if (a == "--config") {
      set([v = value()](kiln_options* o) { SetConfig(o, "--config", v); });
    } else if (a == "--policy") {
      set([p = value()](kiln_options* o) {
        if (kiln_options_set_compile_policy(o, p.c_str())) throw UsageError{kiln_last_error()};
      });
    } else if (a == "--versus") {
      std::istringstream words(value());
      for (std::string w; words >> w;) versus.push_back(w);
      if (versus.empty()) throw UsageError{"--versus wants KEY=VALUE assignments"};
    } else if (a == "--cache-dir") {
      set([d = value()](kiln_options* o) {
        Check(kiln_options_set_cache_dir(o, d.c_str()), "--cache-dir");
      });
    } else if (a == "--print-ir") {
      const std::string& v = value();
      if (v.rfind("after=", 0) != 0 || v.size() == 6)
        throw UsageError{"--print-ir wants after=PASS[,PASS] or after=all, got '" + v + "'"};
      observer.print_after = v.substr(6);
    } else if (a == "--time-passes") {
      observer.time = true;
    } else if (a == "--stats") {
      stats = true;
    } else if (a == "--trace") {
      trace_path = value();
      Check(kiln_options_set_trace(options.get(), 1), "--trace");  // this engine's only
    } else if (a == "--pipeline") {
      set([p = value()](kiln_options* o) {
        if (kiln_options_set_pipeline(o, p.c_str()))
          throw UsageError{std::string("--pipeline: ") + kiln_last_error()};
      });
    } else if (a == "--explain") {
      explain = true;
    } else if (!a.empty() && a[0] == '-') {
      throw UsageError{"kiln run: unknown option '" + a + "'"};
    } else if (model_path.empty()) {
      model_path = a;
    } else {
      throw UsageError{"kiln run: more than one model given ('" + model_path + "', '" + a + "')"};
    }
  }
  if (model_path.empty()) throw UsageError{"kiln run: no MODEL given"};
  // after=PASS[,PASS] makes text for those passes only (the module's text after every pass
  // took minutes on a real model), and for their after hooks only: BeforePass ignores it.
  const std::string& print = observer.print_after;
  if (!print.empty() && print != "all") {
    if (kiln_options_add_instrument_ir_of(options.get(), observer.time ? BeforePass : nullptr,
                                          AfterPass, print.c_str(), &observer) != KILN_OK)
      throw UsageError{std::string("--print-ir: ") + kiln_last_error()};
  } else if (!print.empty() || observer.time) {
    Check(kiln_options_add_instrument(options.get(), BeforePass, AfterPass, !print.empty(),
                                      &observer),
          "instrument");
  }
  if (stats) set([](kiln_options* o) { Check(kiln_options_set_profiling(o, 1), "profiling"); });

  ModelPtr model = LoadModel(model_path);
  std::vector<IoType> inputs = ModelIo(model.get(), true);
  for (const auto& [name, shape] : shapes)
    if (std::none_of(inputs.begin(), inputs.end(), [&](const IoType& t) { return t.name == name; }))
      throw UsageError{"--shape " + name + ": the model has no input '" + name + "'"};

  // The inputs: from files, else random of the model's shape (symbolic dims from --shape).
  std::mt19937 rng(0);
  std::vector<TensorPtr> owned;
  for (const IoType& in : inputs) {
    kiln_tensor* t = nullptr;
    auto file = input_files.find(in.name);
    if (file != input_files.end()) {
      Check(kiln_tensor_read_onnx_pb(file->second.c_str(), &t), "--input " + in.name);
      owned.emplace_back(t);
      continue;
    }
    std::vector<int64_t> dims = in.dims;
    auto given = shapes.find(in.name);
    if (given != shapes.end()) {
      if (given->second.size() != dims.size())
        throw UsageError{"--shape " + in.name + ": the input has rank " +
                         std::to_string(dims.size()) + " (" + TypeString(in) + ")"};
      dims = given->second;
    } else {
      for (size_t d = 0; d < dims.size(); ++d)
        if (!in.symbols[d].empty())
          throw UsageError{"input '" + in.name + "' (" + TypeString(in) +
                           ") has the symbolic dim '" + in.symbols[d] +
                           "': give its shape with --shape " + in.name + "=..."};
    }
    Check(kiln_tensor_create(in.dtype, dims.size(), dims.data(), &t), "input '" + in.name + "'");
    owned.emplace_back(t);
    FillRandom(t, rng);
  }
  for (const auto& [name, file] : input_files)
    if (std::none_of(inputs.begin(), inputs.end(), [&](const IoType& t) { return t.name == name; }))
      throw UsageError{"--input " + name + ": the model has no input '" + name + "'"};

  EnginePtr engine;
  {
    kiln_engine* e = nullptr;
    Check(kiln_engine_create(options.get(), &e), "engine");
    engine.reset(e);
  }
  std::vector<const kiln_tensor*> in_ptrs;
  for (const TensorPtr& t : owned) in_ptrs.push_back(t.get());
  std::vector<IoType> outputs = ModelIo(model.get(), false);
  std::vector<kiln_tensor*> out_ptrs(outputs.size(), nullptr);
  std::vector<TensorPtr> out_owned;

  // The --versus engine: the same options, then the assignments.
  EnginePtr other;
  std::vector<kiln_tensor*> other_out(outputs.size(), nullptr);
  if (!versus.empty()) {
    OptionsPtr o = new_options();
    for (const auto& f : setters) f(o.get());
    for (const std::string& v : versus) SetConfig(o.get(), "--versus", v);
    kiln_engine* e = nullptr;
    Check(kiln_engine_create(o.get(), &e), "--versus engine");
    other.reset(e);
  }

  // --explain: what serves the first run (and why it misses), and what serves the later ones.
  auto print_explain = [&](const char* when) {
    char* json = nullptr;
    Check(kiln_engine_explain(engine.get(), model.get(), in_ptrs.size(), nullptr, in_ptrs.data(),
                              &json),
          "explain");
    std::printf("explain %s: %s\n", when, json);
    kiln_string_free(json);
  };
  if (explain) print_explain("first run");
  // The first run compiles; later runs write into the same outputs, in place.
  auto t0 = std::chrono::steady_clock::now();
  Check(kiln_engine_run(engine.get(), model.get(), in_ptrs.size(), nullptr, in_ptrs.data(),
                        out_ptrs.size(), nullptr, out_ptrs.data()),
        "run");
  double first_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  for (kiln_tensor* t : out_ptrs) out_owned.emplace_back(t);
  // The timed runs measure what serves the shape for good. Under the tiered policy a model's
  // first run compiles its shape as eager does (the generic tier builds meanwhile, for shapes
  // this process will not run, and stops when the engine goes): nothing to wait for. Where the
  // first run was served by the generic tier instead, its specialization is waited for.
  double background_ms = 0;
  if (!ServedSpecialized(engine.get(), model.get(), in_ptrs)) {
    t0 = std::chrono::steady_clock::now();
    Check(kiln_engine_wait_background_compiles(engine.get()), "wait for background compiles");
    background_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }
  auto run_on = [&](kiln_engine* e, std::vector<kiln_tensor*>& outs) {
    Check(kiln_engine_run(e, model.get(), in_ptrs.size(), nullptr, in_ptrs.data(), outs.size(),
                          nullptr, outs.data()),
          e == engine.get() ? "run" : "--versus run");
  };
  if (other) {
    run_on(other.get(), other_out);
    for (kiln_tensor* t : other_out) out_owned.emplace_back(t);
    Check(kiln_engine_wait_background_compiles(other.get()), "--versus wait");
  }
  for (int64_t i = 0; i < warmup; ++i) {
    run_on(engine.get(), out_ptrs);
    if (other) run_on(other.get(), other_out);
  }
  auto timed = [](const std::function<void()>& f) {
    auto s = std::chrono::steady_clock::now();
    f();
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - s).count();
  };
  std::vector<double> ms, other_ms;
  if (!other) {
    for (int64_t i = 0; i < iters; ++i)
      ms.push_back(timed([&] { run_on(engine.get(), out_ptrs); }));
  } else {
    // Blocks of kBlock timed runs per engine, each after one untimed run: an engine's worker
    // threads keep spinning a while after its run ends, and would slow the other engine's
    // next run, not the one after.
    constexpr int64_t kBlock = 8;
    for (int64_t done = 0; done < iters; done += kBlock) {
      for (auto [e, outs, times] : {std::tuple{engine.get(), &out_ptrs, &ms},
                                    std::tuple{other.get(), &other_out, &other_ms}}) {
        run_on(e, *outs);
        for (int64_t i = done; i < std::min(iters, done + kBlock); ++i)
          times->push_back(timed([&] { run_on(e, *outs); }));
      }
    }
  }

  if (explain) print_explain("after the timed runs");
  for (size_t j = 0; j < outputs.size(); ++j)
    std::printf("%s: %s = %s\n", outputs[j].name.c_str(), ShapeString(out_ptrs[j]).c_str(),
                FirstValues(out_ptrs[j], 8).c_str());
  std::printf("compile + first run: %.3f ms\n", first_ms);
  if (background_ms >= 0.05)
    std::printf("then specialized in the background: %.3f ms more\n", background_ms);
  std::printf("latency over %lld runs: p50 %.4f ms, p90 %.4f ms, p99 %.4f ms\n",
              static_cast<long long>(iters), Percentile(ms, 50), Percentile(ms, 90),
              Percentile(ms, 99));
  if (other) {
    std::string assignments;
    for (const std::string& v : versus) assignments += (assignments.empty() ? "" : " ") + v;
    std::printf("versus %s, alternating: p50 %.4f ms, p90 %.4f ms; p50 ratio %.3f\n",
                assignments.c_str(), Percentile(other_ms, 50), Percentile(other_ms, 90),
                Percentile(other_ms, 50) / Percentile(ms, 50));
  }
  if (observer.time) {
    std::printf("pass timing (inclusive):\n");
    for (const std::string& p : observer.order)
      std::printf("  %-32s %5d calls %10.3f ms\n", p.c_str(), observer.totals[p].first,
                  observer.totals[p].second);
  }
  if (!trace_path.empty()) WriteTrace(engine.get(), trace_path, stdout);
  if (stats) {
    char* json = nullptr;
    Check(kiln_engine_stats_json(engine.get(), &json), "stats");
    std::printf("%s\n", json);
    kiln_string_free(json);
    if (other) {
      Check(kiln_engine_stats_json(other.get(), &json), "--versus stats");
      std::printf("versus stats: %s\n", json);
      kiln_string_free(json);
    }
  }
  return 0;
}

}  // namespace kiln::cli
