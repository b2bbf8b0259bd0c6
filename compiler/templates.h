// The kernel templates (templates/*.cuh), embedded into the library at build
// time by cmake/embed_templates.cmake. NVRTC gets them as in-memory headers named
// "flashjit/<file>", so nothing is read from the source tree at run time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace flashjit {

struct EmbeddedTemplate {
  const char* name;  ///< include name, e.g. "flashjit/fwd_mma.cuh"
  const char* data;  ///< file contents (not NUL-terminated in general; use size)
  size_t size;
};

/// Every embedded template, in a fixed order.
const std::vector<EmbeddedTemplate>& embedded_templates();

/// xxh64 over the names and contents of every template: part of the cache key,
/// so editing a template invalidates the cubins built from it.
uint64_t templates_hash();

}  // namespace flashjit
