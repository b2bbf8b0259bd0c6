#include "runtime/driver.h"

#include <algorithm>
#include <cstdint>
#include <mutex>
#include <unordered_map>

#include "runtime/dynlib.h"

namespace flashjit::driver {
namespace {

// --- The few CUDA driver declarations used, with values copied from cuda.h
// (CUDA 13.0) so that neither cuda.h nor libcuda is needed to build. ---
using CUresult = int;
using CUdevice = int;
using CUcontext = void*;
using CUmodule = void*;
using CUfunction = void*;
using CUstream = void*;
using CUevent = void*;
using CUgraph = void*;
using CUgraphExec = void*;
using CUdeviceptr = unsigned long long;

constexpr CUresult kCudaSuccess = 0;
constexpr CUresult kCudaErrorOutOfMemory = 2;
constexpr CUresult kCudaErrorNotInitialized = 3;
constexpr CUresult kCudaErrorStubLibrary = 34;
constexpr CUresult kCudaErrorNoDevice = 100;
constexpr CUresult kCudaErrorInvalidContext = 201;
constexpr CUresult kCudaErrorNotFound = 500;

// CUfunction_attribute
constexpr int kFuncMaxThreadsPerBlock = 0;
constexpr int kFuncSharedSizeBytes = 1;
constexpr int kFuncLocalSizeBytes = 3;
constexpr int kFuncNumRegs = 4;
constexpr int kFuncMaxDynamicSharedSizeBytes = 8;

// CUdevice_attribute
constexpr int kDevMultiprocessorCount = 16;
constexpr int kDevL2CacheSize = 38;
constexpr int kDevComputeCapabilityMajor = 75;
constexpr int kDevComputeCapabilityMinor = 76;
constexpr int kDevMaxSharedMemoryPerBlockOptin = 97;

constexpr int kStreamCaptureModeGlobal = 0;     // CU_STREAM_CAPTURE_MODE_GLOBAL
constexpr unsigned kStreamDefault = 0;          // CU_STREAM_DEFAULT
constexpr unsigned kEventDefault = 0;           // CU_EVENT_DEFAULT
constexpr uint64_t kGetProcAddressDefault = 0;  // CU_GET_PROC_ADDRESS_DEFAULT

// The ABI every entry point is requested at: the signatures below are CUDA
// 12.0's. Newer drivers keep serving these versions (CUDA 13 changed e.g.
// cuCtxSynchronize to take a context; asking for 12000 keeps the old one).
constexpr int kApiVersion = 12000;
// cuEventElapsedTime_v2 (same signature) arrived in 12.8.
constexpr int kEventElapsedTimeVersion = 12080;

using GetProcAddressV2 = CUresult (*)(const char* symbol, void** pfn, int cuda_version,
                                      uint64_t flags, int* symbol_status);
using GetProcAddressV1 = CUresult (*)(const char* symbol, void** pfn, int cuda_version,
                                      uint64_t flags);

struct Api {
  DynLib lib;
  int driver_version = 0;
  CUresult (*GetErrorName)(CUresult, const char**) = nullptr;
  CUresult (*GetErrorString)(CUresult, const char**) = nullptr;
  CUresult (*Init)(unsigned flags) = nullptr;
  CUresult (*DeviceGetCount)(int*) = nullptr;
  CUresult (*DeviceGet)(CUdevice*, int ordinal) = nullptr;
  CUresult (*DeviceGetName)(char*, int len, CUdevice) = nullptr;
  CUresult (*DeviceGetAttribute)(int*, int attribute, CUdevice) = nullptr;
  CUresult (*DeviceTotalMem)(size_t*, CUdevice) = nullptr;
  CUresult (*DevicePrimaryCtxRetain)(CUcontext*, CUdevice) = nullptr;
  CUresult (*CtxSetCurrent)(CUcontext) = nullptr;
  CUresult (*CtxGetDevice)(CUdevice*) = nullptr;
  CUresult (*CtxSynchronize)() = nullptr;
  CUresult (*ModuleLoadData)(CUmodule*, const void* image) = nullptr;
  CUresult (*ModuleUnload)(CUmodule) = nullptr;
  CUresult (*ModuleGetFunction)(CUfunction*, CUmodule, const char* name) = nullptr;
  CUresult (*FuncGetAttribute)(int*, int attribute, CUfunction) = nullptr;
  CUresult (*FuncSetAttribute)(CUfunction, int attribute, int value) = nullptr;
  CUresult (*LaunchKernel)(CUfunction, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                           unsigned by, unsigned bz, unsigned smem_bytes, CUstream, void** params,
                           void** extra) = nullptr;
  CUresult (*MemAlloc)(CUdeviceptr*, size_t) = nullptr;
  CUresult (*MemFree)(CUdeviceptr) = nullptr;
  CUresult (*MemcpyHtoD)(CUdeviceptr, const void*, size_t) = nullptr;
  CUresult (*MemcpyDtoH)(void*, CUdeviceptr, size_t) = nullptr;
  CUresult (*MemcpyDtoDAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream) = nullptr;
  CUresult (*MemsetD8Async)(CUdeviceptr, unsigned char, size_t, CUstream) = nullptr;
  CUresult (*MemsetD32Async)(CUdeviceptr, unsigned, size_t, CUstream) = nullptr;
  CUresult (*MemGetInfo)(size_t* free, size_t* total) = nullptr;
  CUresult (*StreamCreate)(CUstream*, unsigned flags) = nullptr;
  CUresult (*StreamDestroy)(CUstream) = nullptr;
  CUresult (*StreamSynchronize)(CUstream) = nullptr;
  CUresult (*EventCreate)(CUevent*, unsigned flags) = nullptr;
  CUresult (*EventDestroy)(CUevent) = nullptr;
  CUresult (*EventRecord)(CUevent, CUstream) = nullptr;
  CUresult (*EventSynchronize)(CUevent) = nullptr;
  CUresult (*EventElapsedTime)(float*, CUevent, CUevent) = nullptr;
  CUresult (*StreamBeginCapture)(CUstream, int mode) = nullptr;
  CUresult (*StreamEndCapture)(CUstream, CUgraph*) = nullptr;
  CUresult (*GraphInstantiateWithFlags)(CUgraphExec*, CUgraph, unsigned long long flags) = nullptr;
  CUresult (*GraphLaunch)(CUgraphExec, CUstream) = nullptr;
  CUresult (*GraphExecDestroy)(CUgraphExec) = nullptr;
  CUresult (*GraphDestroy)(CUgraph) = nullptr;
  // CUDA 11.2+; optional (the TF32 Hopper forward needs them for V^T scratch).
  CUresult (*MemPoolCreate)(void** pool, const void* props) = nullptr;
  CUresult (*MemPoolDestroy)(void* pool) = nullptr;
  CUresult (*MemPoolSetAttribute)(void* pool, int attribute, void* value) = nullptr;
  CUresult (*MemAllocFromPoolAsync)(CUdeviceptr*, size_t, void* pool, CUstream) = nullptr;
  CUresult (*MemFreeAsync)(CUdeviceptr, CUstream) = nullptr;
  // CUDA 12.0+; optional (null on older drivers, which then lack the Hopper path).
  CUresult (*TensorMapEncodeTiled)(void* map, int data_type, unsigned rank, void* address,
                                   const uint64_t* dims, const uint64_t* strides, const unsigned* box,
                                   const unsigned* element_strides, int interleave, int swizzle,
                                   int l2_promotion, int oob_fill) = nullptr;
};

// Looks entry points up through cuGetProcAddress, collecting the names it misses.
class Resolver {
 public:
  Resolver(const DynLib& lib, int driver_version) : driver_version_(driver_version) {
    v2_ = reinterpret_cast<GetProcAddressV2>(lib.symbol("cuGetProcAddress_v2"));
    v1_ = reinterpret_cast<GetProcAddressV1>(lib.symbol("cuGetProcAddress"));
  }
  bool usable() const { return v2_ != nullptr || v1_ != nullptr; }
  const std::string& missing() const { return missing_; }

