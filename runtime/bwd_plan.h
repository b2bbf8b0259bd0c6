// Host-side launch plan of the backward pass: the workspace it needs, where
// each workspace buffer goes in BwdParams, and the ordered kernel launches.
// Pure C++: no CUDA types. runtime/attention.cpp calls exactly these four.
// (Interface fixed by the runtime; the bodies belong to the backward kernel's
// owner and mirror templates/bwd_mma.cuh.)
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "compiler/spec.h"
#include "templates/params.cuh"

namespace flashjit {

struct BwdShape {
  int batch = 0;
  int heads = 0;
  int seqlen_q = 0;
  int seqlen_k = 0;
};

struct LaunchDim {
  unsigned x = 1, y = 1, z = 1;
};

/// One kernel launch of the backward pass.
struct BwdLaunch {
  std::string kernel;  ///< extern "C" name, e.g. "flashjit_bwd_preprocess"
  LaunchDim grid;
  LaunchDim block;
  int smem_bytes = 0;  ///< dynamic shared memory
};

/// Workspace bytes (fp32 dQ accumulator, row sums of dO*O, ...) for `spec` and `shape`.
size_t bwd_workspace_bytes(const KernelSpec& spec, const BwdShape& shape);
/// Points the workspace fields of `params` into `workspace` (16-byte aligned,
/// at least bwd_workspace_bytes() long).
void bwd_assign_workspace(const KernelSpec& spec, const BwdShape& shape, void* workspace,
                          BwdParams* params);
/// The launches, in stream order.
std::vector<BwdLaunch> bwd_launch_plan(const KernelSpec& spec, const BwdShape& shape);

}  // namespace flashjit
