// The JIT pipeline: spec -> (memory cache) -> (disk cache) -> codegen -> NVRTC
// -> cubin -> loaded module. Every request reports its stage times.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "compiler/spec.h"
#include "runtime/cache.h"
#include "runtime/driver.h"
#include "runtime/flashjit.h"

namespace flashjit {

/// A module loaded on one device, with its kernels in kernel_names() order.
struct LoadedModule {
  KernelSpec spec;
  driver::Module module;
  std::vector<driver::Function> functions;
  int smem_bytes = 0;  ///< dynamic shared memory of the main kernel
  /// The kernel called `name`, or null.
  const driver::Function* function(const std::string& name) const;
  std::vector<std::string> names;
};

/// The cache key of a spec: everything that determines its cubin. When NVRTC
/// is not available the NVRTC version field reads "unavailable" and lookups
/// accept an entry built by any NVRTC version (a warm cache works without NVRTC).
CacheKey cache_key(const KernelSpec& spec);

/// The cubin this build would load for `spec` from the disk cache, without
/// compiling: the entry under cache_key(spec), or, without NVRTC, an entry
/// whose key matches on every field but the NVRTC version (as Jit::cubin).
std::optional<std::vector<char>> find_cached(DiskCache& disk, const KernelSpec& spec);

class Jit {
 public:
  Jit(CacheOptions options, std::function<void(const std::string&)> warn,
      std::function<void(const CompileRecord&)> on_compile);

  /// The cubin of `spec`: memory, then disk, then NVRTC.
  Result<std::shared_ptr<const std::vector<char>>> cubin(const KernelSpec& spec, CompileRecord* record);
  /// The module of `spec` loaded on the current device (driver::init done by the caller).
  Result<std::shared_ptr<const LoadedModule>> load(const KernelSpec& spec, int device,
                                                   CompileRecord* record);

  DiskCache& disk() { return disk_; }

 private:
  Result<std::vector<char>> compile_with_nvrtc(const KernelSpec& spec, CompileRecord* record);
  std::shared_ptr<std::mutex> key_mutex(const std::string& key);

  DiskCache disk_;
  std::function<void(const std::string&)> warn_;
  std::function<void(const CompileRecord&)> on_compile_;
  std::shared_mutex mu_;  // guards the two maps below; hits take it shared
  std::unordered_map<std::string, std::shared_ptr<const std::vector<char>>> cubins_;
  std::unordered_map<std::string, std::shared_ptr<const LoadedModule>> modules_;  // "<device>/<spec>"
  std::mutex key_mu_;
  std::unordered_map<std::string, std::shared_ptr<std::mutex>> key_mutexes_;
};

}  // namespace flashjit
