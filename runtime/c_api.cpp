// The C API (flashjit_c.h) over the C++ Context (flashjit.h). This layer only
// checks what C adds (null handles and struct pointers, enum values outside
// their range), converts, and turns Results into a status plus the calling
// thread's last-error message. Every other rule (sizes, head dims, strides,
// alignment, dtype/precision) is the Context's, so the C and C++ APIs reject
// exactly the same problems with the same messages. No exception crosses the
// C boundary.
#include "runtime/flashjit_c.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <string>
#include <utility>

#include "compiler/spec.h"
#include "compiler/status.h"
#include "runtime/flashjit.h"

struct flashjit_context {
  std::unique_ptr<flashjit::Context> impl;
};

namespace {

using flashjit::Error;
using flashjit::Status;

// The C enum mirrors flashjit::Status value for value.
#define FLASHJIT_SAME_VALUE(c, cpp) static_assert(static_cast<int>(c) == static_cast<int>(Status::cpp))
FLASHJIT_SAME_VALUE(FLASHJIT_SUCCESS, kOk);
FLASHJIT_SAME_VALUE(FLASHJIT_ERROR_NULL_POINTER, kNullPointer);
FLASHJIT_SAME_VALUE(FLASHJIT_ERROR_UNSUPPORTED_DTYPE, kUnsupportedDType);
FLASHJIT_SAME_VALUE(FLASHJIT_ERROR_UNSUPPORTED_HEAD_DIM, kUnsupportedHeadDim);
FLASHJIT_SAME_VALUE(FLASHJIT_ERROR_INVALID_SIZE, kInvalidSize);
FLASHJIT_SAME_VALUE(FLASHJIT_ERROR_UNSUPPORTED_STRIDE, kUnsupportedStride);
FLASHJIT_SAME_VALUE(FLASHJIT_ERROR_MISALIGNED_POINTER, kMisalignedPointer);
FLASHJIT_SAME_VALUE(FLASHJIT_ERROR_INVALID_SPEC, kInvalidSpec);
FLASHJIT_SAME_VALUE(FLASHJIT_ERROR_UNSUPPORTED_ARCH, kUnsupportedArch);
FLASHJIT_SAME_VALUE(FLASHJIT_ERROR_INVALID_ARGUMENT, kInvalidArgument);
FLASHJIT_SAME_VALUE(FLASHJIT_ERROR_DRIVER_UNAVAILABLE, kDriverUnavailable);
FLASHJIT_SAME_VALUE(FLASHJIT_ERROR_NO_DEVICE, kNoDevice);
FLASHJIT_SAME_VALUE(FLASHJIT_ERROR_NVRTC_UNAVAILABLE, kNvrtcUnavailable);
FLASHJIT_SAME_VALUE(FLASHJIT_ERROR_COMPILE_FAILED, kCompileFailed);
FLASHJIT_SAME_VALUE(FLASHJIT_ERROR_CUDA, kCudaError);
FLASHJIT_SAME_VALUE(FLASHJIT_ERROR_CACHE, kCacheError);
FLASHJIT_SAME_VALUE(FLASHJIT_ERROR_OUT_OF_MEMORY, kOutOfMemory);
FLASHJIT_SAME_VALUE(FLASHJIT_ERROR_INTERNAL, kInternal);
#undef FLASHJIT_SAME_VALUE

// flashjit_tensor and TensorView are the same four fields.
static_assert(sizeof(flashjit_tensor) == sizeof(flashjit::TensorView));

constexpr Status kLastStatus = Status::kInternal;

thread_local std::string t_last_error;

void clear_error() noexcept { t_last_error.clear(); }

// Records `message` as this thread's last error and returns `status`. If even
// that allocation fails, the message is left empty: the status still says it.
flashjit_status fail(Status status, const char* message) noexcept {
  try {
    t_last_error = message;
  } catch (...) {
    t_last_error.clear();
  }
  return static_cast<flashjit_status>(status);
}

flashjit_status fail(const Error& e) noexcept { return fail(e.status, e.message.c_str()); }

flashjit_status null_pointer(const char* function, const char* argument) noexcept {
  try {
    return fail(Status::kNullPointer,
                (std::string(function) + ": " + argument + " is null").c_str());
  } catch (...) {
    return fail(Status::kNullPointer, "");
  }
}

// Runs `body` (which returns a flashjit_status) with the last error cleared
// first. No exception crosses the C boundary: std::bad_alloc becomes
// FLASHJIT_ERROR_OUT_OF_MEMORY, anything else FLASHJIT_ERROR_INTERNAL.
template <class Body>
flashjit_status guarded(const char* function, Body&& body) noexcept {
  clear_error();
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return fail(Status::kOutOfMemory, "host memory allocation failed");
  } catch (const std::exception& e) {
    try {
      return fail(Status::kInternal,
                  (std::string(function) + ": internal error: " + e.what()).c_str());
    } catch (...) {
      return fail(Status::kInternal, "internal error");
    }
  } catch (...) {
    return fail(Status::kInternal, "internal error: unknown exception");
  }
}

