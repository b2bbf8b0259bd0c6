// The CUDA driver, loaded at run time: libcuda.so.1 is dlopen'd on first use and
// every entry point is resolved through cuGetProcAddress. Nothing here links
// against CUDA, so the library starts on a machine without a GPU and reports
// kDriverUnavailable / kNoDevice instead of failing to load.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "compiler/status.h"
#include "templates/params.cuh"

namespace flashjit::driver {

using DevicePtr = unsigned long long;  ///< CUdeviceptr
using Stream = void*;                  ///< CUstream (null = legacy default stream)
using Event = void*;                   ///< CUevent
using Graph = void*;                   ///< CUgraphExec

struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
};

/// Static facts about one device.
struct DeviceInfo {
  int ordinal = 0;
  std::string name;
  int cc_major = 0, cc_minor = 0;
  int sm_count = 0;
  int l2_bytes = 0;
  int max_smem_per_block_optin = 0;  ///< bytes a block may request after opting in
  size_t total_mem = 0;
  int driver_version = 0;            ///< e.g. 13000
};

/// Loads the driver (once, thread-safe), calls cuInit, and makes the primary
/// context of `device` current on the calling thread. Cheap after the first call.
Result<void> init(int device = 0);
/// True if a driver and at least one device are present. Never fails.
bool available();
/// The ordinal of the current context's device (after init).
Result<int> current_device();
Result<DeviceInfo> device_info(int device);

/// A function in a loaded module, with its resource attributes.
struct Function {
  void* handle = nullptr;  ///< CUfunction
  int num_regs = 0;
  int local_bytes = 0;     ///< local memory per thread (spills + stack)
  int static_smem_bytes = 0;
  int max_threads = 0;
};

/// A loaded module (CUmodule). Unloaded on destruction. Move-only.
class Module {
 public:
  Module() = default;
  ~Module();
  Module(Module&& other) noexcept;
  Module& operator=(Module&& other) noexcept;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  /// Loads a cubin image (the bytes NVRTC produced) into the current context.
  static Result<Module> load(const std::vector<char>& cubin);
  /// Looks up an extern "C" kernel and reads its attributes.
  Result<Function> function(const char* name) const;
  void* handle() const { return mod_; }

 private:
  void* mod_ = nullptr;
};

/// Raises the dynamic shared-memory limit of `f` to `bytes` (needed above 48 KiB).
Result<void> set_max_dynamic_smem(const Function& f, int bytes);
/// Launches `f`; `args` is the array of pointers to each kernel argument.
Result<void> launch(const Function& f, Dim3 grid, Dim3 block, int smem_bytes, Stream stream,
                    void** args);

/// Element types a tensor map describes.
enum class TmaElement { kBF16, kF16, kF32 };

/// Encodes a 4-D tiled TMA descriptor (a CUtensorMap, in the kernels'
/// TmaDescriptor): dims innermost first, the byte strides of dims 1..3
/// (multiples of 16), the box copied per instruction, 128-byte swizzle,
/// out-of-range elements read as 0.
Result<void> encode_tensor_map_4d(TmaDescriptor* map, TmaElement element, const void* base,
                                  const uint64_t dims[4], const uint64_t strides_bytes[3], const unsigned box[4]);

/// A stream-ordered memory pool (CUmemoryPool) of the current device that
/// keeps what it reserved (release threshold: unlimited), so scratch
/// allocated and freed on a stream every call costs no remapping. Needs
/// CUDA 11.2+ drivers; kDriverUnavailable otherwise.
using MemPool = void*;
Result<MemPool> mem_pool_create(int device);
void mem_pool_destroy(MemPool pool);  ///< null is a no-op; frees lazily once allocations are freed
/// cuMemAllocFromPoolAsync / cuMemFreeAsync: valid in stream order (and
/// inside a stream capture, where they become graph nodes).
Result<DevicePtr> mem_alloc_async(size_t bytes, MemPool pool, Stream s);
Result<void> mem_free_async(DevicePtr p, Stream s);

// --- memory, streams, events, graphs: used by the API, tests and the benchmark ---
Result<DevicePtr> mem_alloc(size_t bytes);
void mem_free(DevicePtr p);  ///< null is a no-op; errors are ignored (used in destructors)
Result<void> memcpy_htod(DevicePtr dst, const void* src, size_t bytes);
Result<void> memcpy_dtoh(void* dst, DevicePtr src, size_t bytes);
Result<void> memcpy_dtod_async(DevicePtr dst, DevicePtr src, size_t bytes, Stream s);
Result<void> memset_d8_async(DevicePtr dst, unsigned char value, size_t bytes, Stream s);
Result<void> memset_d32_async(DevicePtr dst, unsigned value, size_t count, Stream s);
Result<void> stream_synchronize(Stream s);
Result<void> context_synchronize();
Result<Stream> stream_create();
void stream_destroy(Stream s);
Result<Event> event_create();
void event_destroy(Event e);
Result<void> event_record(Event e, Stream s);
Result<float> event_elapsed_ms(Event start, Event end);  ///< synchronizes on `end`
/// Stream capture into a CUDA graph (global capture mode) and replay.
Result<void> begin_capture(Stream s);
Result<Graph> end_capture_and_instantiate(Stream s);
Result<void> graph_launch(Graph g, Stream s);
void graph_destroy(Graph g);
/// Bytes free and total on the current device.
Result<std::pair<size_t, size_t>> mem_info();

/// RAII device buffer for tests and tools.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  ~DeviceBuffer() { mem_free(ptr_); }
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) { o.ptr_ = 0; o.bytes_ = 0; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) { mem_free(ptr_); ptr_ = o.ptr_; bytes_ = o.bytes_; o.ptr_ = 0; o.bytes_ = 0; }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  static Result<DeviceBuffer> create(size_t bytes);
  DevicePtr get() const { return ptr_; }
  void* ptr() const { return reinterpret_cast<void*>(ptr_); }
  size_t bytes() const { return bytes_; }

 private:
  DevicePtr ptr_ = 0;
  size_t bytes_ = 0;
};

}  // namespace flashjit::driver
