#include "runtime/jit.h"

#include <dirent.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <chrono>
#include <fstream>
#include <iterator>

#include "compiler/codegen.h"
#include "compiler/templates.h"
#include "compiler/tile_config.h"
#include "runtime/nvrtc.h"

namespace flashjit {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i ? sep : "") + v[i];
  return out;
}

constexpr const char* kNvrtcField = "nvrtc=";

std::string key_text(const KernelSpec& spec, const std::string& nvrtc_version) {
  return fmt::format(
      "flashjit-cache-key 1\nspec={}\ntemplates={:016x}\n{}{}\narch={}\noptions={}\nflashjit={}\n",
      spec.to_string(), templates_hash(), kNvrtcField, nvrtc_version, nvrtc_arch_name(spec.arch),
      join(nvrtc_options(spec), " "), FLASHJIT_VERSION);
}

// The key text with the NVRTC line removed, for lookups without NVRTC.
std::string without_nvrtc_line(const std::string& text) {
  const size_t pos = text.find(std::string("\n") + kNvrtcField);
  if (pos == std::string::npos) return text;
  const size_t end = text.find('\n', pos + 1);
  return text.substr(0, pos) + (end == std::string::npos ? "" : text.substr(end));
}

bool read_file(const std::string& path, std::vector<char>* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  out->assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return true;
}

}  // namespace

const driver::Function* LoadedModule::function(const std::string& name) const {
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == name) return &functions[i];
  }
  return nullptr;
}

CacheKey cache_key(const KernelSpec& spec) {
  std::string nvrtc_version = "unavailable";
  if (nvrtc::available()) {
    if (auto v = nvrtc::version()) nvrtc_version = *v;
  }
  CacheKey key;
  key.spec = spec.to_string();
  key.text = key_text(spec, nvrtc_version);
  return key;
}

Jit::Jit(CacheOptions options, std::function<void(const std::string&)> warn,
         std::function<void(const CompileRecord&)> on_compile)
    : disk_(std::move(options), warn), warn_(std::move(warn)), on_compile_(std::move(on_compile)) {}

std::shared_ptr<std::mutex> Jit::key_mutex(const std::string& key) {
  std::lock_guard<std::mutex> lock(key_mu_);
  auto& m = key_mutexes_[key];
  if (!m) m = std::make_shared<std::mutex>();
  return m;
}

Result<std::vector<char>> Jit::compile_with_nvrtc(const KernelSpec& spec, CompileRecord* record) {
  auto t0 = Clock::now();
  const std::string source = generate_source(spec);
  record->codegen_s = seconds_since(t0);

  t0 = Clock::now();
  auto out = nvrtc::compile(source, spec.to_string() + ".cu", template_headers(),
                            nvrtc_options(spec), /*want_cubin=*/true, /*want_ptx=*/false);
  record->nvrtc_s = seconds_since(t0);
  if (!out) {
    return make_error(out.error().status,
                      fmt::format("compiling {}: {}", spec.to_string(), out.error().message));
  }
  const auto info = nvrtc::parse_ptxas_info(out->log, kernel_names(spec).front());
  if (!info.wgmma_notes.empty() && warn_) {
    warn_(fmt::format("{}: ptxas slowed the kernel's wgmma instructions ({}); results are right but slow. "
                      "This NVRTC/ptxas version needs a template change: please report it",
                      spec.to_string(), fmt::join(info.wgmma_notes, "; ")));
  }
  record->registers = info.registers;
  if (info.spill_stores >= 0 && info.stack_frame >= 0) {
    record->spill_bytes = std::max(info.spill_stores, info.stack_frame);
  }
  return std::move(out->cubin);
}