// Reads an enum field as the int the caller stored: a C caller may store any
// int in it, which C++ must not read through the enum type.
template <class Enum>
int raw_enum(const Enum& field) {
  static_assert(sizeof(Enum) == sizeof(int));
  int value;
  std::memcpy(&value, &field, sizeof value);
  return value;
}

flashjit::Result<flashjit::Problem> to_problem(const flashjit_problem& p) {
  flashjit::Problem out;
  switch (raw_enum(p.dtype)) {
    case FLASHJIT_DTYPE_BF16: out.dtype = flashjit::DType::kBF16; break;
    case FLASHJIT_DTYPE_F16: out.dtype = flashjit::DType::kF16; break;
    case FLASHJIT_DTYPE_F32: out.dtype = flashjit::DType::kF32; break;
    default:
      return flashjit::make_error(
          Status::kUnsupportedDType,
          "problem->dtype must be one of 0 (bf16), 1 (f16), 2 (f32); got " +
              std::to_string(raw_enum(p.dtype)));
  }
  switch (raw_enum(p.precision)) {
    case FLASHJIT_PRECISION_NATIVE: out.precision = flashjit::Precision::kNative; break;
    case FLASHJIT_PRECISION_TF32: out.precision = flashjit::Precision::kTF32; break;
    case FLASHJIT_PRECISION_IEEE: out.precision = flashjit::Precision::kIEEE; break;
    default:
      return flashjit::make_error(
          Status::kUnsupportedDType,
          "problem->precision must be one of 0 (native), 1 (tf32), 2 (ieee); got " +
              std::to_string(raw_enum(p.precision)));
  }
  out.batch = p.batch;
  out.heads = p.heads;
  out.seqlen_q = p.seqlen_q;
  out.seqlen_k = p.seqlen_k;
  out.head_dim = p.head_dim;
  out.causal = p.causal != 0;
  out.scale = p.scale;
  out.seqlens_k = p.seqlens_k;
  return out;
}

flashjit::TensorView to_view(const flashjit_tensor& t) {
  return flashjit::TensorView{t.data, t.batch_stride, t.seq_stride, t.head_stride};
}

int to_c(flashjit::CacheOutcome o) {
  switch (o) {
    case flashjit::CacheOutcome::kMemoryHit: return FLASHJIT_CACHE_MEMORY_HIT;
    case flashjit::CacheOutcome::kDiskHit: return FLASHJIT_CACHE_DISK_HIT;
    case flashjit::CacheOutcome::kCompiled: return FLASHJIT_CACHE_COMPILED;
  }
  return -1;
}

// The state `info` holds after a failed call.
void reset_info(flashjit_compile_info* info) {
  if (info == nullptr) return;
  std::memset(info, 0, sizeof *info);
  info->cache_outcome = -1;
  info->registers = -1;
  info->spill_bytes = -1;
}

void fill_info(const flashjit::CompileRecord& r, flashjit_compile_info* info) {
  if (info == nullptr) return;
  info->codegen_s = r.codegen_s;
  info->nvrtc_s = r.nvrtc_s;
  info->disk_s = r.disk_s;
  info->load_s = r.load_s;
  info->compile_s = r.compile_s;
  info->cache_outcome = to_c(r.outcome);
  info->registers = r.registers;
  info->spill_bytes = r.spill_bytes;
  // Canonical spec strings are far shorter than the field; truncate, never overflow.
  const size_t n = std::min(r.spec.size(), sizeof info->spec - 1);
  std::memcpy(info->spec, r.spec.data(), n);
  info->spec[n] = '\0';
}

