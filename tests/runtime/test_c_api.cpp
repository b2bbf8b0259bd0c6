// The C API's error paths, all without a GPU: every argument is validated
// before any driver call, so each bad call returns its status and a message
// that names the argument and the value. Pointers here are fake device
// addresses; nothing is launched (the one test that would launch on a machine
// with a GPU skips itself there).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <regex>
#include <string>
#include <thread>

#include <unistd.h>

#include <unistd.h>

#include "compiler/status.h"
#include "runtime/driver.h"
#include "runtime/flashjit.h"
#include "runtime/flashjit_c.h"
#include "runtime/nvrtc.h"

namespace {

// Aligned fake device addresses (never dereferenced: validation fails first,
// or there is no driver).
void* fake_ptr(uintptr_t i) { return reinterpret_cast<void*>(uintptr_t{1} << 20 | i << 12); }

/// A valid bf16 problem with contiguous [B, S, H, D] tensors.
struct Case {
  flashjit_problem problem{};
  flashjit_tensor q{}, k{}, v{}, o{}, dout{}, dq{}, dk{}, dv{};
  float* lse = static_cast<float*>(fake_ptr(9));

  Case() {
    problem.dtype = FLASHJIT_DTYPE_BF16;
    problem.precision = FLASHJIT_PRECISION_NATIVE;
    problem.batch = 2;
    problem.heads = 4;
    problem.seqlen_q = 256;
    problem.seqlen_k = 256;
    problem.head_dim = 64;
    problem.causal = 0;
    problem.scale = 0.f;
    problem.seqlens_k = nullptr;
    flashjit_tensor* all[] = {&q, &k, &v, &o, &dout, &dq, &dk, &dv};
    uintptr_t i = 0;
    for (flashjit_tensor* t : all) *t = contiguous(fake_ptr(i++));
  }

  flashjit_tensor contiguous(void* data) const {
    const int64_t row = int64_t(problem.heads) * problem.head_dim;
    return flashjit_tensor{data, row * problem.seqlen_q, row, problem.head_dim};
  }
};

struct Ctx {
  flashjit_context* ctx = nullptr;
  Ctx() { REQUIRE(flashjit_context_create(0, &ctx) == FLASHJIT_SUCCESS); }
  ~Ctx() { flashjit_context_destroy(ctx); }
};

flashjit_status forward(flashjit_context* ctx, Case& c, flashjit_compile_info* info = nullptr) {
  return flashjit_forward(ctx, &c.problem, &c.q, &c.k, &c.v, &c.o, c.lse, nullptr, info);
}

flashjit_status backward(flashjit_context* ctx, Case& c, void* workspace = nullptr,
                         size_t workspace_bytes = 0) {
  return flashjit_backward(ctx, &c.problem, &c.q, &c.k, &c.v, &c.o, &c.dout, c.lse, &c.dq, &c.dk,
                           &c.dv, workspace, workspace_bytes, 0, nullptr, nullptr);
}

std::string last_error() { return flashjit_last_error(); }

/// True if `message` names `word` as a whole identifier ("q" in "q.data is
/// null", not in "seqlen_q").
bool names(const std::string& message, const std::string& word) {
  return std::regex_search(message, std::regex("(^|[^A-Za-z0-9_])" + word + "([^A-Za-z0-9_]|$)"));
}

}  // namespace

TEST_CASE("flashjit_status_string names every status and never returns null", "[c_api]") {
  for (int s = 0; s <= FLASHJIT_ERROR_INTERNAL; ++s) {
    const char* name = flashjit_status_string(static_cast<flashjit_status>(s));
    REQUIRE(name != nullptr);
    CHECK(std::string(name) == flashjit::status_name(static_cast<flashjit::Status>(s)));
    CHECK(std::string(name) != "unknown status");
  }
  CHECK(std::string(flashjit_status_string(FLASHJIT_SUCCESS)) == "ok");
  CHECK(std::string(flashjit_status_string(FLASHJIT_ERROR_NULL_POINTER)) == "null_pointer");
  CHECK(std::string(flashjit_status_string(FLASHJIT_ERROR_INTERNAL)) == "internal");
  for (int bad : {-1, FLASHJIT_ERROR_INTERNAL + 1, 1000, std::numeric_limits<int>::min()}) {
    CHECK(std::string(flashjit_status_string(static_cast<flashjit_status>(bad))) == "unknown status");
  }
}

TEST_CASE("flashjit_version matches the C++ version", "[c_api]") {
  REQUIRE(flashjit_version() != nullptr);
  CHECK(std::string(flashjit_version()) == flashjit::version());
  CHECK(std::string(flashjit_version()) == FLASHJIT_VERSION);
}