namespace {

// Without NVRTC we cannot know which version built an entry, so accept any
// entry for this spec whose key matches on every other field.
std::optional<std::vector<char>> find_without_nvrtc(const DiskCache& disk, const CacheKey& key) {
  const std::string wanted = without_nvrtc_line(key.text);
  std::vector<std::string> dirs = disk.options().readonly_dirs;
  if (disk.options().disk_enabled) dirs.push_back(disk.options().dir);
  const std::string prefix = key.spec + "-";
  for (const std::string& dir : dirs) {
    DIR* d = opendir(dir.c_str());
    if (!d) continue;
    while (dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      if (name.rfind(prefix, 0) != 0 || name.size() < 4 || name.substr(name.size() - 4) != ".fjc") continue;
      std::vector<char> bytes;
      if (!read_file(dir + "/" + name, &bytes)) continue;
      std::string text;
      auto payload = decode_cache_entry(bytes, "", &text);
      if (payload && without_nvrtc_line(text) == wanted) {
        closedir(d);
        return std::move(payload.value());
      }
    }
    closedir(d);
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::vector<char>> find_cached(DiskCache& disk, const KernelSpec& spec) {
  const CacheKey key = cache_key(spec);
  if (nvrtc::available()) return disk.load(key);
  return find_without_nvrtc(disk, key);
}

Result<std::shared_ptr<const std::vector<char>>> Jit::cubin(const KernelSpec& spec,
                                                           CompileRecord* record) {
  const auto t_start = Clock::now();
  const std::string name = spec.to_string();
  record->spec = name;
  record->smem_bytes = smem_bytes(spec);
  {
    std::shared_lock<std::shared_mutex> lock(mu_);
    if (auto it = cubins_.find(name); it != cubins_.end()) {
      record->outcome = CacheOutcome::kMemoryHit;
      record->compile_s = seconds_since(t_start);
      return it->second;
    }
  }
  // One compile per key inside this process; the disk cache's file lock does
  // the same across processes.
  auto key_lock_mutex = key_mutex(name);
  std::lock_guard<std::mutex> key_lock(*key_lock_mutex);
  {
    std::shared_lock<std::shared_mutex> lock(mu_);
    if (auto it = cubins_.find(name); it != cubins_.end()) {
      record->outcome = CacheOutcome::kMemoryHit;
      record->compile_s = seconds_since(t_start);
      return it->second;
    }
  }

  const CacheKey key = cache_key(spec);
  record->key = fmt::format("{:016x}", key.hash());
  std::vector<char> bytes;
  if (!nvrtc::available()) {
    auto t0 = Clock::now();
    auto found = find_without_nvrtc(disk_, key);
    record->disk_s = seconds_since(t0);
    if (!found) {
      auto err = nvrtc::load();  // for its message: where we looked
      return make_error(Status::kNvrtcUnavailable,
                        fmt::format("{} is not in the kernel cache and NVRTC is not available to "
                                    "compile it: {}",
                                    name, err ? std::string("unknown reason") : err.error().message));
    }
    record->outcome = CacheOutcome::kDiskHit;
    bytes = std::move(*found);
  } else {
    CacheOutcome outcome = CacheOutcome::kCompiled;
    auto t0 = Clock::now();
    auto got = disk_.get_or_compile(
        key, [&]() { return compile_with_nvrtc(spec, record); }, &outcome);
    record->disk_s = std::max(0.0, seconds_since(t0) - record->codegen_s - record->nvrtc_s);
    if (!got) return got.error();
    record->outcome = outcome;
    bytes = std::move(got.value());
  }
  auto shared = std::make_shared<const std::vector<char>>(std::move(bytes));
  {
    std::unique_lock<std::shared_mutex> lock(mu_);
    cubins_[name] = shared;
  }
  record->compile_s = seconds_since(t_start);
  return shared;
}

Result<std::shared_ptr<const LoadedModule>> Jit::load(const KernelSpec& spec, int device,
                                                      CompileRecord* record) {
  const auto t_start = Clock::now();
  const std::string name = fmt::format("{}/{}", device, spec.to_string());
  {
    std::shared_lock<std::shared_mutex> lock(mu_);
    if (auto it = modules_.find(name); it != modules_.end()) {
      record->spec = spec.to_string();
      record->outcome = CacheOutcome::kMemoryHit;
      record->smem_bytes = it->second->smem_bytes;
      record->registers = it->second->functions.front().num_regs;
      record->spill_bytes = it->second->functions.front().local_bytes;
      record->compile_s = seconds_since(t_start);
      return it->second;
    }
  }
  auto cubin_bytes = cubin(spec, record);
  if (!cubin_bytes) return cubin_bytes.error();

  auto key_lock_mutex = key_mutex(name);
  std::lock_guard<std::mutex> key_lock(*key_lock_mutex);
  {
    std::shared_lock<std::shared_mutex> lock(mu_);
    if (auto it = modules_.find(name); it != modules_.end()) {
      record->compile_s = seconds_since(t_start);
      return it->second;
    }
  }
  auto t0 = Clock::now();
  auto module = driver::Module::load(**cubin_bytes);
  if (!module) {
    return make_error(module.error().status,
                      fmt::format("loading {}: {}", spec.to_string(), module.error().message));
  }
  auto loaded = std::make_shared<LoadedModule>();
  loaded->spec = spec;
  loaded->smem_bytes = smem_bytes(spec);
  loaded->names = kernel_names(spec);
  for (const std::string& fn_name : loaded->names) {
    auto fn = module->function(fn_name.c_str());
    if (!fn) return fn.error();
    // Kernels above the default 48 KiB of dynamic shared memory must opt in.
    int fn_smem = 0;
    if (fn_name == loaded->names.front()) fn_smem = loaded->smem_bytes;
    else if (fn_name == "flashjit_bwd_dq") fn_smem = bwd_dq_smem_bytes(spec);
    if (fn_smem > 48 * 1024) {
      if (auto r = driver::set_max_dynamic_smem(*fn, fn_smem); !r) return r.error();
    }
    loaded->functions.push_back(*fn);
  }
  loaded->module = std::move(module.value());
  record->load_s = seconds_since(t0);
  record->registers = loaded->functions.front().num_regs;
  record->spill_bytes = loaded->functions.front().local_bytes;
  {
    std::unique_lock<std::shared_mutex> lock(mu_);
    modules_[name] = loaded;
  }
  record->compile_s = seconds_since(t_start);
  if (record->outcome != CacheOutcome::kMemoryHit && on_compile_) on_compile_(*record);
  return std::shared_ptr<const LoadedModule>(loaded);
}

}  // namespace flashjit