  /// Like operator() but a missing entry point leaves `fn` null without
  /// making the driver unusable.
  template <typename Fn>
  void optional(Fn& fn, const char* name, int version = kApiVersion) {
    const std::string before = missing_;
    (*this)(fn, name, version);
    missing_ = before;
  }

  template <typename Fn>
  void operator()(Fn& fn, const char* name, int version = kApiVersion) {
    // Asking for a version newer than the driver is an error, so clamp.
    const int asked = std::min(version, driver_version_);
    void* pfn = nullptr;
    int symbol_status = 0;
    const CUresult rc = v2_ != nullptr
                            ? v2_(name, &pfn, asked, kGetProcAddressDefault, &symbol_status)
                            : v1_(name, &pfn, asked, kGetProcAddressDefault);
    if (rc != kCudaSuccess || pfn == nullptr) {
      missing_ += std::string(missing_.empty() ? "" : ", ") + name;
    }
    fn = reinterpret_cast<Fn>(pfn);
  }

 private:
  GetProcAddressV2 v2_ = nullptr;
  GetProcAddressV1 v1_ = nullptr;
  int driver_version_;
  std::string missing_;
};

void resolve_all(Resolver& resolve, Api& api) {
  resolve(api.GetErrorName, "cuGetErrorName");
  resolve(api.GetErrorString, "cuGetErrorString");
  resolve(api.Init, "cuInit");
  resolve(api.DeviceGetCount, "cuDeviceGetCount");
  resolve(api.DeviceGet, "cuDeviceGet");
  resolve(api.DeviceGetName, "cuDeviceGetName");
  resolve(api.DeviceGetAttribute, "cuDeviceGetAttribute");
  resolve(api.DeviceTotalMem, "cuDeviceTotalMem");
  resolve(api.DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
  resolve(api.CtxSetCurrent, "cuCtxSetCurrent");
  resolve(api.CtxGetDevice, "cuCtxGetDevice");
  resolve(api.CtxSynchronize, "cuCtxSynchronize");
  resolve(api.ModuleLoadData, "cuModuleLoadData");
  resolve(api.ModuleUnload, "cuModuleUnload");
  resolve(api.ModuleGetFunction, "cuModuleGetFunction");
  resolve(api.FuncGetAttribute, "cuFuncGetAttribute");
  resolve(api.FuncSetAttribute, "cuFuncSetAttribute");
  resolve(api.LaunchKernel, "cuLaunchKernel");
  resolve(api.MemAlloc, "cuMemAlloc");
  resolve(api.MemFree, "cuMemFree");
  resolve(api.MemcpyHtoD, "cuMemcpyHtoD");
  resolve(api.MemcpyDtoH, "cuMemcpyDtoH");
  resolve(api.MemcpyDtoDAsync, "cuMemcpyDtoDAsync");
  resolve(api.MemsetD8Async, "cuMemsetD8Async");
  resolve(api.MemsetD32Async, "cuMemsetD32Async");
  resolve(api.MemGetInfo, "cuMemGetInfo");
  resolve(api.StreamCreate, "cuStreamCreate");
  resolve(api.StreamDestroy, "cuStreamDestroy");
  resolve(api.StreamSynchronize, "cuStreamSynchronize");
  resolve(api.EventCreate, "cuEventCreate");
  resolve(api.EventDestroy, "cuEventDestroy");
  resolve(api.EventRecord, "cuEventRecord");
  resolve(api.EventSynchronize, "cuEventSynchronize");
  resolve(api.EventElapsedTime, "cuEventElapsedTime", kEventElapsedTimeVersion);
  resolve(api.StreamBeginCapture, "cuStreamBeginCapture");
  resolve(api.StreamEndCapture, "cuStreamEndCapture");
  resolve(api.GraphInstantiateWithFlags, "cuGraphInstantiateWithFlags");
  resolve(api.GraphLaunch, "cuGraphLaunch");
  resolve(api.GraphExecDestroy, "cuGraphExecDestroy");
  resolve(api.GraphDestroy, "cuGraphDestroy");
  resolve.optional(api.TensorMapEncodeTiled, "cuTensorMapEncodeTiled");
  resolve.optional(api.MemPoolCreate, "cuMemPoolCreate");
  resolve.optional(api.MemPoolDestroy, "cuMemPoolDestroy");
  resolve.optional(api.MemPoolSetAttribute, "cuMemPoolSetAttribute");
  resolve.optional(api.MemAllocFromPoolAsync, "cuMemAllocFromPoolAsync");
  resolve.optional(api.MemFreeAsync, "cuMemFreeAsync");
}

Result<int> query_driver_version(const DynLib& lib) {
  using DriverGetVersion = CUresult (*)(int*);
  auto get_version = reinterpret_cast<DriverGetVersion>(lib.symbol("cuDriverGetVersion"));
  int version = 0;
  if (get_version == nullptr || get_version(&version) != kCudaSuccess || version <= 0) {
    return make_error(Status::kDriverUnavailable,
                      lib.path + ": cuDriverGetVersion is missing or failed");
  }
  return version;
}

Result<Api> load_api() {
  Result<DynLib> lib = open_first({"libcuda.so.1", "libcuda.so"}, Status::kDriverUnavailable,
                                  "the CUDA driver (libcuda)");
  if (!lib) {
    return make_error(Status::kDriverUnavailable,
                      lib.error().message +
                          "\nA GPU driver is needed to run kernels (compiling them does not "
                          "need one).");
  }
  Result<int> version = query_driver_version(*lib);
  if (!version) return version.error();
  Resolver resolve(*lib, *version);
  if (!resolve.usable()) {
    return make_error(Status::kDriverUnavailable,
                      lib->path + " has no cuGetProcAddress: the driver is older than CUDA 11.3");
  }
  Api api;
  api.driver_version = *version;
  resolve_all(resolve, api);
  if (!resolve.missing().empty()) {
    return make_error(Status::kDriverUnavailable, lib->path + " (driver version " +
                                                      std::to_string(*version) +
                                                      ") lacks entry points: " + resolve.missing());
  }
  api.lib = std::move(lib).value();
  return api;
}

// Loaded once per process (thread-safe static initialization); a failure is
// remembered, so a machine without a driver pays for the search once.
const Result<Api>& loaded_api() {
  static const Result<Api> api = load_api();
  return api;
}

std::string describe(const Api& api, CUresult rc) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (api.GetErrorName(rc, &name) != kCudaSuccess || name == nullptr) name = "CUDA_ERROR_UNKNOWN";
  if (api.GetErrorString(rc, &text) != kCudaSuccess || text == nullptr) text = "unknown error";
  std::string out = std::string(name) + " (" + std::to_string(rc) + "): " + text;
  if (rc == kCudaErrorNotInitialized || rc == kCudaErrorInvalidContext) {
    out += " (call flashjit::driver::init(device) on this thread first)";
  }
  return out;
}

Result<void> check(const Api& api, const char* call, CUresult rc) {
  if (rc == kCudaSuccess) return {};
  return make_error(Status::kCudaError, std::string(call) + " failed: " + describe(api, rc));
}

// Loads the driver and runs one call, turning its CUresult into a Result.
template <typename Call>
Result<void> call(const char* name, Call&& fn) {
  const Result<Api>& api = loaded_api();
  if (!api) return api.error();
  return check(*api, name, fn(*api));
}

// For cleanup paths (destructors): no driver or a failure means nothing to do.
template <typename Call>
void call_ignoring_errors(Call&& fn) {
  const Result<Api>& api = loaded_api();
  if (api) fn(*api);
}

// cuInit's outcome, computed once.
Result<void> initialize_driver() {
  static const Result<void> initialized = []() -> Result<void> {
    const Result<Api>& api = loaded_api();
    if (!api) return api.error();
    const CUresult rc = api->Init(0);
    if (rc == kCudaErrorNoDevice) {
      return make_error(Status::kNoDevice,
                        "cuInit: no CUDA device is visible (" + describe(*api, rc) + ")");
    }
    if (rc == kCudaErrorStubLibrary) {
      return make_error(Status::kDriverUnavailable,
                        api->lib.path + " is the toolkit's stub library, not a GPU driver: " +
                            describe(*api, rc));
    }
    return check(*api, "cuInit", rc);
  }();
  return initialized;
}

Result<int> device_count() {
  if (Result<void> ok = initialize_driver(); !ok) return ok.error();
  int count = 0;
  Result<void> r = call("cuDeviceGetCount", [&](const Api& a) { return a.DeviceGetCount(&count); });
  if (!r) return r.error();
  if (count == 0) return make_error(Status::kNoDevice, "the CUDA driver reports no devices");
  return count;
}

Result<CUdevice> device_handle(int ordinal) {
  Result<int> count = device_count();
  if (!count) return count.error();
  if (ordinal < 0 || ordinal >= *count) {
    return make_error(Status::kInvalidArgument, "device must be in [0, " + std::to_string(*count) +
                                                    "); got " + std::to_string(ordinal));
  }
  CUdevice dev = 0;
  Result<void> r = call("cuDeviceGet", [&](const Api& a) { return a.DeviceGet(&dev, ordinal); });
  if (!r) return r.error();
  return dev;
}

// The retained primary context of each device; retained once, kept for the
// life of the process (releasing it would tear down modules still in use).
Result<CUcontext> primary_context(int ordinal, CUdevice dev) {
  static std::mutex mutex;
  static std::unordered_map<int, CUcontext> contexts;
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = contexts.find(ordinal); it != contexts.end()) return it->second;
  CUcontext ctx = nullptr;
  Result<void> r = call("cuDevicePrimaryCtxRetain",
                        [&](const Api& a) { return a.DevicePrimaryCtxRetain(&ctx, dev); });
  if (!r) return r.error();
  contexts.emplace(ordinal, ctx);
  return ctx;
}

// An int attribute to read and where it goes.
struct IntField {
  const char* what;
  int attr;
  int* out;
};

Result<int> attribute(const char* what, int attr, CUdevice dev) {
  int value = 0;
  Result<void> r = call("cuDeviceGetAttribute",
                        [&](const Api& a) { return a.DeviceGetAttribute(&value, attr, dev); });
  if (!r) return make_error(r.status(), r.error().message + " (reading " + what + ")");
  return value;
}

Result<int> function_attribute(CUfunction f, const char* what, int attr) {
  int value = 0;
  Result<void> r =
      call("cuFuncGetAttribute", [&](const Api& a) { return a.FuncGetAttribute(&value, attr, f); });
  if (!r) return make_error(r.status(), r.error().message + " (reading " + what + ")");
  return value;
}

}  // namespace

