#include "compiler/status.h"

namespace flashjit {

const char* status_name(Status s) {
  switch (s) {
    case Status::kOk: return "ok";
    case Status::kNullPointer: return "null_pointer";
    case Status::kUnsupportedDType: return "unsupported_dtype";
    case Status::kUnsupportedHeadDim: return "unsupported_head_dim";
    case Status::kInvalidSize: return "invalid_size";
    case Status::kUnsupportedStride: return "unsupported_stride";
    case Status::kMisalignedPointer: return "misaligned_pointer";
    case Status::kInvalidSpec: return "invalid_spec";
    case Status::kUnsupportedArch: return "unsupported_arch";
    case Status::kInvalidArgument: return "invalid_argument";
    case Status::kDriverUnavailable: return "driver_unavailable";
    case Status::kNoDevice: return "no_device";
    case Status::kNvrtcUnavailable: return "nvrtc_unavailable";
    case Status::kCompileFailed: return "compile_failed";
    case Status::kCudaError: return "cuda_error";
    case Status::kCacheError: return "cache_error";
    case Status::kOutOfMemory: return "out_of_memory";
    case Status::kInternal: return "internal";
  }
  return "unknown";
}

}  // namespace flashjit
