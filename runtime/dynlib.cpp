#include "runtime/dynlib.h"

#include <dlfcn.h>

namespace flashjit {

void* DynLib::symbol(const char* name) const {
  if (handle == nullptr || name == nullptr) return nullptr;
  return dlsym(handle, name);
}

namespace {

// dlerror() is per-thread and cleared by the read; a failed dlopen always sets
// it. Its text usually starts with the name again, which the caller already shows.
std::string last_dl_error(const std::string& candidate) {
  const char* text = dlerror();
  std::string error = text != nullptr ? text : "unknown dlopen error";
  const std::string prefix = candidate + ": ";
  if (error.compare(0, prefix.size(), prefix) == 0) error.erase(0, prefix.size());
  return error;
}

}  // namespace

Result<DynLib> open_first(const std::vector<std::string>& candidates, Status status_on_failure,
                          const std::string& what) {
  std::string tried;
  for (const std::string& candidate : candidates) {
    if (candidate.empty()) continue;
    // RTLD_LOCAL: CUDA's symbols stay out of the global namespace, so a second
    // copy loaded by the application (e.g. through PyTorch) cannot clash.
    if (void* handle = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL)) {
      return DynLib{handle, candidate};
    }
    tried += "\n  " + candidate + ": " + last_dl_error(candidate);
  }
  if (tried.empty()) tried = "\n  (no candidates)";
  return make_error(status_on_failure, "could not load " + what + "; tried:" + tried);
}

}  // namespace flashjit