Result<void> init(int device) {
  Result<CUdevice> dev = device_handle(device);
  if (!dev) return dev.error();
  Result<CUcontext> ctx = primary_context(device, *dev);
  if (!ctx) return ctx.error();
  return call("cuCtxSetCurrent", [&](const Api& a) { return a.CtxSetCurrent(*ctx); });
}

bool available() { return device_count().ok(); }

Result<int> current_device() {
  CUdevice dev = 0;
  Result<void> r = call("cuCtxGetDevice", [&](const Api& a) { return a.CtxGetDevice(&dev); });
  if (!r) return r.error();
  return static_cast<int>(dev);
}

Result<DeviceInfo> device_info(int device) {
  Result<CUdevice> dev = device_handle(device);
  if (!dev) return dev.error();
  DeviceInfo info;
  info.ordinal = device;
  char name[256] = {};
  Result<void> r = call("cuDeviceGetName", [&](const Api& a) {
    return a.DeviceGetName(name, sizeof(name) - 1, *dev);
  });
  if (!r) return r.error();
  info.name = name;
  r = call("cuDeviceTotalMem",
           [&](const Api& a) { return a.DeviceTotalMem(&info.total_mem, *dev); });
  if (!r) return r.error();
  const IntField fields[] = {
      {"compute capability major", kDevComputeCapabilityMajor, &info.cc_major},
      {"compute capability minor", kDevComputeCapabilityMinor, &info.cc_minor},
      {"multiprocessor count", kDevMultiprocessorCount, &info.sm_count},
      {"L2 cache size", kDevL2CacheSize, &info.l2_bytes},
      {"max shared memory per block (opt-in)", kDevMaxSharedMemoryPerBlockOptin,
       &info.max_smem_per_block_optin},
  };
  for (const IntField& f : fields) {
    Result<int> value = attribute(f.what, f.attr, *dev);
    if (!value) return value.error();
    *f.out = *value;
  }
  info.driver_version = loaded_api()->driver_version;
  return info;
}

