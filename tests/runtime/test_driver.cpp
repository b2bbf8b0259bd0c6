// The CUDA driver loader. The first cases hold on any machine: without a
// driver every call is an error value (never a crash or a print). Cases tagged
// [gpu] need a device and skip with a warning when there is none.
#include <catch2/catch.hpp>
#include <cstring>
#include <string>
#include <vector>

#include "runtime/driver.h"
#include "runtime/nvrtc.h"

using namespace flashjit;

namespace {

// The error message of a failed result, for INFO.
template <typename T>
std::string error_text(const Result<T>& r) {
  return r.ok() ? std::string() : r.error().message;
}

bool is_no_gpu_status(Status s) {
  return s == Status::kDriverUnavailable || s == Status::kNoDevice;
}

// Skips the rest of a [gpu] case on a machine without a usable GPU.
#define SKIP_WITHOUT_GPU()                       \
  do {                                           \
    if (!driver::available()) {                  \
      WARN("no CUDA driver or device: skipped"); \
      return;                                    \
    }                                            \
    REQUIRE(driver::init(0).ok());               \
  } while (false)

const char* const kScaleKernel = R"(
extern "C" __global__ void scale(float* out, const float* in, float factor, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = factor * in[i];
}
)";

std::string arch_of(const driver::DeviceInfo& info) {
  return "sm_" + std::to_string(info.cc_major) + std::to_string(info.cc_minor);
}

}  // namespace

TEST_CASE("driver availability never crashes", "[driver]") {
  const bool first = driver::available();
  CHECK(driver::available() == first);  // the answer is stable
  Result<void> r = driver::init(0);
  if (first) {
    CHECK(r.ok());
    return;
  }
  REQUIRE_FALSE(r.ok());
  CHECK(is_no_gpu_status(r.status()));
  CHECK_FALSE(r.error().message.empty());
}

TEST_CASE("without a driver the error says what was tried and why it matters", "[driver]") {
  Result<void> r = driver::init(0);
  if (r.ok() || r.status() != Status::kDriverUnavailable) return;  // a driver is installed
  const std::string& message = r.error().message;
  INFO(message);
  CHECK(message.find("libcuda.so.1") != std::string::npos);
  CHECK(message.find("libcuda.so:") != std::string::npos);
  CHECK(message.find("GPU driver is needed to run kernels") != std::string::npos);
}

TEST_CASE("driver calls without a GPU return errors", "[driver]") {
  if (driver::available()) return;  // covered by the [gpu] cases

  Result<driver::DevicePtr> p = driver::mem_alloc(1024);
  REQUIRE_FALSE(p.ok());
  CHECK(is_no_gpu_status(p.status()));
  CHECK_FALSE(p.error().message.empty());

  Result<driver::DeviceBuffer> buffer = driver::DeviceBuffer::create(1024);
  CHECK_FALSE(buffer.ok());
  CHECK_FALSE(driver::device_info(0).ok());
  CHECK_FALSE(driver::current_device().ok());
  CHECK_FALSE(driver::mem_info().ok());
  CHECK_FALSE(driver::stream_create().ok());
  CHECK_FALSE(driver::event_create().ok());
  CHECK_FALSE(driver::context_synchronize().ok());
  CHECK_FALSE(driver::Module::load({'\x7f', 'E', 'L', 'F'}).ok());
  int host = 0;
  CHECK_FALSE(driver::memcpy_htod(0, &host, sizeof(host)).ok());

  // Cleanup calls are no-ops.
  driver::mem_free(0x1000);
  driver::stream_destroy(reinterpret_cast<driver::Stream>(0x1000));
  driver::event_destroy(reinterpret_cast<driver::Event>(0x1000));
  driver::graph_destroy(reinterpret_cast<driver::Graph>(0x1000));
}