TEST_CASE("flashjit_context_create needs no GPU and checks its arguments", "[c_api]") {
  CHECK(flashjit_context_create(0, nullptr) == FLASHJIT_ERROR_NULL_POINTER);
  CHECK(names(last_error(), "out"));

  flashjit_context* ctx = reinterpret_cast<flashjit_context*>(0x1);
  CHECK(flashjit_context_create(-1, &ctx) == FLASHJIT_ERROR_INVALID_ARGUMENT);
  CHECK(ctx == nullptr);
  CHECK(names(last_error(), "device"));
  CHECK_THAT(last_error(), Catch::Contains("-1"));

  REQUIRE(flashjit_context_create(0, &ctx) == FLASHJIT_SUCCESS);
  CHECK(ctx != nullptr);
  CHECK(last_error().empty());
  CHECK(flashjit_context_destroy(ctx) == FLASHJIT_SUCCESS);
  CHECK(flashjit_context_destroy(nullptr) == FLASHJIT_SUCCESS);
}

TEST_CASE("null handles and struct pointers are NULL_POINTER naming the argument", "[c_api]") {
  Ctx h;
  Case c;
  flashjit_compile_info info;

  CHECK(flashjit_forward(nullptr, &c.problem, &c.q, &c.k, &c.v, &c.o, c.lse, nullptr, &info) ==
        FLASHJIT_ERROR_NULL_POINTER);
  CHECK(names(last_error(), "ctx"));
  CHECK(info.cache_outcome == -1);
  CHECK(info.spec[0] == '\0');

  auto check_forward = [&](const char* name, auto call) {
    INFO("forward, null " << name);
    CHECK(call() == FLASHJIT_ERROR_NULL_POINTER);
    CHECK(names(last_error(), name));
    CHECK_THAT(last_error(), Catch::Contains("flashjit_forward"));
  };
  check_forward("problem", [&] { return flashjit_forward(h.ctx, nullptr, &c.q, &c.k, &c.v, &c.o, c.lse, nullptr, nullptr); });
  check_forward("q", [&] { return flashjit_forward(h.ctx, &c.problem, nullptr, &c.k, &c.v, &c.o, c.lse, nullptr, nullptr); });
  check_forward("k", [&] { return flashjit_forward(h.ctx, &c.problem, &c.q, nullptr, &c.v, &c.o, c.lse, nullptr, nullptr); });
  check_forward("v", [&] { return flashjit_forward(h.ctx, &c.problem, &c.q, &c.k, nullptr, &c.o, c.lse, nullptr, nullptr); });
  check_forward("o", [&] { return flashjit_forward(h.ctx, &c.problem, &c.q, &c.k, &c.v, nullptr, c.lse, nullptr, nullptr); });

  auto check_backward = [&](const char* name, auto call) {
    INFO("backward, null " << name);
    CHECK(call() == FLASHJIT_ERROR_NULL_POINTER);
    CHECK(names(last_error(), name));
  };
  auto bwd = [&](flashjit_context* ctx, const flashjit_problem* p, const flashjit_tensor* q,
                 const flashjit_tensor* k, const flashjit_tensor* v, const flashjit_tensor* o,
                 const flashjit_tensor* dout, flashjit_tensor* dq, flashjit_tensor* dk,
                 flashjit_tensor* dv) {
    return flashjit_backward(ctx, p, q, k, v, o, dout, c.lse, dq, dk, dv, nullptr, 0, 0, nullptr,
                             nullptr);
  };
  check_backward("ctx", [&] { return bwd(nullptr, &c.problem, &c.q, &c.k, &c.v, &c.o, &c.dout, &c.dq, &c.dk, &c.dv); });
  check_backward("problem", [&] { return bwd(h.ctx, nullptr, &c.q, &c.k, &c.v, &c.o, &c.dout, &c.dq, &c.dk, &c.dv); });
  check_backward("q", [&] { return bwd(h.ctx, &c.problem, nullptr, &c.k, &c.v, &c.o, &c.dout, &c.dq, &c.dk, &c.dv); });
  check_backward("k", [&] { return bwd(h.ctx, &c.problem, &c.q, nullptr, &c.v, &c.o, &c.dout, &c.dq, &c.dk, &c.dv); });
  check_backward("v", [&] { return bwd(h.ctx, &c.problem, &c.q, &c.k, nullptr, &c.o, &c.dout, &c.dq, &c.dk, &c.dv); });
  check_backward("o", [&] { return bwd(h.ctx, &c.problem, &c.q, &c.k, &c.v, nullptr, &c.dout, &c.dq, &c.dk, &c.dv); });
  check_backward("dout", [&] { return bwd(h.ctx, &c.problem, &c.q, &c.k, &c.v, &c.o, nullptr, &c.dq, &c.dk, &c.dv); });
  check_backward("dq", [&] { return bwd(h.ctx, &c.problem, &c.q, &c.k, &c.v, &c.o, &c.dout, nullptr, &c.dk, &c.dv); });
  check_backward("dk", [&] { return bwd(h.ctx, &c.problem, &c.q, &c.k, &c.v, &c.o, &c.dout, &c.dq, nullptr, &c.dv); });
  check_backward("dv", [&] { return bwd(h.ctx, &c.problem, &c.q, &c.k, &c.v, &c.o, &c.dout, &c.dq, &c.dk, nullptr); });

  size_t bytes = 7;
  CHECK(flashjit_backward_workspace_size(nullptr, &c.problem, 0, &bytes) == FLASHJIT_ERROR_NULL_POINTER);
  CHECK(names(last_error(), "ctx"));
  CHECK(flashjit_backward_workspace_size(h.ctx, nullptr, 0, &bytes) == FLASHJIT_ERROR_NULL_POINTER);
  CHECK(names(last_error(), "problem"));
  CHECK(flashjit_backward_workspace_size(h.ctx, &c.problem, 0, nullptr) == FLASHJIT_ERROR_NULL_POINTER);
  CHECK(names(last_error(), "out"));
  CHECK(flashjit_forward_scratch_size(nullptr, &c.problem, &bytes) == FLASHJIT_ERROR_NULL_POINTER);
  CHECK(names(last_error(), "ctx"));
  CHECK(flashjit_forward_scratch_size(h.ctx, nullptr, &bytes) == FLASHJIT_ERROR_NULL_POINTER);
  CHECK(names(last_error(), "problem"));
  CHECK(flashjit_forward_scratch_size(h.ctx, &c.problem, nullptr) == FLASHJIT_ERROR_NULL_POINTER);
  CHECK(names(last_error(), "out"));

  CHECK(flashjit_compile(nullptr, "fwd_bf16_d64_noncausal_even_sm90", nullptr) == FLASHJIT_ERROR_NULL_POINTER);
  CHECK(names(last_error(), "ctx"));
  CHECK(flashjit_compile(h.ctx, nullptr, &info) == FLASHJIT_ERROR_NULL_POINTER);
  CHECK(names(last_error(), "spec"));
  CHECK(info.cache_outcome == -1);
}

