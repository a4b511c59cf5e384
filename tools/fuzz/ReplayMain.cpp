//===- ReplayMain.cpp - run saved fuzz inputs once each ---------*- C++ -*-===//
//
// accrue-replay-NAME FILE_OR_DIR...: calls the target once on each file (a
// directory: each regular file in it, sorted) and prints how many ran. A
// finding aborts the process, as under the fuzzer.
//
//===----------------------------------------------------------------------===//

#include "Fuzz.h"

#include <algorithm>
#include <cstdio>
#include <dirent.h>
#include <fstream>
#include <iterator>
#include <string>
#include <sys/stat.h>
#include <vector>

static bool isDirectory(const std::string &path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

int main(int argc, char **argv) {
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (!isDirectory(arg)) {
      files.push_back(arg);
      continue;
    }
    std::vector<std::string> inDir;
    if (DIR *d = ::opendir(arg.c_str())) {
      while (dirent *entry = ::readdir(d)) {
        std::string path = arg + "/" + entry->d_name;
        if (entry->d_name[0] != '.' && !isDirectory(path))
          inDir.push_back(path);
      }
      ::closedir(d);
    }
    std::sort(inDir.begin(), inDir.end());
    files.insert(files.end(), inDir.begin(), inDir.end());
  }
  for (const std::string &path : files) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "cannot read '%s'\n", path.c_str());
      return 1;
    }
    std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                               std::istreambuf_iterator<char>());
    LLVMFuzzerTestOneInput(bytes.data(), bytes.size());
  }
  std::printf("replayed %zu inputs\n", files.size());
  return 0;
}
