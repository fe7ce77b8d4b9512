//===- ReplayMain.cpp - run a fuzz harness over saved inputs --------------===//
//
// Without -DSHARC_FUZZ=ON the harnesses link this main instead of
// libFuzzer's, so every build (the gcc one, the ASan one) replays the seed
// corpus and every input that ever crashed. Arguments are files or folders
// (read one level deep); an argument starting with '-' is a libFuzzer flag
// such as -runs=0 and is ignored, so one ctest command serves both builds.
//
//===----------------------------------------------------------------------===//

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

namespace {

bool runFile(const std::filesystem::path &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "replay: cannot open %s\n", path.c_str());
    return false;
  }
  std::string bytes((std::istreambuf_iterator<char>(in)),
                    std::istreambuf_iterator<char>());
  // A copy of exactly `size` bytes, so ASan sees a read past the input as
  // it would under libFuzzer.
  std::vector<uint8_t> input(bytes.begin(), bytes.end());
  LLVMFuzzerTestOneInput(input.empty() ? nullptr : input.data(), input.size());
  return true;
}

} // namespace

int main(int argc, char **argv) {
  int numFiles = 0;
  bool allRead = true;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.starts_with("-"))
      continue;
    std::filesystem::path path(arg);
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) {
      std::vector<std::filesystem::path> files;
      for (const auto &entry : std::filesystem::directory_iterator(path))
        if (entry.is_regular_file())
          files.push_back(entry.path());
      std::sort(files.begin(), files.end());
      for (const auto &file : files) {
        allRead &= runFile(file);
        ++numFiles;
      }
    } else {
      allRead &= runFile(path);
      ++numFiles;
    }
  }
  std::printf("replay: %d inputs ran without a crash\n", numFiles);
  // No input at all means a wrong path in the test, not a pass.
  return allRead && numFiles > 0 ? 0 : 1;
}