TEST_CASE("null tensor data is NULL_POINTER naming the tensor", "[c_api]") {
  Ctx h;
  SECTION("forward") {
    const char* names_[] = {"q", "k", "v", "o"};
    for (int i = 0; i < 4; ++i) {
      Case c;
      flashjit_tensor* t[] = {&c.q, &c.k, &c.v, &c.o};
      t[i]->data = nullptr;
      INFO("null " << names_[i] << ".data");
      CHECK(forward(h.ctx, c) == FLASHJIT_ERROR_NULL_POINTER);
      CHECK(names(last_error(), names_[i]));
    }
  }
  SECTION("backward") {
    const char* names_[] = {"q", "k", "v", "o", "dout", "dq", "dk", "dv"};
    for (int i = 0; i < 8; ++i) {
      Case c;
      flashjit_tensor* t[] = {&c.q, &c.k, &c.v, &c.o, &c.dout, &c.dq, &c.dk, &c.dv};
      t[i]->data = nullptr;
      INFO("null " << names_[i] << ".data");
      CHECK(backward(h.ctx, c) == FLASHJIT_ERROR_NULL_POINTER);
      CHECK(names(last_error(), names_[i]));
    }
  }
  SECTION("backward without lse") {
    Case c;
    c.lse = nullptr;
    CHECK(backward(h.ctx, c) == FLASHJIT_ERROR_NULL_POINTER);
    CHECK(names(last_error(), "lse"));
  }
  SECTION("forward without lse is fine up to the driver") {
    if (flashjit::driver::available()) return;  // it would launch on fake pointers
    Case c;
    c.lse = nullptr;
    const flashjit_status s = forward(h.ctx, c);
    CHECK((s == FLASHJIT_ERROR_DRIVER_UNAVAILABLE || s == FLASHJIT_ERROR_NO_DEVICE));
  }
}

TEST_CASE("unsupported head_dim names the value and the supported list", "[c_api]") {
  Ctx h;
  for (int d : {80, 0, -64, 512, 48}) {
    Case c;
    c.problem.head_dim = d;
    INFO("head_dim " << d);
    CHECK(forward(h.ctx, c) == FLASHJIT_ERROR_UNSUPPORTED_HEAD_DIM);
    CHECK_THAT(last_error(), Catch::Contains(std::to_string(d)));
    CHECK_THAT(last_error(), Catch::Contains("32, 64, 96, 128, 256"));
    CHECK(names(last_error(), "head_dim"));
    CHECK(backward(h.ctx, c) == FLASHJIT_ERROR_UNSUPPORTED_HEAD_DIM);
    size_t bytes = 0;
    CHECK(flashjit_backward_workspace_size(h.ctx, &c.problem, 0, &bytes) ==
          FLASHJIT_ERROR_UNSUPPORTED_HEAD_DIM);
  }
}

