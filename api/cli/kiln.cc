// `kiln`: the command-line tool (SPEC.md §8), written over the C API alone (kiln.h), as any
// application would be.
//
//   kiln run MODEL [--shape NAME=1x784 ...] [--input NAME=FILE.pb ...] [--iters N] [--warmup N]
//            [--threads N] [--opt-level N] [--disable-pass P] [--cache-dir D] [--target T]
//            [--config K=V] [--versus 'K=V ...'] [--policy eager|tiered|generic_only]
//            [--print-ir after=PASS[,PASS]|all] [--time-passes] [--stats] [--explain]
//            [--trace FILE.json] [--pipeline 'InferType,FoldConstant,FuseOps(max_group_size=8)']
//   kiln bench MODEL --shapes 'x=1x784;x=7x784' [--iters N] [--policy P] [--threads N] [--json]
//              [--compile-nice N] [--cache-dir D] [--record FILE] [--warm FILE] [--trace F]
//              [--config K=V]
//   kiln compile MODEL [--shape NAME=1x784 ...] --emit cuda|ptx|llvm|asm [--target T]
//                [--opt-level N] [--disable-pass P] OUT_DIR
//   kiln serve MODEL_DIR [--host H] [--port P] [--max-batch ROWS] [--batch-delay-us U]
//              [--threads N] [--policy P] [--cache-dir D] [--opt-level N] [--http-threads N]
//              [--max-request-bytes B] [--max-elements N]
//   kiln cache ls|clear --cache-dir D [--json]
//   kiln types MODEL
//   kiln passes
//   kiln test-onnx [--rtol R] [--atol A] CASE_DIR...
//
// run --versus times a second engine, made with the same options plus the given config
// assignments, on the same inputs, alternating with the first in blocks of a few runs: on a shared
// machine whose speed drifts by half within a minute, only such interleaved timings compare two
// configurations (tile sizes, say) fairly. At more than one thread the two engines' worker
// pools share the cores and can slow each other unevenly: compare there across processes.
//
// bench runs the shapes in order through one engine (policy tiered unless given) and prints per
// shape: the first call, the p50 while tier 0 (the model's shape-generic kernels) served it,
// the p50 once specialized, and when the switch happened after the first call. Each shape runs
// --iters times, waits for the background compiles, and runs --iters times again, so that the
// next shape's first call comes after runs, as in a server under traffic. --record writes
// the shapes it ran to a file; --warm compiles a file's shapes before the first request (from
// the disk cache of --cache-dir when an earlier process filled it).
//
// compile writes the kernels of the model's fused groups for the given shapes into OUT_DIR, a
// file per kernel, and prints their paths: with --target 'cuda -arch=sm_90', CUDA C (--emit
// cuda) or PTX (--emit ptx, compiled by NVRTC; no GPU needed); with an llvm target (the
// default), the optimized LLVM IR (--emit llvm).
//
// cache ls lists the entries of a disk cache (file, size, status, kernel, target, the group's
// signature with its shapes); cache clear removes them.
//
// serve answers the Open Inference Protocol v2 over HTTP for every ONNX model in MODEL_DIR
// (api/serve/server.h), batching concurrent requests per model, until SIGINT or SIGTERM.
//
// test-onnx prints a line per case, `PASS NAME` or `FAIL NAME: REASON`; a pass whose outputs no
// compiled kernel computed (folded at specialization, or copied from inputs) is
// `PASS NAME (no compiled kernel ran)`, so it is not taken for a pass through the JIT. After a
// count of those, the last line is `N passed, M failed`, which scripts read.
//
// Exit status: 0 success, 1 a failure (a model that does not load or run, a test case that
// fails), 2 bad usage.
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "api/cli/cli.h"

