#include "runtime/nvrtc.h"

#include <glob.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <sstream>
#include <string_view>

#include "runtime/dynlib.h"

namespace flashjit::nvrtc {
namespace {

// The few NVRTC declarations used, copied from nvrtc.h so it is not needed.
using nvrtcResult = int;
constexpr nvrtcResult kNvrtcSuccess = 0;  // NVRTC_SUCCESS
using nvrtcProgram = struct NvrtcProgramOpaque*;

struct Api {
  DynLib lib;
  int major = 0, minor = 0;  // nvrtcVersion
  const char* (*GetErrorString)(nvrtcResult) = nullptr;
  nvrtcResult (*Version)(int* major, int* minor) = nullptr;
  nvrtcResult (*CreateProgram)(nvrtcProgram* prog, const char* src, const char* name,
                               int num_headers, const char* const* headers,
                               const char* const* include_names) = nullptr;
  nvrtcResult (*DestroyProgram)(nvrtcProgram* prog) = nullptr;
  nvrtcResult (*CompileProgram)(nvrtcProgram prog, int num_options,
                                const char* const* options) = nullptr;
  nvrtcResult (*GetProgramLogSize)(nvrtcProgram prog, size_t* size) = nullptr;
  nvrtcResult (*GetProgramLog)(nvrtcProgram prog, char* log) = nullptr;
  nvrtcResult (*GetCUBINSize)(nvrtcProgram prog, size_t* size) = nullptr;
  nvrtcResult (*GetCUBIN)(nvrtcProgram prog, char* cubin) = nullptr;
  nvrtcResult (*GetPTXSize)(nvrtcProgram prog, size_t* size) = nullptr;
  nvrtcResult (*GetPTX)(nvrtcProgram prog, char* ptx) = nullptr;
};

// Newest first: a CUDA 13 NVRTC knows the newest architectures.
const char* const kLibraryNames[] = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"};
// Where the pip wheels put the library, relative to site-packages (CUDA 13, CUDA 12).
const char* const kWheelLibDirs[] = {"nvidia/cu13/lib", "nvidia/cuda_nvrtc/lib"};

bool is_directory(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool is_file(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && !S_ISDIR(st.st_mode);
}

std::string env_or_empty(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : "";
}

void append_unique(std::vector<std::string>& list, const std::string& item) {
  for (const std::string& existing : list) {
    if (existing == item) return;
  }
  list.push_back(item);
}

// Every directory matching a shell pattern (no error when none does).
void append_glob(std::vector<std::string>& dirs, const std::string& pattern) {
  glob_t matches{};
  if (glob(pattern.c_str(), GLOB_ONLYDIR, nullptr, &matches) == 0) {
    for (size_t i = 0; i < matches.gl_pathc; ++i) append_unique(dirs, matches.gl_pathv[i]);
  }
  globfree(&matches);
}

// Python package directories found from the file system and the environment,
// without running python (which may be slow, absent or the wrong one).
std::vector<std::string> python_package_dirs() {
  std::vector<std::string> dirs;
  for (const char* root : {"VIRTUAL_ENV", "CONDA_PREFIX"}) {
    const std::string prefix = env_or_empty(root);
    if (!prefix.empty()) append_glob(dirs, prefix + "/lib/python3*/site-packages");
  }
  std::stringstream python_path(env_or_empty("PYTHONPATH"));
  for (std::string dir; std::getline(python_path, dir, ':');) {
    if (!dir.empty()) append_unique(dirs, dir);
  }
  const std::string home = env_or_empty("HOME");
  if (!home.empty()) append_glob(dirs, home + "/.local/lib/python3*/site-packages");
  append_glob(dirs, "/usr/local/lib/python3*/site-packages");
  append_glob(dirs, "/usr/local/lib/python3*/dist-packages");
  append_glob(dirs, "/usr/lib/python3*/site-packages");
  append_glob(dirs, "/usr/lib/python3/dist-packages");
  return dirs;
}

// The directories searched after the loader's default path, in order.
std::vector<std::string> library_dirs() {
  std::vector<std::string> dirs;
  const std::string cuda_home = env_or_empty("CUDA_HOME");
  if (!cuda_home.empty()) dirs.push_back(cuda_home + "/lib64");
  append_unique(dirs, "/usr/local/cuda/lib64");
  for (const std::string& site : python_package_dirs()) {
    for (const char* sub : kWheelLibDirs) append_unique(dirs, site + "/" + sub);
  }
  return dirs;
}

void append_library_names_in(std::vector<std::string>& candidates, const std::string& dir) {
  for (const char* name : kLibraryNames) append_unique(candidates, dir + "/" + name);
}

std::string_view trim(std::string_view s) {
  const size_t first = s.find_first_not_of(" \t\r");
  if (first == std::string_view::npos) return {};
  const size_t last = s.find_last_not_of(" \t\r");
  return s.substr(first, last - first + 1);
}

template <typename Fn>
void resolve(const DynLib& lib, const char* name, Fn& fn, std::string& missing) {
  fn = reinterpret_cast<Fn>(lib.symbol(name));
  if (fn == nullptr) missing += std::string(missing.empty() ? "" : ", ") + name;
}

Result<Api> resolve_api(DynLib lib) {
  Api api;
  std::string missing;
  resolve(lib, "nvrtcGetErrorString", api.GetErrorString, missing);
  resolve(lib, "nvrtcVersion", api.Version, missing);
  resolve(lib, "nvrtcCreateProgram", api.CreateProgram, missing);
  resolve(lib, "nvrtcDestroyProgram", api.DestroyProgram, missing);
  resolve(lib, "nvrtcCompileProgram", api.CompileProgram, missing);
  resolve(lib, "nvrtcGetProgramLogSize", api.GetProgramLogSize, missing);
  resolve(lib, "nvrtcGetProgramLog", api.GetProgramLog, missing);
  resolve(lib, "nvrtcGetCUBINSize", api.GetCUBINSize, missing);
  resolve(lib, "nvrtcGetCUBIN", api.GetCUBIN, missing);
  resolve(lib, "nvrtcGetPTXSize", api.GetPTXSize, missing);
  resolve(lib, "nvrtcGetPTX", api.GetPTX, missing);
  if (!missing.empty()) {
    return make_error(Status::kNvrtcUnavailable,
                      lib.path + " is not a usable NVRTC (too old?): missing " + missing);
  }
  if (api.Version(&api.major, &api.minor) != kNvrtcSuccess) api.major = api.minor = 0;
  api.lib = std::move(lib);
  return api;
}

Result<Api> load_api(const std::vector<std::string>& candidates) {
  Result<DynLib> lib = open_first(candidates, Status::kNvrtcUnavailable, "NVRTC (libnvrtc)");
  if (!lib) {
    const std::string hint =
        env_or_empty("FLASHJIT_NVRTC_PATH").empty()
            ? "install the CUDA toolkit or the nvidia-cuda-nvrtc wheel, or set "
              "FLASHJIT_NVRTC_PATH to the library or its directory"
            : "FLASHJIT_NVRTC_PATH is set, so only it was searched";
    return make_error(Status::kNvrtcUnavailable,
                      lib.error().message +
                          "\nNVRTC is needed only to compile kernels that are not in the cache; " +
                          hint);
  }
  return resolve_api(std::move(lib).value());
}

// Loaded once per process; a failure is remembered too.
const Result<Api>& loaded_api() {
  static const Result<Api> api = load_api(detail::search_candidates());
  return api;
}

std::string error_string(const Api& api, nvrtcResult code) {
  const char* text = api.GetErrorString(code);
  return text != nullptr ? text : "NVRTC error " + std::to_string(code);
}

std::string join(const std::vector<std::string>& items, const char* separator) {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : separator) + item;
  return out;
}

// Destroys the program on every path out of compile().
class Program {
 public:
  explicit Program(const Api& api) : api_(api) {}
  ~Program() {
    if (prog_ != nullptr) api_.DestroyProgram(&prog_);
  }
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;
  nvrtcProgram* out() { return &prog_; }
  nvrtcProgram get() const { return prog_; }