TEST_CASE("zero or negative sizes are INVALID_SIZE naming the field and value", "[c_api]") {
  Ctx h;
  struct Bad {
    const char* field;
    int flashjit_problem::*member;
    int value;
  };
  const Bad cases[] = {
      {"batch", &flashjit_problem::batch, 0},        {"batch", &flashjit_problem::batch, -3},
      {"heads", &flashjit_problem::heads, 0},        {"heads", &flashjit_problem::heads, -1},
      {"seqlen_q", &flashjit_problem::seqlen_q, 0},  {"seqlen_q", &flashjit_problem::seqlen_q, -7},
      {"seqlen_k", &flashjit_problem::seqlen_k, 0},  {"seqlen_k", &flashjit_problem::seqlen_k, -5},
  };
  for (const Bad& b : cases) {
    Case c;
    c.problem.*b.member = b.value;
    INFO(b.field << " = " << b.value);
    CHECK(forward(h.ctx, c) == FLASHJIT_ERROR_INVALID_SIZE);
    CHECK(names(last_error(), b.field));
    CHECK_THAT(last_error(), Catch::Contains(std::to_string(b.value)));
    CHECK(backward(h.ctx, c) == FLASHJIT_ERROR_INVALID_SIZE);
    size_t bytes = 0;
    CHECK(flashjit_backward_workspace_size(h.ctx, &c.problem, 1, &bytes) == FLASHJIT_ERROR_INVALID_SIZE);
  }
}

TEST_CASE("strides that are not 16-byte multiples or overlap rows are UNSUPPORTED_STRIDE", "[c_api]") {
  Ctx h;
  SECTION("odd seq_stride of q") {
    Case c;
    c.q.seq_stride = 257;
    CHECK(forward(h.ctx, c) == FLASHJIT_ERROR_UNSUPPORTED_STRIDE);
    CHECK(names(last_error(), "q"));
    CHECK_THAT(last_error(), Catch::Contains("seq_stride") && Catch::Contains("257"));
  }
  SECTION("head_stride of k not a multiple of 8 bf16 elements") {
    Case c;
    c.k.head_stride = 68;
    CHECK(forward(h.ctx, c) == FLASHJIT_ERROR_UNSUPPORTED_STRIDE);
    CHECK(names(last_error(), "k"));
    CHECK_THAT(last_error(), Catch::Contains("head_stride") && Catch::Contains("68"));
  }
  SECTION("negative batch_stride of v") {
    Case c;
    c.v.batch_stride = -c.v.batch_stride;
    CHECK(forward(h.ctx, c) == FLASHJIT_ERROR_UNSUPPORTED_STRIDE);
    CHECK(names(last_error(), "v"));
  }
  SECTION("rows of o overlap (seq_stride < head_dim)") {
    Case c;
    c.o.seq_stride = 32;
    c.o.head_stride = 0;
    CHECK(forward(h.ctx, c) == FLASHJIT_ERROR_UNSUPPORTED_STRIDE);
    CHECK(names(last_error(), "o"));
  }
  SECTION("f32 strides must be multiples of 4 elements") {
    Case c;
    c.problem.dtype = FLASHJIT_DTYPE_F32;
    c.problem.precision = FLASHJIT_PRECISION_TF32;
    c.dq.seq_stride = 258;  // a multiple of 8 bytes, not of 16
    CHECK(backward(h.ctx, c) == FLASHJIT_ERROR_UNSUPPORTED_STRIDE);
    CHECK(names(last_error(), "dq"));
  }
}

TEST_CASE("misaligned pointers are MISALIGNED_POINTER naming the pointer", "[c_api]") {
  Ctx h;
  SECTION("q") {
    Case c;
    c.q.data = reinterpret_cast<void*>(0x1001);
    CHECK(forward(h.ctx, c) == FLASHJIT_ERROR_MISALIGNED_POINTER);
    CHECK(names(last_error(), "q"));
  }
  SECTION("8-byte aligned is not enough") {
    Case c;
    c.v.data = static_cast<char*>(c.v.data) + 8;
    CHECK(forward(h.ctx, c) == FLASHJIT_ERROR_MISALIGNED_POINTER);
    CHECK(names(last_error(), "v"));
  }
  SECTION("dk in backward") {
    Case c;
    c.dk.data = reinterpret_cast<void*>(0x1001);
    CHECK(backward(h.ctx, c) == FLASHJIT_ERROR_MISALIGNED_POINTER);
    CHECK(names(last_error(), "dk"));
  }
  SECTION("lse") {
    Case c;
    c.lse = reinterpret_cast<float*>(0x1002);
    CHECK(forward(h.ctx, c) == FLASHJIT_ERROR_MISALIGNED_POINTER);
    CHECK(names(last_error(), "lse"));
  }
  SECTION("seqlens_k") {
    Case c;
    c.problem.seqlens_k = reinterpret_cast<const int*>(0x1001);
    CHECK(forward(h.ctx, c) == FLASHJIT_ERROR_MISALIGNED_POINTER);
    CHECK(names(last_error(), "seqlens_k"));
  }
}

