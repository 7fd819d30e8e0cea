// `kiln cache ls|clear --cache-dir D`: the disk kernel cache (kiln_options_set_cache_dir) seen
// and emptied from outside any engine.
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/cli/cli.h"

namespace kiln::cli {

int CacheCommand(const std::vector<std::string>& args) {
  if (args.empty() || (args[0] != "ls" && args[0] != "clear"))
    throw UsageError{"kiln cache wants ls or clear"};
  std::string dir;
  bool json = false;
  for (size_t i = 1; i < args.size(); ++i) {
    if (args[i] == "--cache-dir" && i + 1 < args.size()) {
      dir = args[++i];
    } else if (args[i] == "--json" && args[0] == "ls") {
      json = true;
    } else {
      throw UsageError{"kiln cache " + args[0] + ": unexpected '" + args[i] + "'"};
    }
  }
  if (dir.empty()) throw UsageError{"kiln cache " + args[0] + " needs --cache-dir DIR"};

  if (args[0] == "clear") {
    uint64_t removed = 0;
    Check(kiln_cache_clear(dir.c_str(), &removed), "cache clear");
    std::printf("removed %llu entries from %s\n", static_cast<unsigned long long>(removed),
                dir.c_str());
    return 0;
  }
  char* text = nullptr;
  Check(kiln_cache_list_json(dir.c_str(), &text), "cache ls");
  std::string listing = text;
  kiln_string_free(text);
  if (json) {
    std::printf("%s\n", listing.c_str());
    return 0;
  }
  nlohmann::json entries = nlohmann::json::parse(listing);
  uint64_t total = 0;
  std::printf("%-19s %10s  %-11s %-28s %-8s %s\n", "file", "bytes", "status", "kernel", "target",
              "signature (shapes)");
  for (const auto& e : entries) {
    total += e["bytes"].get<uint64_t>();
    std::printf("%-19s %10llu  %-11s %-28s %-8s %s\n", e["file"].get<std::string>().c_str(),
                static_cast<unsigned long long>(e["bytes"].get<uint64_t>()),
                e["status"].get<std::string>().c_str(), e["kernel"].get<std::string>().c_str(),
                e["target"].get<std::string>().c_str(), e["signature"].get<std::string>().c_str());
  }
  std::printf("%zu entries, %llu bytes in %s\n", entries.size(),
              static_cast<unsigned long long>(total), dir.c_str());
  return 0;
}

}  // namespace kiln::cli
