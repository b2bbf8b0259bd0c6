// Helpers of the GPU tests: host-side dtype conversion, random inputs, device
// buffers, and error norms against the float64 reference (bench/reference.h).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "compiler/spec.h"
#include "runtime/driver.h"

namespace flashjit::testing {

inline uint16_t f32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if (std::isnan(f)) return 0x7fc0;
  u += 0x7fff + ((u >> 16) & 1);  // round to nearest even
  return uint16_t(u >> 16);
}

inline float bf16_to_f32(uint16_t h) {
  uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline uint16_t f32_to_f16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000;
  const int exp = int((x >> 23) & 0xff) - 127 + 15;
  uint32_t mant = x & 0x7fffff;
  if (std::isnan(f)) return uint16_t(sign | 0x7e00);
  if (exp >= 31) return uint16_t(sign | 0x7c00);  // overflow -> inf
  if (exp <= 0) {                                 // subnormal or zero
    if (exp < -10) return uint16_t(sign);
    mant |= 0x800000;
    const int shift = 14 - exp;
    uint32_t half = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1), mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1))) ++half;
    return uint16_t(sign | half);
  }
  uint32_t half = sign | (uint32_t(exp) << 10) | (mant >> 13);
  const uint32_t rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (half & 1))) ++half;  // may carry into the exponent: correct
  return uint16_t(half);
}

inline float f16_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000) << 16;
  int exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  uint32_t u;
  if (exp == 0) {
    if (mant == 0) {
      u = sign;
    } else {  // subnormal: normalize
      exp = 1;
      while (!(mant & 0x400)) { mant <<= 1; --exp; }
      mant &= 0x3ff;
      u = sign | (uint32_t(exp - 15 + 127) << 23) | (mant << 13);
    }
  } else if (exp == 31) {
    u = sign | 0x7f800000 | (mant << 13);
  } else {
    u = sign | (uint32_t(exp - 15 + 127) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

/// Rounds to the nearest TF32 value (10 mantissa bits), so that the TF32
/// tensor cores multiply the reference's exact inputs.
inline float round_to_tf32(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  u = (u + 0x1000u) & ~0x1fffu;
  std::memcpy(&x, &u, sizeof u);
  return x;
}

/// `x` rounded to what `dtype` can hold (f32: unchanged).
inline float round_to(DType dtype, float x) {
  if (dtype == DType::kBF16) return bf16_to_f32(f32_to_bf16(x));
  if (dtype == DType::kF16) return f16_to_f32(f32_to_f16(x));
  return x;
}

/// Standard-normal values, rounded to what `dtype` can hold (so the reference
/// sees exactly the device's inputs).
inline std::vector<float> random_inputs(size_t n, DType dtype, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.f, 1.f);
  std::vector<float> v(n);
  for (float& x : v) x = round_to(dtype, dist(rng));
  return v;
}

/// The device bytes of `v` in `dtype`.
inline std::vector<char> encode(const std::vector<float>& v, DType dtype) {
  std::vector<char> out(v.size() * dtype_size(dtype));
  for (size_t i = 0; i < v.size(); ++i) {
    if (dtype == DType::kF32) {
      std::memcpy(&out[4 * i], &v[i], 4);
    } else {
      const uint16_t h = dtype == DType::kBF16 ? f32_to_bf16(v[i]) : f32_to_f16(v[i]);
      std::memcpy(&out[2 * i], &h, 2);
    }
  }
  return out;
}

inline std::vector<float> decode(const std::vector<char>& bytes, DType dtype) {
  const size_t n = bytes.size() / dtype_size(dtype);
  std::vector<float> out(n);
  for (size_t i = 0; i < n; ++i) {
    if (dtype == DType::kF32) {
      std::memcpy(&out[i], &bytes[4 * i], 4);
    } else {
      uint16_t h;
      std::memcpy(&h, &bytes[2 * i], 2);
      out[i] = dtype == DType::kBF16 ? bf16_to_f32(h) : f16_to_f32(h);
    }
  }
  return out;
}

/// Uploads `host` into a new device buffer; aborts the test on failure.
inline driver::DeviceBuffer upload(const std::vector<char>& host) {
  auto buf = driver::DeviceBuffer::create(host.size());
  if (!buf) throw std::runtime_error(buf.error().message);
  if (auto r = driver::memcpy_htod(buf->get(), host.data(), host.size()); !r) {
    throw std::runtime_error(r.error().message);
  }
  return std::move(buf.value());
}

/// A device buffer filled with 0xFF bytes: NaN in every float format, so an
/// element the kernel does not write stays NaN and fails the check.
inline driver::DeviceBuffer poisoned(size_t bytes) {
  auto buf = driver::DeviceBuffer::create(bytes);
  if (!buf) throw std::runtime_error(buf.error().message);
  if (auto r = driver::memset_d8_async(buf->get(), 0xFF, bytes, nullptr); !r) {
    throw std::runtime_error(r.error().message);
  }
  return std::move(buf.value());
}

inline std::vector<char> download(const driver::DeviceBuffer& buf) {
  std::vector<char> host(buf.bytes());
  if (auto r = driver::memcpy_dtoh(host.data(), buf.get(), host.size()); !r) {
    throw std::runtime_error(r.error().message);
  }
  return host;
}

/// Accumulates ||got - ref|| / ||ref|| and counts NaNs and -inf mismatches.
struct ErrorNorm {
  double diff2 = 0, ref2 = 0, max_abs = 0;
  long nan = 0, inf_mismatch = 0, count = 0;
  void add(double got, double ref) {
    ++count;
    if (std::isinf(ref) && ref < 0) {
      if (!(std::isinf(got) && got < 0)) ++inf_mismatch;
      return;
    }
    if (std::isnan(got) || std::isinf(got)) { ++nan; return; }
    diff2 += (got - ref) * (got - ref);
    ref2 += ref * ref;
    max_abs = std::max(max_abs, std::abs(got - ref));
  }
  /// For outputs whose exact value is zero (a gradient that cancels, e.g. dQ
  /// with one key), the error is measured against the magnitude of the terms
  /// that cancel instead: accumulated here, used by rel() when ref2 is 0.
  double magnitude2 = 0;
  void add_magnitude(double m) { magnitude2 += m * m; }
  double rel() const {
    if (ref2 > 0) return std::sqrt(diff2 / ref2);
    return magnitude2 > 0 ? std::sqrt(diff2 / magnitude2) : std::sqrt(diff2);
  }
};

/// The tolerance on ||out - ref|| / ||ref|| for a forward output of this math.
inline double forward_tolerance(DType dtype, Precision precision) {
  if (dtype != DType::kF32) return 1e-2;
  return precision == Precision::kTF32 ? 2e-3 : 1e-5;
}

/// The tolerance for the gradients.
inline double backward_tolerance(DType dtype, Precision precision) {
  if (dtype != DType::kF32) return 2e-2;
  return precision == Precision::kTF32 ? 5e-3 : 1e-5;
}

}  // namespace flashjit::testing