TEST_CASE("unsupported dtype / precision combinations are UNSUPPORTED_DTYPE", "[c_api]") {
  Ctx h;
  SECTION("bf16 with ieee") {
    Case c;
    c.problem.precision = FLASHJIT_PRECISION_IEEE;
    CHECK(forward(h.ctx, c) == FLASHJIT_ERROR_UNSUPPORTED_DTYPE);
    CHECK_THAT(last_error(), Catch::Contains("ieee") && Catch::Contains("bf16"));
  }
  SECTION("f16 with tf32") {
    Case c;
    c.problem.dtype = FLASHJIT_DTYPE_F16;
    c.problem.precision = FLASHJIT_PRECISION_TF32;
    CHECK(backward(h.ctx, c) == FLASHJIT_ERROR_UNSUPPORTED_DTYPE);
    CHECK_THAT(last_error(), Catch::Contains("tf32"));
  }
  SECTION("a dtype value outside the enum") {
    Case c;
    int bad = 7;
    std::memcpy(&c.problem.dtype, &bad, sizeof bad);
    CHECK(forward(h.ctx, c) == FLASHJIT_ERROR_UNSUPPORTED_DTYPE);
    CHECK(names(last_error(), "dtype"));
    CHECK_THAT(last_error(), Catch::Contains("7"));
  }
  SECTION("a precision value outside the enum") {
    Case c;
    int bad = -2;
    std::memcpy(&c.problem.precision, &bad, sizeof bad);
    size_t bytes = 0;
    CHECK(flashjit_backward_workspace_size(h.ctx, &c.problem, 0, &bytes) ==
          FLASHJIT_ERROR_UNSUPPORTED_DTYPE);
    CHECK(names(last_error(), "precision"));
    CHECK_THAT(last_error(), Catch::Contains("-2"));
  }
}

TEST_CASE("a scale that is not finite and >= 0 is INVALID_ARGUMENT", "[c_api]") {
  Ctx h;
  for (float s : {std::nanf(""), -0.5f, std::numeric_limits<float>::infinity()}) {
    Case c;
    c.problem.scale = s;
    INFO("scale " << s);
    CHECK(forward(h.ctx, c) == FLASHJIT_ERROR_INVALID_ARGUMENT);
    CHECK(names(last_error(), "scale"));
  }
}

TEST_CASE("backward checks the workspace before any driver call", "[c_api]") {
  Ctx h;
  Case c;
  size_t need = 0;
  // Workspace size depends only on the problem and the tile policy: no GPU.
  REQUIRE(flashjit_backward_workspace_size(h.ctx, &c.problem, 0, &need) == FLASHJIT_SUCCESS);
  if (need > 0) {
    CHECK(backward(h.ctx, c, nullptr, 0) == FLASHJIT_ERROR_NULL_POINTER);
    CHECK(names(last_error(), "workspace"));
    CHECK(backward(h.ctx, c, fake_ptr(20), need - 1) == FLASHJIT_ERROR_INVALID_ARGUMENT);
    CHECK(names(last_error(), "workspace_bytes"));
    CHECK_THAT(last_error(), Catch::Contains(std::to_string(need)));
    CHECK(backward(h.ctx, c, static_cast<char*>(fake_ptr(20)) + 4, need) ==
          FLASHJIT_ERROR_MISALIGNED_POINTER);
    CHECK(names(last_error(), "workspace"));
  }
  size_t need_det = 0;
  REQUIRE(flashjit_backward_workspace_size(h.ctx, &c.problem, 1, &need_det) == FLASHJIT_SUCCESS);
}

TEST_CASE("flashjit_last_error is per thread and cleared by a success", "[c_api]") {
  Ctx h;
  Case c;
  c.problem.head_dim = 80;
  REQUIRE(forward(h.ctx, c) == FLASHJIT_ERROR_UNSUPPORTED_HEAD_DIM);
  const std::string mine = last_error();
  REQUIRE_THAT(mine, Catch::Contains("80"));

  std::string other_before, other_after;
  flashjit_status other_status = FLASHJIT_SUCCESS;
  std::thread t([&] {
    other_before = flashjit_last_error();
    Case c2;
    c2.problem.batch = 0;
    other_status = forward(h.ctx, c2);
    other_after = flashjit_last_error();
  });
  t.join();
  CHECK(other_before.empty());
  CHECK(other_status == FLASHJIT_ERROR_INVALID_SIZE);
  CHECK_THAT(other_after, Catch::Contains("batch"));
  // The other thread's failure left this thread's message alone.
  CHECK(last_error() == mine);

  // Reading the message or a status name does not clear it; a successful call does.
  (void)flashjit_status_string(FLASHJIT_SUCCESS);
  CHECK(last_error() == mine);
  size_t bytes = 0;
  Case ok;
  REQUIRE(flashjit_backward_workspace_size(h.ctx, &ok.problem, 0, &bytes) == FLASHJIT_SUCCESS);
  CHECK(last_error().empty());
}