// --- Module ---

Module::~Module() {
  if (mod_ != nullptr) call_ignoring_errors([&](const Api& a) { return a.ModuleUnload(mod_); });
}

Module::Module(Module&& other) noexcept : mod_(other.mod_) { other.mod_ = nullptr; }

Module& Module::operator=(Module&& other) noexcept {
  if (this != &other) {
    Module old(std::move(*this));  // unloads what this held
    mod_ = other.mod_;
    other.mod_ = nullptr;
  }
  return *this;
}

Result<Module> Module::load(const std::vector<char>& cubin) {
  if (cubin.empty()) {
    return make_error(Status::kInvalidArgument, "Module::load: the cubin is empty");
  }
  Module m;
  Result<void> r = call("cuModuleLoadData",
                        [&](const Api& a) { return a.ModuleLoadData(&m.mod_, cubin.data()); });
  if (!r) return r.error();
  return m;
}

Result<Function> Module::function(const char* name) const {
  if (name == nullptr) return make_error(Status::kNullPointer, "Module::function: name is null");
  if (mod_ == nullptr) {
    return make_error(Status::kInvalidArgument, "Module::function: the module is not loaded");
  }
  Function f;
  CUresult rc = kCudaSuccess;
  Result<void> r = call("cuModuleGetFunction", [&](const Api& a) {
    rc = a.ModuleGetFunction(&f.handle, mod_, name);
    return rc;
  });
  if (!r && rc == kCudaErrorNotFound) {
    return make_error(r.status(), r.error().message + " (no extern \"C\" kernel named '" +
                                      std::string(name) + "' in the module)");
  }
  if (!r) return r.error();
  const IntField fields[] = {
      {"registers", kFuncNumRegs, &f.num_regs},
      {"local memory", kFuncLocalSizeBytes, &f.local_bytes},
      {"static shared memory", kFuncSharedSizeBytes, &f.static_smem_bytes},
      {"max threads per block", kFuncMaxThreadsPerBlock, &f.max_threads},
  };
  for (const IntField& field : fields) {
    Result<int> value = function_attribute(f.handle, field.what, field.attr);
    if (!value) return value.error();
    *field.out = *value;
  }
  return f;
}

