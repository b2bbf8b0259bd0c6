// Errors are values: every fallible stage returns a Status code plus a message
// that names the argument, the value and, where there is one, the spec string.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace flashjit {

/// Status codes; the numeric values are the C API's (flashjit_c.h) and never change.
enum class Status : int {
  kOk = 0,
  kNullPointer = 1,          ///< a required pointer argument is null
  kUnsupportedDType = 2,     ///< dtype / precision combination not supported
  kUnsupportedHeadDim = 3,   ///< head_dim not in the supported list
  kInvalidSize = 4,          ///< batch, heads or a sequence length is zero or negative
  kUnsupportedStride = 5,    ///< the last dimension is not contiguous, or a stride is not a multiple of the vector width
  kMisalignedPointer = 6,    ///< a tensor pointer is not aligned to 16 bytes
  kInvalidSpec = 7,          ///< a spec string does not parse, or a spec field is out of range
  kUnsupportedArch = 8,      ///< the GPU architecture is not supported by the requested kernel
  kInvalidArgument = 9,      ///< any other bad argument (scale, workspace size, flags)
  kDriverUnavailable = 10,   ///< libcuda.so.1 could not be loaded
  kNoDevice = 11,            ///< the driver loaded but there is no usable GPU
  kNvrtcUnavailable = 12,    ///< libnvrtc could not be found or loaded (needed only on a cache miss)
  kCompileFailed = 13,       ///< NVRTC rejected the generated source; the message carries the log
  kCudaError = 14,           ///< a CUDA driver call failed (module load, launch, memory)
  kCacheError = 15,          ///< the disk cache could not be used (never fatal for kernels)
  kOutOfMemory = 16,         ///< a device allocation failed
  kInternal = 17,            ///< a bug in flashjit
};

/// A short, stable name for a status ("null_pointer"); never null.
const char* status_name(Status s);

/// An error: a code and a human-readable message.
struct Error {
  Status status = Status::kInternal;
  std::string message;
};

/// A value or an error (C++17 stand-in for std::expected).
template <typename T>
class Result {
 public:
  Result(T value) : v_(std::move(value)) {}            // NOLINT(google-explicit-constructor)
  Result(Error error) : v_(std::move(error)) {}        // NOLINT(google-explicit-constructor)
  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  const Error& error() const { return std::get<1>(v_); }
  Status status() const { return ok() ? Status::kOk : error().status; }

 private:
  std::variant<T, Error> v_;
};

/// Result<void>: success or an error.
template <>
class Result<void> {
 public:
  Result() = default;
  Result(Error error) : err_(std::move(error)), ok_(false) {}  // NOLINT(google-explicit-constructor)
  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error& error() const { return err_; }
  Status status() const { return ok_ ? Status::kOk : err_.status; }

 private:
  Error err_;
  bool ok_ = true;
};

inline Error make_error(Status s, std::string message) { return Error{s, std::move(message)}; }

}  // namespace flashjit