TEST_CASE("forward with valid arguments and no GPU is DRIVER_UNAVAILABLE or NO_DEVICE", "[c_api]") {
  if (flashjit::driver::available()) {
    WARN("a GPU is present: this test would launch on fake pointers; skipped");
    return;
  }
  Ctx h;
  Case c;
  flashjit_compile_info info;
  const flashjit_status s = forward(h.ctx, c, &info);
  INFO(last_error());
  CHECK((s == FLASHJIT_ERROR_DRIVER_UNAVAILABLE || s == FLASHJIT_ERROR_NO_DEVICE));
  CHECK_FALSE(last_error().empty());
  CHECK(info.cache_outcome == -1);
  Case b;
  b.problem.causal = 1;
  b.problem.seqlen_q = 1500;
  b.problem.seqlen_k = 600;
  // Strides follow the new lengths (outputs may not alias).
  b.q = b.o = b.dout = b.dq = {};
  for (flashjit_tensor* t : {&b.q, &b.o, &b.dout, &b.dq}) {
    *t = flashjit_tensor{fake_ptr(40), int64_t(b.problem.heads) * 64 * 1500, int64_t(b.problem.heads) * 64, 64};
  }
  for (flashjit_tensor* t : {&b.k, &b.v, &b.dk, &b.dv}) {
    *t = flashjit_tensor{fake_ptr(50), int64_t(b.problem.heads) * 64 * 600, int64_t(b.problem.heads) * 64, 64};
  }
  size_t need = 0;
  REQUIRE(flashjit_backward_workspace_size(h.ctx, &b.problem, 0, &need) == FLASHJIT_SUCCESS);
  const flashjit_status sb = backward(h.ctx, b, need ? fake_ptr(30) : nullptr, need);
  INFO(last_error());
  CHECK((sb == FLASHJIT_ERROR_DRIVER_UNAVAILABLE || sb == FLASHJIT_ERROR_NO_DEVICE));
}

TEST_CASE("flashjit_compile of a bad spec string is INVALID_SPEC naming the string", "[c_api]") {
  Ctx h;
  flashjit_compile_info info;
  for (const char* bad : {"", "nonsense", "fwd_bf16", "fwd_bf16_d128_noncausal_even_sm70",
                          "fwd_bf16_d128_noncausal_even_sm90_bm128", "side_bf16_d128_causal_even_sm90"}) {
    INFO("spec '" << bad << "'");
    CHECK(flashjit_compile(h.ctx, bad, &info) == FLASHJIT_ERROR_INVALID_SPEC);
    CHECK_THAT(last_error(), Catch::Contains(std::string("'") + bad + "'"));
    CHECK(info.cache_outcome == -1);
    CHECK(info.spec[0] == '\0');
  }
  // A well-formed string with an unsupported field gets that field's status.
  CHECK(flashjit_compile(h.ctx, "fwd_bf16_d80_noncausal_even_sm90", &info) ==
        FLASHJIT_ERROR_UNSUPPORTED_HEAD_DIM);
  CHECK_THAT(last_error(), Catch::Contains("80"));
}

