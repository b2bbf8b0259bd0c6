// The README's API example, compiled and run (keep the two in sync).
#include <catch2/catch.hpp>

#include <cstdio>

#include "runtime/driver.h"
#include "runtime/flashjit.h"

namespace {

int readme_example(void* q, void* k, void* v, void* o, float* lse, void* stream) {
  auto fail = [](const std::string& m) { std::fprintf(stderr, "%s\n", m.c_str()); return 1; };
  // --- README begins ---
  auto ctx = flashjit::Context::create();            // Result<unique_ptr<Context>>
  if (!ctx) return fail(ctx.error().message);
  flashjit::Problem p{.dtype = flashjit::DType::kBF16, .batch = 4, .heads = 8,
                      .seqlen_q = 1500, .seqlen_k = 600, .head_dim = 128, .causal = true};
  flashjit::ForwardArgs fwd{.problem = p,
                            .q = flashjit::bshd(q, 4, 1500, 8, 128), .k = flashjit::bshd(k, 4, 600, 8, 128),
                            .v = flashjit::bshd(v, 4, 600, 8, 128), .o = flashjit::bshd(o, 4, 1500, 8, 128),
                            .lse = lse, .stream = stream};
  auto info = (*ctx)->forward(fwd);                   // Result<LaunchInfo>
  if (!info) return fail(info.error().message);       // status + message naming the argument
  printf("%s compile_s=%.3f (%s)\n", info->spec.to_string().c_str(), info->compile.compile_s,
         flashjit::to_string(info->compile.outcome));
  // --- README ends ---
  return 0;
}

}  // namespace

TEST_CASE("the README example runs", "[gpu][readme]") {
  using flashjit::driver::DeviceBuffer;
  const size_t q_bytes = size_t(4) * 1500 * 8 * 128 * 2, k_bytes = size_t(4) * 600 * 8 * 128 * 2;
  auto q = DeviceBuffer::create(q_bytes), o = DeviceBuffer::create(q_bytes);
  auto k = DeviceBuffer::create(k_bytes), v = DeviceBuffer::create(k_bytes);
  auto lse = DeviceBuffer::create(size_t(4) * 8 * 1500 * 4);
  REQUIRE((q && o && k && v && lse));
  // Inputs: any finite bytes will do for this smoke test; 0x3C3C is bf16 0.0115.
  for (auto* b : {&q.value(), &k.value(), &v.value()}) {
    REQUIRE(flashjit::driver::memset_d8_async(b->get(), 0x3C, b->bytes(), nullptr).ok());
  }
  CHECK(readme_example(q->ptr(), k->ptr(), v->ptr(), o->ptr(), static_cast<float*>(lse->ptr()), nullptr) == 0);
  REQUIRE(flashjit::driver::context_synchronize().ok());
}