Result<void> set_max_dynamic_smem(const Function& f, int bytes) {
  if (f.handle == nullptr) {
    return make_error(Status::kNullPointer, "set_max_dynamic_smem: null function");
  }
  Result<void> r = call("cuFuncSetAttribute", [&](const Api& a) {
    return a.FuncSetAttribute(f.handle, kFuncMaxDynamicSharedSizeBytes, bytes);
  });
  if (!r) {
    return make_error(r.status(), r.error().message + " (max dynamic shared memory = " +
                                      std::to_string(bytes) + " bytes)");
  }
  return {};
}

Result<void> launch(const Function& f, Dim3 grid, Dim3 block, int smem_bytes, Stream stream,
                    void** args) {
  if (f.handle == nullptr) return make_error(Status::kNullPointer, "launch: null function");
  if (smem_bytes < 0) {
    return make_error(Status::kInvalidArgument,
                      "launch: smem_bytes must be >= 0; got " + std::to_string(smem_bytes));
  }
  Result<void> r = call("cuLaunchKernel", [&](const Api& a) {
    return a.LaunchKernel(f.handle, grid.x, grid.y, grid.z, block.x, block.y, block.z,
                          static_cast<unsigned>(smem_bytes), stream, args, nullptr);
  });
  if (!r) {
    return make_error(r.status(), r.error().message + " (grid " + std::to_string(grid.x) + "x" +
                                      std::to_string(grid.y) + "x" + std::to_string(grid.z) +
                                      ", block " + std::to_string(block.x) + "x" +
                                      std::to_string(block.y) + "x" + std::to_string(block.z) +
                                      ", " + std::to_string(smem_bytes) + " bytes smem)");
  }
  return {};
}