TEST_CASE("flashjit_compile warms the disk cache without a GPU", "[c_api][nvrtc]") {
  if (!flashjit::nvrtc::available()) {
    WARN("NVRTC is not available: skipped");
    return;
  }
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("flashjit_c_api_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const char* old = std::getenv("FLASHJIT_CACHE_DIR");
  const std::string saved = old ? old : "";
  ::setenv("FLASHJIT_CACHE_DIR", dir.c_str(), 1);

  const char* spec = "fwd_bf16_d64_causal_padded_sm80";
  flashjit_compile_info info;
  {
    Ctx h;
    REQUIRE(flashjit_compile(h.ctx, spec, &info) == FLASHJIT_SUCCESS);
    CHECK(last_error().empty());
    CHECK(info.cache_outcome == FLASHJIT_CACHE_COMPILED);
    CHECK_THAT(std::string(info.spec), Catch::StartsWith(spec));
    CHECK(info.nvrtc_s > 0);
    CHECK(info.compile_s >= info.nvrtc_s);
    CHECK(info.load_s == 0);

    REQUIRE(flashjit_compile(h.ctx, spec, &info) == FLASHJIT_SUCCESS);
    CHECK(info.cache_outcome == FLASHJIT_CACHE_MEMORY_HIT);
  }
  {
    Ctx h;  // a new context finds the entry on disk
    REQUIRE(flashjit_compile(h.ctx, spec, &info) == FLASHJIT_SUCCESS);
    CHECK(info.cache_outcome == FLASHJIT_CACHE_DISK_HIT);
    CHECK(info.nvrtc_s == 0);
  }

  if (old) ::setenv("FLASHJIT_CACHE_DIR", saved.c_str(), 1);
  else ::unsetenv("FLASHJIT_CACHE_DIR");
  fs::remove_all(dir);
}

TEST_CASE("outputs whose heads or batches overlap are UNSUPPORTED_STRIDE", "[c_api]") {
  Ctx h;
  Case c;
  c.o.head_stride = 8;  // head h+1 starts inside head h's 64 elements
  CHECK(forward(h.ctx, c) == FLASHJIT_ERROR_UNSUPPORTED_STRIDE);
  CHECK_THAT(last_error(), Catch::Contains("o.head_stride"));
  Case d;
  d.dk.batch_stride = d.dk.seq_stride * 8;  // batch b+1 starts inside batch b's 256 rows
  CHECK(backward(h.ctx, d, fake_ptr(30), size_t(1) << 30) == FLASHJIT_ERROR_UNSUPPORTED_STRIDE);
  CHECK_THAT(last_error(), Catch::Contains("dk.batch_stride"));
  // Overlapping reads are harmless: inputs are not held to the rule.
  Case e;
  e.q.head_stride = 8;
  CHECK(forward(h.ctx, e) != FLASHJIT_ERROR_UNSUPPORTED_STRIDE);
}

namespace {
struct CallbackLog {
  std::vector<std::string> warnings;
  std::vector<std::string> compiled;
};
}  // namespace

TEST_CASE("context_create_ex: cache dir, arch, callbacks, bad options", "[c_api][nvrtc]") {
  flashjit_context* ctx = nullptr;
  CHECK(flashjit_context_create_ex(nullptr, &ctx) == FLASHJIT_ERROR_NULL_POINTER);
  CHECK_THAT(last_error(), Catch::Contains("options"));
  flashjit_context_options o{};
  CHECK(flashjit_context_create_ex(&o, nullptr) == FLASHJIT_ERROR_NULL_POINTER);
  o.arch = "sm75";
  CHECK(flashjit_context_create_ex(&o, &ctx) == FLASHJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(last_error(), Catch::Contains("sm75"));
  CHECK(ctx == nullptr);
  o.arch = "sm90";
  o.fwd_tile = "bm128_bn128";
  CHECK(flashjit_context_create_ex(&o, &ctx) == FLASHJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(last_error(), Catch::Contains("fwd_tile"));
  CHECK(ctx == nullptr);
  o.fwd_tile = nullptr;
  o.fwd_schedule = "static";
  CHECK(flashjit_context_create_ex(&o, &ctx) == FLASHJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(last_error(), Catch::Contains("fwd_schedule"));
  CHECK_THAT(last_error(), Catch::Contains("persistent, dynamic, tiles or streamk"));
  CHECK(ctx == nullptr);
  o.fwd_schedule = "dynamic";
  REQUIRE(flashjit_context_create_ex(&o, &ctx) == FLASHJIT_SUCCESS);
  flashjit_context_destroy(ctx);
  ctx = nullptr;
  o.fwd_schedule = nullptr;

  // The Hopper forward on sm90, mma.sync when forced, a tuned tile when asked.
  flashjit_problem prob{};
  prob.dtype = FLASHJIT_DTYPE_BF16;
  prob.batch = 1;
  prob.heads = 1;
  prob.seqlen_q = prob.seqlen_k = 512;
  prob.head_dim = 128;
  char spec[160];
  o.fwd_tile = nullptr;
  REQUIRE(flashjit_context_create_ex(&o, &ctx) == FLASHJIT_SUCCESS);
  REQUIRE(flashjit_spec_for(ctx, &prob, 0, 0, spec, sizeof(spec)) == FLASHJIT_SUCCESS);
  CHECK(std::string(spec) == "fwd_bf16_d128_noncausal_even_sm90a_bm128_bn128_w12_s2_wg");
  CHECK(flashjit_spec_for(ctx, &prob, 0, 0, spec, 8) == FLASHJIT_ERROR_INVALID_ARGUMENT);
  CHECK_THAT(last_error(), Catch::Contains("too small"));
  REQUIRE(flashjit_spec_for(ctx, &prob, 1, 1, spec, sizeof(spec)) == FLASHJIT_SUCCESS);
  CHECK(std::string(spec).rfind("bwd_bf16_d128_noncausal_even_sm90_det_", 0) == 0);
  flashjit_context_destroy(ctx);
  o.force_mma = 1;
  REQUIRE(flashjit_context_create_ex(&o, &ctx) == FLASHJIT_SUCCESS);
  REQUIRE(flashjit_spec_for(ctx, &prob, 0, 0, spec, sizeof(spec)) == FLASHJIT_SUCCESS);
  CHECK(std::string(spec).rfind("fwd_bf16_d128_noncausal_even_sm90_bm", 0) == 0);
  flashjit_context_destroy(ctx);
  o.force_mma = 0;
  o.fwd_tile = "bm128_bn128_w12_s3_wg";
  REQUIRE(flashjit_context_create_ex(&o, &ctx) == FLASHJIT_SUCCESS);
  REQUIRE(flashjit_spec_for(ctx, &prob, 0, 0, spec, sizeof(spec)) == FLASHJIT_SUCCESS);
  CHECK(std::string(spec) == "fwd_bf16_d128_noncausal_even_sm90a_bm128_bn128_w12_s3_wg");
  flashjit_context_destroy(ctx);
  ctx = nullptr;
  o.fwd_tile = nullptr;

  // A cache "directory" under a regular file cannot be created: the compile
  // still succeeds, and the warning reaches the C callback.
  char dir_template[] = "/tmp/flashjit-capi-XXXXXX";
  const std::string dir = mkdtemp(dir_template);
  const std::string file = dir + "/file";
  FILE* f = std::fopen(file.c_str(), "w");
  REQUIRE(f != nullptr);
  std::fclose(f);
  const std::string bad_dir = file + "/cache";
  CallbackLog log;
  o.arch = "sm86";
  o.cache_dir = bad_dir.c_str();
  o.user_data = &log;
  o.on_warning = [](const char* m, void* user) { static_cast<CallbackLog*>(user)->warnings.push_back(m); };
  o.on_compile = [](const flashjit_compile_info* i, void* user) {
    static_cast<CallbackLog*>(user)->compiled.push_back(i->spec);
  };
  REQUIRE(flashjit_context_create_ex(&o, &ctx) == FLASHJIT_SUCCESS);
  flashjit_compile_info info;
  REQUIRE(flashjit_compile(ctx, "fwd_bf16_d32_noncausal_even_sm86", &info) == FLASHJIT_SUCCESS);
  CHECK(info.cache_outcome == FLASHJIT_CACHE_COMPILED);
  REQUIRE(log.compiled.size() == 1);
  CHECK(log.compiled[0].rfind("fwd_bf16_d32_noncausal_even_sm86", 0) == 0);
  REQUIRE(log.warnings.size() == 1);
  CHECK_THAT(log.warnings[0], Catch::Contains(bad_dir));
  flashjit_context_destroy(ctx);
  std::remove(file.c_str());
  rmdir(dir.c_str());
}

TEST_CASE("forward_backward checks every argument before any driver call", "[c_api]") {
  Ctx h;
  Case c;
  size_t need = 0;
  REQUIRE(flashjit_backward_workspace_size(h.ctx, &c.problem, 0, &need) == FLASHJIT_SUCCESS);
  void* ws = need ? fake_ptr(20) : nullptr;
  auto call = [&](Case& x, float* lse, void* w, size_t bytes) {
    return flashjit_forward_backward(h.ctx, &x.problem, &x.q, &x.k, &x.v, &x.o, lse, &x.dout, &x.dq,
                                     &x.dk, &x.dv, w, bytes, 0, nullptr, nullptr, nullptr);
  };
  CHECK(call(c, nullptr, ws, need) == FLASHJIT_ERROR_NULL_POINTER);
  CHECK(names(last_error(), "lse"));
  CHECK(flashjit_forward_backward(h.ctx, &c.problem, &c.q, &c.k, &c.v, &c.o, c.lse, nullptr, &c.dq,
                                  &c.dk, &c.dv, ws, need, 0, nullptr, nullptr, nullptr) ==
        FLASHJIT_ERROR_NULL_POINTER);
  CHECK(names(last_error(), "dout"));
  if (need > 0) {
    // A backward-only argument fails the call before the forward runs.
    CHECK(call(c, c.lse, ws, need - 1) == FLASHJIT_ERROR_INVALID_ARGUMENT);
    CHECK(names(last_error(), "workspace_bytes"));
  }
  Case alias;
  alias.o = alias.dq;
  CHECK(call(alias, alias.lse, ws, need) != FLASHJIT_SUCCESS);
  CHECK_FALSE(last_error().empty());
  Case bad;
  bad.problem.head_dim = 80;
  CHECK(call(bad, bad.lse, ws, need) == FLASHJIT_ERROR_UNSUPPORTED_HEAD_DIM);
  if (!flashjit::driver::available()) {
    const flashjit_status s = call(c, c.lse, ws, need);
    INFO(last_error());
    CHECK((s == FLASHJIT_ERROR_DRIVER_UNAVAILABLE || s == FLASHJIT_ERROR_NO_DEVICE));
  }
}
