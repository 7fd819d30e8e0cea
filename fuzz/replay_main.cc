// A main for a fuzz target outside libFuzzer: runs LLVMFuzzerTestOneInput on every file of the
// folders (or files) given, so that the inputs fuzzing once found (fuzz/findings/<target>/)
// are regression tests in every build, sanitized or not (tests/CMakeLists.txt).
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  int runs = 0;
  for (int i = 1; i < argc; ++i) {
    std::vector<fs::path> files;
    if (!fs::exists(argv[i])) {
      std::printf("%s: none (no such folder)\n", argv[i]);  // a target with no findings yet
      continue;
    }
    if (fs::is_directory(argv[i])) {
      for (const fs::directory_entry& e : fs::directory_iterator(argv[i]))
        if (e.is_regular_file()) files.push_back(e.path());
    } else {
      files.emplace_back(argv[i]);
    }
    for (const fs::path& f : files) {
      std::ifstream in(f, std::ios::binary);
      if (!in) {
        std::fprintf(stderr, "cannot read %s\n", f.c_str());
        return 1;
      }
      std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      std::printf("%s\n", f.filename().c_str());
      std::fflush(stdout);  // so a crash names the input
      LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
      ++runs;
    }
  }
  std::printf("kiln: %d inputs replayed without a failure\n", runs);
  return 0;
}