Result<void> encode_tensor_map_4d(TmaDescriptor* map, TmaElement element, const void* base,
                                  const uint64_t dims[4], const uint64_t strides_bytes[3], const unsigned box[4]) {
  // cuda.h enum values (CUDA 12.0+).
  constexpr int kDataTypeF16 = 6;            // CU_TENSOR_MAP_DATA_TYPE_FLOAT16
  constexpr int kDataTypeF32 = 7;            // CU_TENSOR_MAP_DATA_TYPE_FLOAT32
  constexpr int kDataTypeBF16 = 9;           // CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
  constexpr int kInterleaveNone = 0;         // CU_TENSOR_MAP_INTERLEAVE_NONE
  constexpr int kSwizzle128B = 3;            // CU_TENSOR_MAP_SWIZZLE_128B
  constexpr int kL2Promotion128B = 2;        // CU_TENSOR_MAP_L2_PROMOTION_L2_128B
  constexpr int kOobFillZero = 0;            // CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE: zeros
  const Result<Api>& api = loaded_api();
  if (!api) return api.error();
  if (api->TensorMapEncodeTiled == nullptr) {
    return make_error(Status::kDriverUnavailable,
                      "cuTensorMapEncodeTiled is missing: the driver predates CUDA 12.0");
  }
  static_assert(sizeof(TmaDescriptor) == 128 && alignof(TmaDescriptor) == 64, "a CUtensorMap");
  const int data_type = element == TmaElement::kBF16  ? kDataTypeBF16
                        : element == TmaElement::kF16 ? kDataTypeF16
                                                      : kDataTypeF32;
  const unsigned element_strides[4] = {1, 1, 1, 1};
  const CUresult rc = api->TensorMapEncodeTiled(
      map->opaque, data_type, 4, const_cast<void*>(base), dims, strides_bytes,
      box, element_strides, kInterleaveNone, kSwizzle128B, kL2Promotion128B, kOobFillZero);
  if (rc != kCudaSuccess) {
    return make_error(Status::kCudaError,
                      "cuTensorMapEncodeTiled failed: " + describe(*api, rc) + " (dims " +
                          std::to_string(dims[0]) + "x" + std::to_string(dims[1]) + "x" +
                          std::to_string(dims[2]) + "x" + std::to_string(dims[3]) + ", strides " +
                          std::to_string(strides_bytes[0]) + "/" + std::to_string(strides_bytes[1]) + "/" +
                          std::to_string(strides_bytes[2]) + " bytes)");
  }
  return {};
}

// --- stream-ordered memory pool ---