namespace kiln::cli {
namespace {

const char kUsage[] =
    "usage:\n"
    "  kiln --version\n"
    "  kiln run MODEL [--shape NAME=1x784 ...] [--input NAME=FILE.pb ...] [--iters N]\n"
    "           [--warmup N] [--threads N] [--opt-level N] [--disable-pass P] [--cache-dir D]\n"
    "           [--target 'llvm -mcpu=CPU -mattr=+f,-g'] [--config KEY=VALUE]\n"
    "           [--versus 'KEY=VALUE ...'] [--policy eager|tiered|generic_only]\n"
    "           [--print-ir after=PASS[,PASS]|all] [--time-passes] [--stats] [--explain]\n"
    "           [--trace FILE.json] [--pipeline 'InferType,FoldConstant,FuseOps(...)']\n"
    "  kiln bench MODEL --shapes 'NAME=DIMS ...;NAME=DIMS ...' [--iters N]\n"
    "           [--policy tiered|eager|generic_only] [--threads N] [--compile-nice 0-19]\n"
    "           [--json] [--cache-dir D] [--record SHAPES_FILE] [--warm SHAPES_FILE]\n"
    "           [--trace FILE.json] [--config KEY=VALUE]\n"
    "  kiln compile MODEL [--shape NAME=1x784 ...] --emit cuda|ptx|llvm|asm\n"
    "           [--target 'cuda -arch=sm_90'] [--opt-level N] [--disable-pass P] OUT_DIR\n"
    "  kiln serve MODEL_DIR [--host 127.0.0.1] [--port 8000 (0: any)] [--max-batch ROWS]\n"
    "           [--batch-delay-us U] [--threads N] [--policy P] [--cache-dir D] [--opt-level N]\n"
    "           [--http-threads N] [--max-request-bytes B] [--max-elements N]\n"
    "  kiln cache ls|clear --cache-dir D [--json]\n"
    "  kiln types MODEL\n"
    "  kiln passes\n"
    "  kiln test-onnx [--rtol R] [--atol A] CASE_DIR...\n";

// ---- kiln types, kiln passes ----------------------------------------------------------------

int TypesCommand(const std::vector<std::string>& args) {
  if (args.size() != 1 || args[0].empty() || args[0][0] == '-')
    throw UsageError{"kiln types takes exactly one MODEL"};
  ModelPtr model = LoadModel(args[0]);
  const char* name = nullptr;
  Check(kiln_model_name(model.get(), &name), "model");
  std::printf("model %s\ninputs:\n", name);
  for (const IoType& t : ModelIo(model.get(), true))
    std::printf("  %s: %s\n", t.name.c_str(), TypeString(t).c_str());
  std::printf("outputs:\n");
  bool unknown = false;
  for (const IoType& t : ModelIo(model.get(), false)) {
    std::string type = TypeString(t);
    unknown = unknown || type.find('?') != std::string::npos;
    std::printf("  %s: %s\n", t.name.c_str(), type.c_str());
  }
  if (unknown) std::printf("(? : a size known only when the model runs: it depends on values)\n");
  return 0;
}

int PassesCommand(const std::vector<std::string>& args) {
  if (!args.empty()) throw UsageError{"kiln passes takes no arguments"};
  size_t n = 0;
  Check(kiln_pass_count(&n), "passes");
  std::printf("%-28s %-9s %s\n", "pass", "opt_level", "requires");
  for (size_t i = 0; i < n; ++i) {
    char* name = nullptr;
    char* required = nullptr;
    int level = 0;
    Check(kiln_pass_info(i, &name, &level, &required), "passes");
    std::printf("%-28s %-9d %s\n", name, level, *required ? required : "-");
    kiln_string_free(name);
    kiln_string_free(required);
  }
  return 0;
}

}  // namespace
}  // namespace kiln::cli

int main(int argc, char** argv) {
  using namespace kiln::cli;
  std::vector<std::string> args(argv + 1, argv + argc);
  if (!args.empty() && (args[0] == "--version" || args[0] == "version")) {
    int major = 0, minor = 0, patch = 0;
    kiln_version(&major, &minor, &patch);
    std::printf("kiln %s (C API %d.%d.%d, libkiln.so.%d)\n", kiln_version_string(), major, minor,
                patch, major);
    return 0;
  }
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    std::fputs(kUsage, args.empty() ? stderr : stdout);
    return args.empty() ? kExitUsage : 0;
  }
  std::string command = args[0];
  args.erase(args.begin());
  try {
    if (command == "run") return RunCommand(args);
    if (command == "bench") return BenchCommand(args);
    if (command == "compile") return CompileCommand(args);
    if (command == "serve") return ServeCommand(args);
    if (command == "cache") return CacheCommand(args);
    if (command == "types") return TypesCommand(args);
    if (command == "passes") return PassesCommand(args);
    if (command == "test-onnx") return TestOnnxCommand(args);
    throw UsageError{"unknown command '" + command + "'"};
  } catch (const UsageError& e) {
    std::fprintf(stderr, "kiln: %s\n%s", e.message.c_str(), kUsage);
    return kExitUsage;
  } catch (const Failure& f) {
    std::fprintf(stderr, "kiln: %s\n", f.message.c_str());
    return kExitFailure;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kiln: %s\n", e.what());
    return kExitFailure;
  }
}
