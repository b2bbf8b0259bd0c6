// Catch2 main for the GPU tests. Without a usable GPU it exits with 77, which
// ctest (SKIP_RETURN_CODE) reports as "Skipped": never a silent pass.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstring>

#include "runtime/driver.h"

int main(int argc, char* argv[]) {
  // Listing the tests (ctest's discovery at build time) needs no GPU.
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--list", 6) == 0) return Catch::Session().run(argc, argv);
  }
  if (auto r = flashjit::driver::init(0); !r) {
    std::printf("SKIPPED: no usable GPU: %s\n", r.error().message.c_str());
    return 77;
  }
  return Catch::Session().run(argc, argv);
}
