// flashjit: look at what the library generates, and manage the disk cache.
//
//   flashjit source SPEC               the generated CUDA source
//   flashjit ptx SPEC                  NVRTC's PTX (virtual arch compute_XX)
//   flashjit resources SPEC [--json]   registers, spills, stack, shared memory per kernel
//   flashjit cache list|stats [--json] | verify [--remove-bad] | clear
//   flashjit cache cubin SPEC -o FILE  the cached cubin this build would launch (for cuobjdump/nvdisasm)
//
// SPEC is a canonical spec string (fwd_bf16_d128_causal_padded_sm90, the tile
// suffix optional) or spec flags (--direction fwd --dtype bf16 --head-dim 128
// --causal --padded --arch sm90 ...). Exit codes: 0 success, 1 error, 2 bad usage.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "compiler/codegen.h"
#include "compiler/spec.h"
#include "compiler/tile_config.h"
#include "runtime/cache.h"
#include "runtime/flashjit.h"
#include "runtime/jit.h"
#include "runtime/nvrtc.h"
#include "tools/spec_flags.h"

namespace {

using flashjit::Error;
using flashjit::KernelSpec;
using flashjit::Result;

constexpr int kExitError = 1;
constexpr int kExitUsage = 2;

int report(const Error& e) {
  std::fprintf(stderr, "flashjit: error (%s): %s\n", flashjit::status_name(e.status),
               e.message.c_str());
  return kExitError;
}

/// A subcommand that takes one spec.
struct SpecCommand {
  std::string text;
  flashjit::tools::SpecFlags flags;