// A byte count of a problem: the null checks, the conversion, *out (0 on error).
template <class Query>
flashjit_status size_of_problem(const char* fn, flashjit_context* ctx, const flashjit_problem* problem,
                                size_t* out, Query query) {
  return guarded(fn, [&]() -> flashjit_status {
    if (ctx == nullptr) return null_pointer(fn, "ctx");
    if (problem == nullptr) return null_pointer(fn, "problem");
    if (out == nullptr) return null_pointer(fn, "out");
    *out = 0;
    auto p = to_problem(*problem);
    if (!p) return fail(p.error());
    flashjit::Result<size_t> r = query(*ctx->impl, *p);
    if (!r) return fail(r.error());
    *out = *r;
    return FLASHJIT_SUCCESS;
  });
}

}  // namespace

extern "C" {

flashjit_status flashjit_context_create(int device, flashjit_context** out) {
  const char* const fn = __func__;
  return guarded(fn, [&]() -> flashjit_status {
    if (out == nullptr) return null_pointer(fn, "out");
    *out = nullptr;
    flashjit::ContextOptions options;
    options.device = device;
    auto ctx = flashjit::Context::create(std::move(options));
    if (!ctx) return fail(ctx.error());
    auto handle = std::make_unique<flashjit_context>();
    handle->impl = std::move(ctx.value());
    *out = handle.release();
    return FLASHJIT_SUCCESS;
  });
}

flashjit_status flashjit_context_create_ex(const flashjit_context_options* options,
                                           flashjit_context** out) {
  const char* const fn = __func__;
  return guarded(fn, [&]() -> flashjit_status {
    if (options == nullptr) return null_pointer(fn, "options");
    if (out == nullptr) return null_pointer(fn, "out");
    *out = nullptr;
    flashjit::ContextOptions o;
    o.device = options->device;
    if (options->cache_dir) o.cache.dir = options->cache_dir;
    if (options->disable_disk_cache) o.cache.disk_enabled = false;
    if (options->arch) {
      auto arch = flashjit::parse_arch(options->arch);
      if (!arch) {
        return fail(flashjit::make_error(flashjit::Status::kInvalidArgument,
                                         std::string("arch must be one of sm80, sm86, sm89, sm90, sm90a; got '") +
                                             options->arch + "'"));
      }
      o.arch = *arch;
    }
    o.force_mma = options->force_mma != 0;
    if (options->fwd_tile) {
      auto tile = flashjit::parse_tile_config(options->fwd_tile);
      if (!tile) {
        return fail(flashjit::make_error(flashjit::Status::kInvalidArgument, "fwd_tile: " + tile.error().message));
      }
      o.fwd_tile = *tile;
    }
    if (options->fwd_schedule) {
      auto schedule = flashjit::parse_fwd_schedule(options->fwd_schedule);
      if (!schedule) {
        return fail(flashjit::make_error(flashjit::Status::kInvalidArgument,
                                         "fwd_schedule: " + schedule.error().message));
      }
      o.fwd_schedule = *schedule;
    }
    if (options->on_warning) {
      auto cb = options->on_warning;
      void* user = options->user_data;
      o.on_warning = [cb, user](const std::string& m) { cb(m.c_str(), user); };
    }
    if (options->on_compile) {
      auto cb = options->on_compile;
      void* user = options->user_data;
      o.on_compile = [cb, user](const flashjit::CompileRecord& r) {
        flashjit_compile_info info;
        fill_info(r, &info);
        cb(&info, user);
      };
    }
    auto ctx = flashjit::Context::create(std::move(o));
    if (!ctx) return fail(ctx.error());
    auto handle = std::make_unique<flashjit_context>();
    handle->impl = std::move(ctx.value());
    *out = handle.release();
    return FLASHJIT_SUCCESS;
  });
}

flashjit_status flashjit_context_destroy(flashjit_context* ctx) {
  const char* const fn = __func__;
  return guarded(fn, [&]() -> flashjit_status {
    delete ctx;
    return FLASHJIT_SUCCESS;
  });
}

flashjit_status flashjit_forward(flashjit_context* ctx, const flashjit_problem* problem,
                                 const flashjit_tensor* q, const flashjit_tensor* k,
                                 const flashjit_tensor* v, flashjit_tensor* o, float* lse,
                                 void* stream, flashjit_compile_info* info) {
  const char* const fn = __func__;
  return guarded(fn, [&]() -> flashjit_status {
    reset_info(info);
    if (ctx == nullptr) return null_pointer(fn, "ctx");
    if (problem == nullptr) return null_pointer(fn, "problem");
    if (q == nullptr) return null_pointer(fn, "q");
    if (k == nullptr) return null_pointer(fn, "k");
    if (v == nullptr) return null_pointer(fn, "v");
    if (o == nullptr) return null_pointer(fn, "o");
    auto p = to_problem(*problem);
    if (!p) return fail(p.error());
    flashjit::ForwardArgs args;
    args.problem = *p;
    args.q = to_view(*q);
    args.k = to_view(*k);
    args.v = to_view(*v);
    args.o = to_view(*o);
    args.lse = lse;
    args.stream = stream;
    auto r = ctx->impl->forward(args);
    if (!r) return fail(r.error());
    fill_info(r->compile, info);
    return FLASHJIT_SUCCESS;
  });
}

namespace {

// The problem and tensors of backward and forward_backward, null-checked (the
// status names the argument) and converted.
flashjit_status to_backward_args(const char* fn, const flashjit_problem* problem,
                                 const flashjit_tensor* q, const flashjit_tensor* k,
                                 const flashjit_tensor* v, const flashjit_tensor* o,
                                 const flashjit_tensor* dout, const flashjit_tensor* dq,
                                 const flashjit_tensor* dk, const flashjit_tensor* dv,
                                 flashjit::BackwardArgs* out) {
  if (problem == nullptr) return null_pointer(fn, "problem");
  const std::pair<const flashjit_tensor*, const char*> tensors[] = {
      {q, "q"}, {k, "k"}, {v, "v"}, {o, "o"}, {dout, "dout"}, {dq, "dq"}, {dk, "dk"}, {dv, "dv"}};
  for (const auto& [t, name] : tensors) {
    if (t == nullptr) return null_pointer(fn, name);
  }
  auto p = to_problem(*problem);
  if (!p) return fail(p.error());
  out->problem = *p;
  out->q = to_view(*q);
  out->k = to_view(*k);
  out->v = to_view(*v);
  out->o = to_view(*o);
  out->dout = to_view(*dout);
  out->dq = to_view(*dq);
  out->dk = to_view(*dk);
  out->dv = to_view(*dv);
  return FLASHJIT_SUCCESS;
}

}  // namespace

flashjit_status flashjit_backward(flashjit_context* ctx, const flashjit_problem* problem,
                                  const flashjit_tensor* q, const flashjit_tensor* k,
                                  const flashjit_tensor* v, const flashjit_tensor* o,
                                  const flashjit_tensor* dout, const float* lse,
                                  flashjit_tensor* dq, flashjit_tensor* dk, flashjit_tensor* dv,
                                  void* workspace, size_t workspace_bytes, int deterministic,
                                  void* stream, flashjit_compile_info* info) {
  const char* const fn = __func__;
  return guarded(fn, [&]() -> flashjit_status {
    reset_info(info);
    if (ctx == nullptr) return null_pointer(fn, "ctx");
    flashjit::BackwardArgs args;
    const flashjit_status s = to_backward_args(fn, problem, q, k, v, o, dout, dq, dk, dv, &args);
    if (s != FLASHJIT_SUCCESS) return s;
    args.lse = lse;
    args.workspace = workspace;
    args.workspace_bytes = workspace_bytes;
    args.deterministic = deterministic != 0;
    args.stream = stream;
    auto r = ctx->impl->backward(args);
    if (!r) return fail(r.error());
    fill_info(r->compile, info);
    return FLASHJIT_SUCCESS;
  });
}

flashjit_status flashjit_forward_backward(flashjit_context* ctx, const flashjit_problem* problem,
                                          const flashjit_tensor* q, const flashjit_tensor* k,
                                          const flashjit_tensor* v, flashjit_tensor* o, float* lse,
                                          const flashjit_tensor* dout, flashjit_tensor* dq,
                                          flashjit_tensor* dk, flashjit_tensor* dv, void* workspace,
                                          size_t workspace_bytes, int deterministic, void* stream,
                                          flashjit_compile_info* fwd_info,
                                          flashjit_compile_info* bwd_info) {
  const char* const fn = __func__;
  return guarded(fn, [&]() -> flashjit_status {
    reset_info(fwd_info);
    reset_info(bwd_info);
    if (ctx == nullptr) return null_pointer(fn, "ctx");
    flashjit::BackwardArgs b;
    const flashjit_status s = to_backward_args(fn, problem, q, k, v, o, dout, dq, dk, dv, &b);
    if (s != FLASHJIT_SUCCESS) return s;
    if (lse == nullptr) return null_pointer(fn, "lse");
    flashjit::ForwardBackwardArgs args;
    args.problem = b.problem;
    args.q = b.q; args.k = b.k; args.v = b.v; args.o = b.o;
    args.lse = lse;
    args.dout = b.dout;
    args.dq = b.dq; args.dk = b.dk; args.dv = b.dv;
    args.workspace = workspace;
    args.workspace_bytes = workspace_bytes;
    args.deterministic = deterministic != 0;
    args.stream = stream;
    auto r = ctx->impl->forward_backward(args);
    if (!r) return fail(r.error());
    fill_info(r->forward.compile, fwd_info);
    fill_info(r->backward.compile, bwd_info);
    return FLASHJIT_SUCCESS;
  });
}

flashjit_status flashjit_backward_workspace_size(flashjit_context* ctx,
                                                 const flashjit_problem* problem,
                                                 int deterministic, size_t* out) {
  return size_of_problem(__func__, ctx, problem, out, [&](flashjit::Context& c, const flashjit::Problem& p) {
    return c.backward_workspace_size(p, deterministic != 0);
  });
}

flashjit_status flashjit_forward_scratch_size(flashjit_context* ctx, const flashjit_problem* problem,
                                              size_t* out) {
  return size_of_problem(__func__, ctx, problem, out,
                         [](flashjit::Context& c, const flashjit::Problem& p) { return c.forward_scratch_size(p); });
}

flashjit_status flashjit_spec_for(flashjit_context* ctx, const flashjit_problem* problem, int backward,
                                  int deterministic, char* spec, size_t spec_len) {
  const char* const fn = __func__;
  return guarded(fn, [&]() -> flashjit_status {
    if (ctx == nullptr) return null_pointer(fn, "ctx");
    if (problem == nullptr) return null_pointer(fn, "problem");
    if (spec == nullptr) return null_pointer(fn, "spec");
    if (spec_len > 0) spec[0] = '\0';
    auto p = to_problem(*problem);
    if (!p) return fail(p.error());
    auto r = ctx->impl->spec_for(*p, backward ? flashjit::Direction::kBwd : flashjit::Direction::kFwd,
                                 deterministic != 0);
    if (!r) return fail(r.error());
    const std::string text = r->to_string();
    if (text.size() + 1 > spec_len) {
      return fail(flashjit::make_error(flashjit::Status::kInvalidArgument,
                                       "spec_len " + std::to_string(spec_len) + " is too small for '" + text +
                                           "' (" + std::to_string(text.size() + 1) + " bytes)"));
    }
    std::memcpy(spec, text.c_str(), text.size() + 1);
    return FLASHJIT_SUCCESS;
  });
}

flashjit_status flashjit_compile(flashjit_context* ctx, const char* spec,
                                 flashjit_compile_info* info) {
  const char* const fn = __func__;
  return guarded(fn, [&]() -> flashjit_status {
    reset_info(info);
    if (ctx == nullptr) return null_pointer(fn, "ctx");
    if (spec == nullptr) return null_pointer(fn, "spec");
    auto parsed = flashjit::KernelSpec::parse(spec);
    if (!parsed) return fail(parsed.error());
    auto r = ctx->impl->compile(*parsed);
    if (!r) return fail(r.error());
    fill_info(*r, info);
    return FLASHJIT_SUCCESS;
  });
}

const char* flashjit_status_string(flashjit_status status) {
  // A C caller may pass any int; compare it as one.
  const int value = raw_enum(status);
  if (value < 0 || value > static_cast<int>(kLastStatus)) return "unknown status";
  return flashjit::status_name(static_cast<Status>(value));
}

const char* flashjit_last_error(void) { return t_last_error.c_str(); }

const char* flashjit_version(void) { return flashjit::version(); }

}  // extern "C"
