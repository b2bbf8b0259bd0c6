// Codegen: spec -> one complete CUDA translation unit. The generated text is a
// short prelude of constexpr/using lines and extern "C" entry points around an
// include of a template; all logic lives in templates/*.cuh.
#pragma once

#include <string>
#include <vector>

#include "compiler/spec.h"
#include "runtime/nvrtc.h"

namespace flashjit {

/// The CUDA source for `spec` (its tile must be filled in).
std::string generate_source(const KernelSpec& spec);

/// The names of the extern "C" kernels the generated module defines; the first
/// is the main kernel of the spec.
std::vector<std::string> kernel_names(const KernelSpec& spec);

/// The embedded templates as NVRTC in-memory headers.
const std::vector<nvrtc::Header>& template_headers();

/// NVRTC options for `spec`. `for_ptx` targets the virtual arch (compute_XX) so
/// PTX can be read; otherwise the real arch (sm_XX) for a cubin. ptxas -v is
/// always on: the log then carries registers and spills.
std::vector<std::string> nvrtc_options(const KernelSpec& spec, bool for_ptx = false);

}  // namespace flashjit