namespace {

// cuda.h's CUmemPoolProps (CUDA 12.x/13.0 layout; reserved bytes must be 0).
struct MemPoolProps {
  int alloc_type;          // CU_MEM_ALLOCATION_TYPE_PINNED = 1
  int handle_types;        // CU_MEM_HANDLE_TYPE_NONE = 0
  int location_type;       // CU_MEM_LOCATION_TYPE_DEVICE = 1
  int location_id;         // device ordinal
  void* win32_security_attributes;
  size_t max_size;         // 0: the system default
  unsigned short usage;
  unsigned char reserved[54];
};
static_assert(sizeof(MemPoolProps) == 88, "CUmemPoolProps is 88 bytes");

Result<const Api*> pool_api() {
  const Result<Api>& api = loaded_api();
  if (!api) return api.error();
  if (!api->MemPoolCreate || !api->MemPoolDestroy || !api->MemPoolSetAttribute || !api->MemAllocFromPoolAsync ||
      !api->MemFreeAsync) {
    return make_error(Status::kDriverUnavailable,
                      "the driver lacks stream-ordered memory pools (cuMemPoolCreate, CUDA 11.2+)");
  }
  return &*api;
}

}  // namespace

Result<MemPool> mem_pool_create(int device) {
  auto api = pool_api();
  if (!api) return api.error();
  MemPoolProps props{};
  props.alloc_type = 1;
  props.location_type = 1;
  props.location_id = device;
  void* pool = nullptr;
  if (CUresult rc = (*api)->MemPoolCreate(&pool, &props); rc != kCudaSuccess) {
    return make_error(Status::kCudaError, "cuMemPoolCreate: " + describe(**api, rc));
  }
  constexpr int kAttrReleaseThreshold = 4;  // CU_MEMPOOL_ATTR_RELEASE_THRESHOLD
  uint64_t keep_everything = ~uint64_t(0);
  if (CUresult rc = (*api)->MemPoolSetAttribute(pool, kAttrReleaseThreshold, &keep_everything);
      rc != kCudaSuccess) {
    (*api)->MemPoolDestroy(pool);
    return make_error(Status::kCudaError, "cuMemPoolSetAttribute(release threshold): " + describe(**api, rc));
  }
  return pool;
}

void mem_pool_destroy(MemPool pool) {
  if (pool == nullptr) return;
  if (auto api = pool_api(); api) (*api)->MemPoolDestroy(pool);
}

Result<DevicePtr> mem_alloc_async(size_t bytes, MemPool pool, Stream s) {
  auto api = pool_api();
  if (!api) return api.error();
  CUdeviceptr p = 0;
  if (CUresult rc = (*api)->MemAllocFromPoolAsync(&p, bytes, pool, s); rc != kCudaSuccess) {
    return make_error(rc == kCudaErrorOutOfMemory ? Status::kOutOfMemory : Status::kCudaError,
                      "cuMemAllocFromPoolAsync(" + std::to_string(bytes) + " bytes): " + describe(**api, rc));
  }
  return DevicePtr(p);
}

Result<void> mem_free_async(DevicePtr p, Stream s) {
  auto api = pool_api();
  if (!api) return api.error();
  if (CUresult rc = (*api)->MemFreeAsync(p, s); rc != kCudaSuccess) {
    return make_error(Status::kCudaError, "cuMemFreeAsync: " + describe(**api, rc));
  }
  return {};
}

// --- memory ---

Result<DevicePtr> mem_alloc(size_t bytes) {
  if (bytes == 0) {
    return make_error(Status::kInvalidArgument, "mem_alloc: bytes must be > 0; got 0");
  }
  const Result<Api>& api = loaded_api();
  if (!api) return api.error();
  CUdeviceptr p = 0;
  const CUresult rc = api->MemAlloc(&p, bytes);
  if (rc == kCudaErrorOutOfMemory) {
    return make_error(Status::kOutOfMemory, "cuMemAlloc of " + std::to_string(bytes) +
                                                " bytes failed: " + describe(*api, rc));
  }
  if (Result<void> r = check(*api, "cuMemAlloc", rc); !r) return r.error();
  return p;
}

void mem_free(DevicePtr p) {
  if (p != 0) call_ignoring_errors([&](const Api& a) { return a.MemFree(p); });
}

Result<void> memcpy_htod(DevicePtr dst, const void* src, size_t bytes) {
  return call("cuMemcpyHtoD", [&](const Api& a) { return a.MemcpyHtoD(dst, src, bytes); });
}

