// dlopen with a search list, and the error text of the last failure. Used for
// libcuda.so.1 and libnvrtc, which flashjit never links against.
#pragma once

#include <string>
#include <vector>

#include "compiler/status.h"

namespace flashjit {

/// An open shared library; closed never (the process keeps CUDA loaded).
struct DynLib {
  void* handle = nullptr;
  std::string path;  ///< what was opened
  /// Looks up a symbol; null if absent.
  void* symbol(const char* name) const;
};

/// Tries each candidate (a file name for the loader's default search, or a
/// path) in order; the error lists every candidate and dlerror()'s text.
Result<DynLib> open_first(const std::vector<std::string>& candidates, Status status_on_failure,
                          const std::string& what);

}  // namespace flashjit