  void add_to(CLI::App* app) {
    app->add_option("spec", text, "canonical spec string, e.g. fwd_bf16_d128_causal_padded_sm90");
    flags.add_to(app);
  }
};

/// Resolves a SpecCommand; returns the exit code on failure.
Result<KernelSpec> resolve(const SpecCommand& c, int* exit_code) {
  if (!c.text.empty() && c.flags.given()) {
    *exit_code = kExitUsage;
    return flashjit::make_error(flashjit::Status::kInvalidArgument,
                                "give a spec string or spec flags, not both");
  }
  if (c.text.empty() && !c.flags.given()) {
    *exit_code = kExitUsage;
    return flashjit::make_error(flashjit::Status::kInvalidArgument,
                                "give a spec string (e.g. fwd_bf16_d128_causal_padded_sm90) or "
                                "spec flags (--dtype bf16 --head-dim 128 ...)");
  }
  *exit_code = kExitError;
  return flashjit::tools::resolve_spec(c.text, c.flags);
}

std::string module_name(const KernelSpec& spec) { return spec.to_string() + ".cu"; }

int cmd_source(const SpecCommand& c) {
  int code = 0;
  auto spec = resolve(c, &code);
  if (!spec) {
    report(spec.error());
    return code;
  }
  std::fputs(flashjit::generate_source(*spec).c_str(), stdout);
  return 0;
}

int cmd_ptx(const SpecCommand& c) {
  int code = 0;
  auto spec = resolve(c, &code);
  if (!spec) {
    report(spec.error());
    return code;
  }
  auto out = flashjit::nvrtc::compile(flashjit::generate_source(*spec), module_name(*spec),
                                      flashjit::template_headers(),
                                      flashjit::nvrtc_options(*spec, /*for_ptx=*/true),
                                      /*want_cubin=*/false, /*want_ptx=*/true);
  if (!out) return report(out.error());
  std::fputs(out->ptx.c_str(), stdout);
  return 0;
}

// "-" for the -1 parse_ptxas_info uses for a missing value.
std::string cell(int v) { return v < 0 ? "-" : std::to_string(v); }
nlohmann::json json_value(int v) { return v < 0 ? nlohmann::json(nullptr) : nlohmann::json(v); }

int cmd_resources(const SpecCommand& c, bool json, bool print_log) {
  int code = 0;
  auto spec = resolve(c, &code);
  if (!spec) {
    report(spec.error());
    return code;
  }
  const auto t0 = std::chrono::steady_clock::now();
  auto out = flashjit::nvrtc::compile(flashjit::generate_source(*spec), module_name(*spec),
                                      flashjit::template_headers(),
                                      flashjit::nvrtc_options(*spec, /*for_ptx=*/false),
                                      /*want_cubin=*/true, /*want_ptx=*/false);
  if (!out) return report(out.error());
  const double nvrtc_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  struct Row {
    std::string name;
    flashjit::nvrtc::PtxasInfo info;
    int threads = -1;       // known for the main kernel only
    int dynamic_smem = -1;  // known for the main kernel and the bwd dQ kernel
  };
  std::vector<Row> rows;
  const std::vector<std::string> names = flashjit::kernel_names(*spec);
  for (size_t i = 0; i < names.size(); ++i) {
    Row r{names[i], flashjit::nvrtc::parse_ptxas_info(out->log, names[i])};
    if (i == 0) {
      r.threads = flashjit::threads_per_block(*spec);
      r.dynamic_smem = flashjit::smem_bytes(*spec);
    } else if (names[i] == "flashjit_bwd_dq") {
      r.dynamic_smem = flashjit::bwd_dq_smem_bytes(*spec);
    }
    rows.push_back(std::move(r));
  }

  if (json) {
    nlohmann::json j;
    j["spec"] = spec->to_string();
    j["nvrtc_s"] = nvrtc_s;
    j["max_dynamic_smem"] = flashjit::max_smem_bytes(spec->arch);
    j["kernels"] = nlohmann::json::array();
    for (const Row& r : rows) {
      j["kernels"].push_back({{"name", r.name},
                              {"registers", json_value(r.info.registers)},
                              {"spill_stores", json_value(r.info.spill_stores)},
                              {"spill_loads", json_value(r.info.spill_loads)},
                              {"stack_frame", json_value(r.info.stack_frame)},
                              {"static_smem", json_value(r.info.static_smem)},
                              {"dynamic_smem", json_value(r.dynamic_smem)},
                              {"threads", json_value(r.threads)},
                              {"wgmma_serialized", r.info.wgmma_serialized()},
                              {"wgmma_wait_injected", r.info.wgmma_wait_injected()},
                              {"wgmma_notes", r.info.wgmma_notes}});
    }
    std::cout << j.dump(2) << "\n";
  } else {
    fmt::print("spec: {}\nnvrtc: {:.2f} s   dynamic smem limit: {} bytes\n", spec->to_string(),
               nvrtc_s, flashjit::max_smem_bytes(spec->arch));
    fmt::print("{:<26} {:>7} {:>5} {:>11} {:>10} {:>6} {:>12} {:>13}\n", "kernel", "threads",
               "regs", "spill_store", "spill_load", "stack", "static_smem", "dynamic_smem");
    for (const Row& r : rows) {
      fmt::print("{:<26} {:>7} {:>5} {:>11} {:>10} {:>6} {:>12} {:>13}\n", r.name, cell(r.threads),
                 cell(r.info.registers), cell(r.info.spill_stores), cell(r.info.spill_loads),
                 cell(r.info.stack_frame), cell(r.info.static_smem), cell(r.dynamic_smem));
    }
    for (const Row& r : rows) {
      for (const std::string& note : r.info.wgmma_notes) fmt::print("warning: {}: {}\n", r.name, note);
    }
  }
  if (print_log) std::fprintf(stderr, "%s\n", out->log.c_str());
  return 0;
}

std::string human_age(int64_t mtime) {
  const int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  const int64_t s = now > mtime ? now - mtime : 0;
  if (s < 120) return fmt::format("{}s", s);
  if (s < 2 * 3600) return fmt::format("{}m", s / 60);
  if (s < 2 * 86400) return fmt::format("{}h", s / 3600);
  return fmt::format("{}d", s / 86400);
}

flashjit::DiskCache open_cache() {
  return flashjit::DiskCache(flashjit::CacheOptions::from_env(), [](const std::string& w) {
    std::fprintf(stderr, "flashjit: warning: %s\n", w.c_str());
  });
}

nlohmann::json entry_json(const flashjit::CacheEntryInfo& e) {
  return {{"path", e.path},   {"spec", e.spec},         {"bytes", e.bytes},
          {"mtime", e.mtime}, {"valid", e.valid},       {"problem", e.problem},
          {"readonly", e.readonly}};
}

int cmd_cache_list(bool json) {
  auto cache = open_cache();
  const auto entries = cache.list();
  if (json) {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& e : entries) j.push_back(entry_json(e));
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  fmt::print("{:<60} {:>10} {:>6} {:<6}\n", "spec", "bytes", "age", "valid");
  for (const auto& e : entries) {
    std::string note = e.valid ? "yes" : "NO: " + e.problem;
    if (e.readonly) note += " (read-only layer)";
    fmt::print("{:<60} {:>10} {:>6} {}\n", e.spec, e.bytes, human_age(e.mtime), note);
  }
  return 0;
}

int cmd_cache_stats(bool json) {
  auto cache = open_cache();
  const auto s = cache.stats();
  if (json) {
    nlohmann::json j = {{"dir", s.dir},         {"disk_enabled", s.disk_enabled},
                        {"writable", s.writable}, {"entries", s.entries},
                        {"bytes", s.bytes},     {"max_bytes", s.max_bytes},
                        {"readonly_dirs", cache.options().readonly_dirs}};
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  fmt::print("dir:           {}\n", s.dir);
  for (const auto& d : cache.options().readonly_dirs) fmt::print("read-only:     {}\n", d);
  fmt::print("disk enabled:  {}\nwritable:      {}\nentries:       {}\n", s.disk_enabled ? "yes" : "no",
             s.writable ? "yes" : "no", s.entries);
  fmt::print("bytes:         {} ({:.1f} MiB of {:.0f} MiB)\n", s.bytes, s.bytes / 1048576.0,
             s.max_bytes / 1048576.0);
  return 0;
}

int cmd_cache_verify(bool remove_bad) {
  auto cache = open_cache();
  const auto total = cache.list().size();
  const auto bad = cache.verify(remove_bad);
  for (const auto& e : bad) {
    fmt::print("{} {}: {}{}\n", remove_bad && !e.readonly ? "removed" : "invalid", e.path,
               e.problem, e.readonly ? " (read-only layer, left in place)" : "");
  }
  fmt::print("{} entries, {} invalid\n", total, bad.size());
  size_t remaining = 0;
  for (const auto& e : bad) remaining += (!remove_bad || e.readonly) ? 1 : 0;
  return remaining == 0 ? 0 : kExitError;
}

int cmd_cache_clear() {
  auto cache = open_cache();
  auto n = cache.clear();
  if (!n) return report(n.error());
  fmt::print("removed {} entries from {}\n", *n, cache.options().dir);
  return 0;
}

/// Writes the cubin cached for `spec` under this build's key (spec, templates, NVRTC, options, version): the
/// kernel a launch of this build would load, for reading its SASS on a machine with cuobjdump or nvdisasm.
int cmd_cache_cubin(const SpecCommand& c, const std::string& out_path) {
  int code = 0;
  auto spec = resolve(c, &code);
  if (!spec) {
    report(spec.error());
    return code;
  }
  auto cache = open_cache();
  const flashjit::CacheKey key = flashjit::cache_key(*spec);
  const auto cubin = flashjit::find_cached(cache, *spec);
  if (!cubin) {
    std::vector<std::string> others;
    for (const auto& e : cache.list())
      if (e.spec == key.spec) others.push_back(e.path + (e.valid ? "" : " (invalid: " + e.problem + ")"));
    std::string msg = fmt::format("no valid entry for {} under this build's key ({}) in {}", key.spec,
                                  key.file_name(), cache.options().dir);
    if (!others.empty()) {
      msg += "; entries of that spec from other builds or NVRTC versions:";
      for (const auto& o : others) msg += "\n  " + o;
    } else {
      msg += "; compile it first (flashjit-warmup " + key.spec + ")";
    }
    return report(flashjit::make_error(flashjit::Status::kCacheError, msg));
  }
  std::ofstream out(out_path, std::ios::binary | std::ios::trunc);
  out.write(cubin->data(), static_cast<std::streamsize>(cubin->size()));
  out.close();
  if (!out) {
    return report(flashjit::make_error(flashjit::Status::kInvalidArgument, "cannot write " + out_path));
  }
  fmt::print("{}: {} bytes from {}\n", out_path, cubin->size(), key.file_name());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"flashjit: inspect generated FlashAttention kernels and the kernel cache"};
  app.require_subcommand(1);
  app.set_version_flag("--version", flashjit::version());

  SpecCommand source_cmd, ptx_cmd, resources_cmd;
  auto* source = app.add_subcommand("source", "print the generated CUDA source of a spec");
  source_cmd.add_to(source);
  auto* ptx = app.add_subcommand("ptx", "compile a spec with NVRTC for the virtual arch and print the PTX");
  ptx_cmd.add_to(ptx);
  auto* resources = app.add_subcommand(
      "resources", "registers, spills, stack and shared memory of each kernel of a spec (ptxas -v)");
  resources_cmd.add_to(resources);
  bool resources_json = false, resources_log = false;
  resources->add_flag("--json", resources_json, "print JSON");
  resources->add_flag("--log", resources_log, "also print NVRTC's log on stderr");

  auto* cache = app.add_subcommand("cache", "the disk cache (FLASHJIT_CACHE_DIR, ...)");
  cache->require_subcommand(1);
  bool list_json = false, stats_json = false, remove_bad = false;
  auto* list = cache->add_subcommand("list", "every entry: spec, bytes, age, valid");
  list->add_flag("--json", list_json, "print JSON");
  auto* stats = cache->add_subcommand("stats", "directory, entry count, size");
  stats->add_flag("--json", stats_json, "print JSON");
  auto* verify = cache->add_subcommand("verify", "check every entry (exit 1 if any is invalid)");
  verify->add_flag("--remove-bad", remove_bad, "remove the invalid entries");
  auto* clear = cache->add_subcommand("clear", "remove every entry of the user directory");
  SpecCommand cubin_cmd;
  std::string cubin_out;
  auto* cubin = cache->add_subcommand("cubin", "write the cubin cached for a spec under this build's key");
  cubin_cmd.add_to(cubin);
  cubin->add_option("-o,--out", cubin_out, "the file to write")->required();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);  // prints help, the version or the usage error
    return code == 0 ? 0 : kExitUsage;
  }

  try {
    if (source->parsed()) return cmd_source(source_cmd);
    if (ptx->parsed()) return cmd_ptx(ptx_cmd);
    if (resources->parsed()) return cmd_resources(resources_cmd, resources_json, resources_log);
    if (list->parsed()) return cmd_cache_list(list_json);
    if (stats->parsed()) return cmd_cache_stats(stats_json);
    if (verify->parsed()) return cmd_cache_verify(remove_bad);
    if (clear->parsed()) return cmd_cache_clear();
    if (cubin->parsed()) return cmd_cache_cubin(cubin_cmd, cubin_out);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "flashjit: internal error: %s\n", e.what());
    return kExitError;
  }
  std::fputs(app.help().c_str(), stderr);
  return kExitUsage;
}