TEST_CASE("driver argument checks come before the driver", "[driver]") {
  Result<driver::DevicePtr> zero = driver::mem_alloc(0);
  REQUIRE_FALSE(zero.ok());
  CHECK(zero.status() == Status::kInvalidArgument);

  Result<driver::DeviceBuffer> empty = driver::DeviceBuffer::create(0);
  REQUIRE(empty.ok());
  CHECK(empty->get() == 0);

  CHECK(driver::Module::load({}).status() == Status::kInvalidArgument);
  CHECK(driver::launch(driver::Function{}, {}, {}, 0, nullptr, nullptr).status() ==
        Status::kNullPointer);
  CHECK(driver::set_max_dynamic_smem(driver::Function{}, 1024).status() == Status::kNullPointer);
  driver::Module unloaded;
  CHECK(unloaded.function("k").status() == Status::kInvalidArgument);
  CHECK(unloaded.function(nullptr).status() == Status::kNullPointer);
}

TEST_CASE("device info and init on a GPU", "[driver][gpu]") {
  SKIP_WITHOUT_GPU();
  Result<int> current = driver::current_device();
  REQUIRE(current.ok());
  CHECK(*current == 0);

  Result<driver::DeviceInfo> info = driver::device_info(0);
  REQUIRE(info.ok());
  CHECK_FALSE(info->name.empty());
  CHECK(info->cc_major >= 7);
  CHECK(info->sm_count > 0);
  CHECK(info->l2_bytes > 0);
  CHECK(info->max_smem_per_block_optin >= 48 * 1024);
  CHECK(info->total_mem > 0);
  CHECK(info->driver_version >= 12000);

  Result<void> bad = driver::init(1 << 20);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status() == Status::kInvalidArgument);
  CHECK(bad.error().message.find(std::to_string(1 << 20)) != std::string::npos);
  CHECK(driver::init(-1).status() == Status::kInvalidArgument);
}

TEST_CASE("memory round trip, memset and out-of-memory on a GPU", "[driver][gpu]") {
  SKIP_WITHOUT_GPU();
  Result<std::pair<size_t, size_t>> mem = driver::mem_info();
  REQUIRE(mem.ok());
  CHECK(mem->first <= mem->second);

  const std::vector<unsigned> host = {1, 2, 3, 4, 5, 6, 7, 8};
  const size_t bytes = host.size() * sizeof(unsigned);
  Result<driver::DeviceBuffer> a = driver::DeviceBuffer::create(bytes);
  Result<driver::DeviceBuffer> b = driver::DeviceBuffer::create(bytes);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  REQUIRE(driver::memcpy_htod(a->get(), host.data(), bytes).ok());
  REQUIRE(driver::memcpy_dtod_async(b->get(), a->get(), bytes, nullptr).ok());
  REQUIRE(driver::stream_synchronize(nullptr).ok());
  std::vector<unsigned> back(host.size());
  REQUIRE(driver::memcpy_dtoh(back.data(), b->get(), bytes).ok());
  CHECK(back == host);

  REQUIRE(driver::memset_d32_async(b->get(), 0xdeadbeefu, host.size(), nullptr).ok());
  REQUIRE(driver::memset_d8_async(b->get(), 0x11, 4, nullptr).ok());
  REQUIRE(driver::context_synchronize().ok());
  REQUIRE(driver::memcpy_dtoh(back.data(), b->get(), bytes).ok());
  CHECK(back[0] == 0x11111111u);
  CHECK(back[1] == 0xdeadbeefu);

  Result<driver::DevicePtr> huge = driver::mem_alloc(size_t{1} << 50);  // 1 PiB
  REQUIRE_FALSE(huge.ok());
  CHECK(huge.status() == Status::kOutOfMemory);
  CHECK(huge.error().message.find("CUDA_ERROR_OUT_OF_MEMORY") != std::string::npos);
}

