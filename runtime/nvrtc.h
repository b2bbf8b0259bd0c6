// NVRTC, loaded at run time on the first cache miss. The library is searched in
// FLASHJIT_NVRTC_PATH (a file or a directory; when set, the only place), the
// loader's default path, $CUDA_HOME/lib64, /usr/local/cuda/lib64, and the
// Python wheel layouts (site-packages/nvidia/cu13/lib, nvidia/cuda_nvrtc/lib).
// A warm cache never loads it.
#pragma once

#include <string>
#include <vector>

#include "compiler/status.h"

namespace flashjit::nvrtc {

/// One in-memory header given to NVRTC (name as used in #include).
struct Header {
  std::string name;
  std::string source;
};

/// What a compile produced.
struct CompileOutput {
  std::vector<char> cubin;  ///< empty when only PTX was asked for
  std::string ptx;          ///< filled when requested
  std::string log;          ///< the full compiler log (ptxas -v lines included)
};

/// Loads libnvrtc (once, thread-safe). kNvrtcUnavailable with the list of
/// places searched if it is not found.
Result<void> load();
/// True if libnvrtc can be loaded. Never fails.
bool available();
/// The path of the loaded library ("" before load()).
std::string library_path();
/// "13.0" etc.
Result<std::string> version();

/// Compiles `source` (named `name`) with `options`. When `want_cubin`, the
/// options must name a real architecture (--gpu-architecture=sm_XX) and the
/// cubin is returned; when `want_ptx`, a virtual one (compute_XX) works too.
/// A failure is kCompileFailed with the log and the options in the message.
/// With ptxas -v asked for, NVRTC 12.9+ also gets --no-cache: a hit in its own
/// compile cache skips ptxas and would leave the log empty.
Result<CompileOutput> compile(const std::string& source, const std::string& name,
                              const std::vector<Header>& headers,
                              const std::vector<std::string>& options, bool want_cubin,
                              bool want_ptx);

/// Parses the ptxas -v lines of a log for the function `kernel`: registers,
/// spill stores/loads (bytes), stack frame (bytes). Missing values are -1
/// (static_smem is 0 when the "Used ... registers" line names no smem).
/// wgmma_notes: ptxas' lines for this kernel that say it serialised its wgmma
/// or added a wait for them, each from its "(C75..)" code on; the two
/// questions below are asked of these lines.
struct PtxasInfo {
  int registers = -1;
  int spill_stores = -1;
  int spill_loads = -1;
  int stack_frame = -1;
  int static_smem = -1;
  std::vector<std::string> wgmma_notes;
  /// ptxas serialised the kernel's wgmma ("Potential Performance Loss", for
  /// any reason: C7511 too few registers, C7518 a dependence in a divergent
  /// path, ...): each waits for the one before, which costs a Hopper kernel
  /// most of its speed while every result stays right.
  bool wgmma_serialized() const;
  /// ptxas added a wait for in-flight wgmma before some use of their
  /// registers (C7517): an overlap the kernel counts on may be gone.
  bool wgmma_wait_injected() const;
};
PtxasInfo parse_ptxas_info(const std::string& log, const std::string& kernel);

namespace detail {
/// The libraries load() tries, in order, from the environment as it is now.
/// FLASHJIT_NVRTC_PATH, when set, is the only place tried.
std::vector<std::string> search_candidates();
/// Opens the first loadable candidate and resolves NVRTC in it, without
/// touching the process-wide state load() keeps (for tests); the path opened.
Result<std::string> try_load(const std::vector<std::string>& candidates);
}  // namespace detail

}  // namespace flashjit::nvrtc