 private:
  const Api& api_;
  nvrtcProgram prog_ = nullptr;
};

std::string program_log(const Api& api, nvrtcProgram prog) {
  size_t size = 0;
  if (api.GetProgramLogSize(prog, &size) != kNvrtcSuccess || size <= 1) return "";
  std::string log(size, '\0');
  if (api.GetProgramLog(prog, log.data()) != kNvrtcSuccess) return "";
  log.resize(size - 1);  // the size counts the terminating NUL
  return log;
}

// True if `options` pass -v (--verbose) to ptxas, as in "--ptxas-options=-v".
bool asks_ptxas_verbose(const std::vector<std::string>& options) {
  for (const std::string& option : options) {
    const bool is_ptxas =
        option.rfind("--ptxas-options=", 0) == 0 || option.rfind("-Xptxas=", 0) == 0;
    if (!is_ptxas) continue;
    std::stringstream values(option.substr(option.find('=') + 1));
    for (std::string value; std::getline(values, value, ',');) {
      if (trim(value) == "-v" || trim(value) == "--verbose") return true;
    }
  }
  return false;
}

// NVRTC 12.9+ keeps its own compile cache, and a hit skips ptxas, so the -v
// lines never reach the log. When they are asked for, the cache is bypassed
// (flashjit caches cubins itself, so little is lost).
std::vector<std::string> effective_options(const Api& api, std::vector<std::string> options) {
  const bool has_nvrtc_cache = api.major > 12 || (api.major == 12 && api.minor >= 9);
  const bool already_off = std::find(options.begin(), options.end(), "--no-cache") != options.end();
  if (has_nvrtc_cache && !already_off && asks_ptxas_verbose(options)) {
    options.push_back("--no-cache");
  }
  return options;
}

Error compile_error(const Api& api, const char* call, nvrtcResult code, const std::string& name,
                    const std::vector<std::string>& options, const std::string& log) {
  return make_error(Status::kCompileFailed,
                    std::string(call) + " failed for " + name + ": " + error_string(api, code) +
                        "\noptions: " + join(options, " ") + "\nlog:\n" + log);
}

Result<std::vector<char>> read_cubin(const Api& api, nvrtcProgram prog) {
  size_t size = 0;
  nvrtcResult rc = api.GetCUBINSize(prog, &size);
  if (rc != kNvrtcSuccess || size == 0) {
    return make_error(Status::kInvalidArgument,
                      "NVRTC produced no cubin (" + error_string(api, rc) +
                          "): the options must name a real architecture "
                          "(--gpu-architecture=sm_XX), not a virtual one (compute_XX)");
  }
  std::vector<char> cubin(size);
  rc = api.GetCUBIN(prog, cubin.data());
  if (rc != kNvrtcSuccess) {
    return make_error(Status::kCompileFailed, "nvrtcGetCUBIN failed: " + error_string(api, rc));
  }
  return cubin;
}

Result<std::string> read_ptx(const Api& api, nvrtcProgram prog) {
  size_t size = 0;
  nvrtcResult rc = api.GetPTXSize(prog, &size);
  if (rc != kNvrtcSuccess || size == 0) {
    return make_error(Status::kInvalidArgument,
                      "NVRTC produced no PTX (" + error_string(api, rc) + ")");
  }
  std::string ptx(size, '\0');
  rc = api.GetPTX(prog, ptx.data());
  if (rc != kNvrtcSuccess) {
    return make_error(Status::kCompileFailed, "nvrtcGetPTX failed: " + error_string(api, rc));
  }
  while (!ptx.empty() && ptx.back() == '\0') ptx.pop_back();
  return ptx;
}

// ptxas -v lines (the spacing and the "ptxas ." prefix vary between versions):
//   ptxas info    : Compiling entry function 'flashjit_fwd' for 'sm_90'
//   ptxas info    : Function properties for flashjit_fwd
//   ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
//   ptxas info    : Used 168 registers, used 1 barriers, 49152 bytes smem, 400 bytes cmem[0]
constexpr std::string_view kEntryMarker = "Compiling entry function '";
constexpr std::string_view kPropertiesMarker = "Function properties for ";

// The function a line opens a section for, or "" if it opens none.
std::string_view section_name(std::string_view line) {
  if (size_t at = line.find(kEntryMarker); at != std::string_view::npos) {
    std::string_view rest = line.substr(at + kEntryMarker.size());
    return rest.substr(0, rest.find('\''));
  }
  if (size_t at = line.find(kPropertiesMarker); at != std::string_view::npos) {
    return trim(line.substr(at + kPropertiesMarker.size()));
  }
  return {};
}

// The integer just before `unit` ("168 registers" gives 168), or -1.
int count_before(std::string_view line, std::string_view unit) {
  const size_t at = line.find(unit);
  if (at == std::string_view::npos) return -1;
  size_t begin = at;
  while (begin > 0 && line[begin - 1] >= '0' && line[begin - 1] <= '9') --begin;
  if (begin == at) return -1;
  return std::atoi(std::string(line.substr(begin, at - begin)).c_str());
}

void read_counts(std::string_view line, PtxasInfo& info) {
  if (int n = count_before(line, " bytes stack frame"); n >= 0) info.stack_frame = n;
  if (int n = count_before(line, " bytes spill stores"); n >= 0) info.spill_stores = n;
  if (int n = count_before(line, " bytes spill loads"); n >= 0) info.spill_loads = n;
  if (int n = count_before(line, " registers"); n >= 0) {
    info.registers = n;
    // ptxas leaves out memory kinds it does not use: no "smem" means none.
    const int smem = count_before(line, " bytes smem");
    info.static_smem = smem >= 0 ? smem : 0;
  }
}

// What ptxas writes when it serialises a kernel's wgmma (C7511, C7518, ...)
// or adds a wait for them (C7517).
constexpr std::string_view kSerialized = "wgmma.mma_async instructions are serialized";
constexpr std::string_view kWaitInjected = "warpgroup.wait is injected";

bool any_note_has(const std::vector<std::string>& notes, std::string_view text) {
  for (const std::string& n : notes) {
    if (n.find(text) != std::string::npos) return true;
  }
  return false;
}

}  // namespace

bool PtxasInfo::wgmma_serialized() const { return any_note_has(wgmma_notes, kSerialized); }
bool PtxasInfo::wgmma_wait_injected() const { return any_note_has(wgmma_notes, kWaitInjected); }

PtxasInfo parse_ptxas_info(const std::string& log, const std::string& kernel) {
  PtxasInfo info;
  bool in_section = false;
  // ptxas names the function in the line itself, outside any section:
  //   ptxas info    : (C7511) Potential Performance Loss: wgmma.mma_async instructions are
  //   serialized due to insufficient register resources for the wgmma pipeline in the function 'k'
  //   ptxas info    : (C7517) warpgroup.wait is injected in around line 1080 by compiler to allow
  //   use of registers defined by GMMA in function 'k'
  const std::string quoted = "'" + kernel + "'";
  std::string_view rest = log;
  while (!rest.empty()) {
    const size_t eol = rest.find('\n');
    const std::string_view line = rest.substr(0, eol);
    rest = eol == std::string_view::npos ? std::string_view{} : rest.substr(eol + 1);
    // A kernel's lines run from its own header to the next function's header.
    if (std::string_view name = section_name(line); !name.empty()) in_section = name == kernel;
    if (in_section) read_counts(line, info);
    if (line.find(quoted) == std::string_view::npos) continue;
    if (line.find(kSerialized) == std::string_view::npos && line.find(kWaitInjected) == std::string_view::npos) {
      continue;
    }
    const size_t code = line.find("(C");
    info.wgmma_notes.emplace_back(line.substr(code == std::string_view::npos ? 0 : code));
  }
  return info;
}

namespace detail {

std::vector<std::string> search_candidates() {
  std::vector<std::string> candidates;
  const std::string explicit_path = env_or_empty("FLASHJIT_NVRTC_PATH");
  if (!explicit_path.empty()) {
    // An explicit choice is the only one: silently using another NVRTC would
    // hide the mistake and compile with a different version than asked for.
    if (is_directory(explicit_path)) {
      append_library_names_in(candidates, explicit_path);
    } else {
      candidates.push_back(explicit_path);
    }
    return candidates;
  }
  for (const char* name : kLibraryNames) candidates.push_back(name);
  // Only files that exist: the error then lists real failures, not every
  // directory that might have held a library.
  for (const std::string& dir : library_dirs()) {
    for (const char* name : kLibraryNames) {
      const std::string path = dir + "/" + name;
      if (is_file(path)) append_unique(candidates, path);
    }
  }
  return candidates;
}

Result<std::string> try_load(const std::vector<std::string>& candidates) {
  Result<Api> api = load_api(candidates);
  if (!api) return api.error();
  return api->lib.path;
}

}  // namespace detail

Result<void> load() {
  const Result<Api>& api = loaded_api();
  if (!api) return api.error();
  return {};
}

bool available() { return loaded_api().ok(); }

std::string library_path() {
  const Result<Api>& api = loaded_api();
  return api ? api->lib.path : "";
}

Result<std::string> version() {
  const Result<Api>& api = loaded_api();
  if (!api) return api.error();
  int major = 0, minor = 0;
  const nvrtcResult rc = api->Version(&major, &minor);
  if (rc != kNvrtcSuccess) {
    return make_error(Status::kNvrtcUnavailable, "nvrtcVersion failed: " + error_string(*api, rc));
  }
  return std::to_string(major) + "." + std::to_string(minor);
}

Result<CompileOutput> compile(const std::string& source, const std::string& name,
                              const std::vector<Header>& headers,
                              const std::vector<std::string>& requested_options, bool want_cubin,
                              bool want_ptx) {
  const Result<Api>& loaded = loaded_api();
  if (!loaded) return loaded.error();
  const Api& api = *loaded;
  const std::vector<std::string> options = effective_options(api, requested_options);

  std::vector<const char*> header_sources, header_names;
  for (const Header& h : headers) {
    header_sources.push_back(h.source.c_str());
    header_names.push_back(h.name.c_str());
  }
  Program prog(api);
  nvrtcResult rc =
      api.CreateProgram(prog.out(), source.c_str(), name.c_str(), static_cast<int>(headers.size()),
                        header_sources.data(), header_names.data());
  if (rc != kNvrtcSuccess) return compile_error(api, "nvrtcCreateProgram", rc, name, options, "");

  std::vector<const char*> option_ptrs;
  for (const std::string& o : options) option_ptrs.push_back(o.c_str());
  rc = api.CompileProgram(prog.get(), static_cast<int>(option_ptrs.size()), option_ptrs.data());
  CompileOutput out;
  out.log = program_log(api, prog.get());
  if (rc != kNvrtcSuccess) {
    return compile_error(api, "nvrtcCompileProgram", rc, name, options, out.log);
  }

  if (want_cubin) {
    Result<std::vector<char>> cubin = read_cubin(api, prog.get());
    if (!cubin) return cubin.error();
    out.cubin = std::move(cubin).value();
  }
  if (want_ptx) {
    Result<std::string> ptx = read_ptx(api, prog.get());
    if (!ptx) return ptx.error();
    out.ptx = std::move(ptx).value();
  }
  return out;
}

}  // namespace flashjit::nvrtc