TEST_CASE("compile, load, launch, capture and time a kernel on a GPU", "[driver][gpu]") {
  SKIP_WITHOUT_GPU();
  if (!nvrtc::available()) {
    WARN("no NVRTC: skipped");
    return;
  }
  Result<driver::DeviceInfo> info = driver::device_info(0);
  REQUIRE(info.ok());
  Result<nvrtc::CompileOutput> compiled = nvrtc::compile(
      kScaleKernel, "scale.cu", {}, {"--gpu-architecture=" + arch_of(*info)}, true, false);
  INFO(error_text(compiled));
  REQUIRE(compiled.ok());

  Result<driver::Module> module = driver::Module::load(compiled->cubin);
  REQUIRE(module.ok());
  Result<driver::Function> missing = module->function("no_such_kernel");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().message.find("no_such_kernel") != std::string::npos);
  Result<driver::Function> fn = module->function("scale");
  REQUIRE(fn.ok());
  CHECK(fn->num_regs > 0);
  CHECK(fn->max_threads > 0);
  CHECK(fn->local_bytes == 0);
  REQUIRE(driver::set_max_dynamic_smem(*fn, info->max_smem_per_block_optin).ok());
  CHECK(driver::set_max_dynamic_smem(*fn, info->max_smem_per_block_optin + 1024).status() ==
        Status::kCudaError);

  int n = 1000;
  std::vector<float> host(n);
  for (int i = 0; i < n; ++i) host[i] = static_cast<float>(i);
  Result<driver::DeviceBuffer> in = driver::DeviceBuffer::create(n * sizeof(float));
  Result<driver::DeviceBuffer> out = driver::DeviceBuffer::create(n * sizeof(float));
  REQUIRE(in.ok());
  REQUIRE(out.ok());
  REQUIRE(driver::memcpy_htod(in->get(), host.data(), n * sizeof(float)).ok());
  driver::DevicePtr out_ptr = out->get(), in_ptr = in->get();
  float factor = 3.f;
  void* args[] = {&out_ptr, &in_ptr, &factor, &n};
  const driver::Dim3 grid{static_cast<unsigned>((n + 127) / 128)}, block{128};

  Result<driver::Stream> stream = driver::stream_create();
  REQUIRE(stream.ok());
  Result<driver::Event> start = driver::event_create();
  Result<driver::Event> stop = driver::event_create();
  REQUIRE(start.ok());
  REQUIRE(stop.ok());

  REQUIRE(driver::event_record(*start, *stream).ok());
  REQUIRE(driver::launch(*fn, grid, block, 0, *stream, args).ok());
  REQUIRE(driver::event_record(*stop, *stream).ok());
  Result<float> ms = driver::event_elapsed_ms(*start, *stop);
  REQUIRE(ms.ok());
  CHECK(*ms >= 0.f);
  std::vector<float> back(n);
  REQUIRE(driver::memcpy_dtoh(back.data(), out->get(), n * sizeof(float)).ok());
  CHECK(back[999] == 2997.f);

  // Replay through a graph with a different factor baked into the capture.
  factor = 5.f;
  REQUIRE(driver::begin_capture(*stream).ok());
  REQUIRE(driver::launch(*fn, grid, block, 0, *stream, args).ok());
  Result<driver::Graph> graph = driver::end_capture_and_instantiate(*stream);
  REQUIRE(graph.ok());
  REQUIRE(driver::graph_launch(*graph, *stream).ok());
  REQUIRE(driver::stream_synchronize(*stream).ok());
  REQUIRE(driver::memcpy_dtoh(back.data(), out->get(), n * sizeof(float)).ok());
  CHECK(back[999] == 4995.f);

  Result<void> too_big = driver::launch(*fn, grid, driver::Dim3{4096}, 0, *stream, args);
  REQUIRE_FALSE(too_big.ok());
  CHECK(too_big.status() == Status::kCudaError);
  CHECK(too_big.error().message.find("cuLaunchKernel") != std::string::npos);

  driver::graph_destroy(*graph);
  driver::event_destroy(*start);
  driver::event_destroy(*stop);
  driver::stream_destroy(*stream);
}