Result<void> memcpy_dtoh(void* dst, DevicePtr src, size_t bytes) {
  return call("cuMemcpyDtoH", [&](const Api& a) { return a.MemcpyDtoH(dst, src, bytes); });
}

Result<void> memcpy_dtod_async(DevicePtr dst, DevicePtr src, size_t bytes, Stream s) {
  return call("cuMemcpyDtoDAsync",
              [&](const Api& a) { return a.MemcpyDtoDAsync(dst, src, bytes, s); });
}

Result<void> memset_d8_async(DevicePtr dst, unsigned char value, size_t bytes, Stream s) {
  return call("cuMemsetD8Async",
              [&](const Api& a) { return a.MemsetD8Async(dst, value, bytes, s); });
}

Result<void> memset_d32_async(DevicePtr dst, unsigned value, size_t count, Stream s) {
  return call("cuMemsetD32Async",
              [&](const Api& a) { return a.MemsetD32Async(dst, value, count, s); });
}

Result<std::pair<size_t, size_t>> mem_info() {
  size_t free_bytes = 0, total_bytes = 0;
  Result<void> r =
      call("cuMemGetInfo", [&](const Api& a) { return a.MemGetInfo(&free_bytes, &total_bytes); });
  if (!r) return r.error();
  return std::make_pair(free_bytes, total_bytes);
}

// --- streams, events, graphs ---

Result<void> stream_synchronize(Stream s) {
  return call("cuStreamSynchronize", [&](const Api& a) { return a.StreamSynchronize(s); });
}

Result<void> context_synchronize() {
  return call("cuCtxSynchronize", [&](const Api& a) { return a.CtxSynchronize(); });
}

Result<Stream> stream_create() {
  CUstream s = nullptr;
  Result<void> r =
      call("cuStreamCreate", [&](const Api& a) { return a.StreamCreate(&s, kStreamDefault); });
  if (!r) return r.error();
  return s;
}

void stream_destroy(Stream s) {
  if (s != nullptr) call_ignoring_errors([&](const Api& a) { return a.StreamDestroy(s); });
}

Result<Event> event_create() {
  CUevent e = nullptr;
  Result<void> r =
      call("cuEventCreate", [&](const Api& a) { return a.EventCreate(&e, kEventDefault); });
  if (!r) return r.error();
  return e;
}

void event_destroy(Event e) {
  if (e != nullptr) call_ignoring_errors([&](const Api& a) { return a.EventDestroy(e); });
}

Result<void> event_record(Event e, Stream s) {
  return call("cuEventRecord", [&](const Api& a) { return a.EventRecord(e, s); });
}

Result<float> event_elapsed_ms(Event start, Event end) {
  Result<void> r =
      call("cuEventSynchronize", [&](const Api& a) { return a.EventSynchronize(end); });
  if (!r) return r.error();
  float ms = 0.f;
  r = call("cuEventElapsedTime", [&](const Api& a) { return a.EventElapsedTime(&ms, start, end); });
  if (!r) return r.error();
  return ms;
}

Result<void> begin_capture(Stream s) {
  return call("cuStreamBeginCapture",
              [&](const Api& a) { return a.StreamBeginCapture(s, kStreamCaptureModeGlobal); });
}

Result<Graph> end_capture_and_instantiate(Stream s) {
  CUgraph graph = nullptr;
  Result<void> r =
      call("cuStreamEndCapture", [&](const Api& a) { return a.StreamEndCapture(s, &graph); });
  if (!r) return r.error();
  CUgraphExec exec = nullptr;
  r = call("cuGraphInstantiateWithFlags",
           [&](const Api& a) { return a.GraphInstantiateWithFlags(&exec, graph, 0); });
  // The executable graph is independent of the captured one, which can go now.
  call_ignoring_errors([&](const Api& a) { return a.GraphDestroy(graph); });
  if (!r) return r.error();
  return exec;
}

Result<void> graph_launch(Graph g, Stream s) {
  return call("cuGraphLaunch", [&](const Api& a) { return a.GraphLaunch(g, s); });
}

void graph_destroy(Graph g) {
  if (g != nullptr) call_ignoring_errors([&](const Api& a) { return a.GraphExecDestroy(g); });
}

// --- DeviceBuffer ---

Result<DeviceBuffer> DeviceBuffer::create(size_t bytes) {
  DeviceBuffer buffer;
  if (bytes == 0) return buffer;  // an empty buffer owns nothing
  Result<DevicePtr> p = mem_alloc(bytes);
  if (!p) return p.error();
  buffer.ptr_ = *p;
  buffer.bytes_ = bytes;
  return buffer;
}

}  // namespace flashjit::driver
