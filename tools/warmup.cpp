// flashjit-warmup: compiles a list of specs into the disk cache, so the first
// launch of each is a disk hit. Needs NVRTC, no GPU.
//
//   flashjit-warmup fwd_bf16_d128_causal_padded_sm90 bwd_f32ieee_d64_noncausal_even_sm90_atomic
//   flashjit-warmup --direction bwd --dtype f32 --precision ieee --head-dim 64 --even
//   flashjit-warmup --grid seed --arch sm90 -j 2 --json warmup.json
//   flashjit-warmup --specs-json specs.json     # ["fwd_bf16_d64_...", {"dtype": "f32", ...}]
//   flashjit-warmup --list fwd_bf16_d64_causal_padded_sm90   # what would be compiled
//
// A spec named without its tile (a string without the suffix, the flags, a
// JSON object) stands for every kernel the runtime may launch for it
// (launch_specs): on sm90 the Hopper forward with each tile the lengths may
// pick, and the named mma.sync spec. A spec with its tile is compiled alone.
//
// Prints a progress line per spec on stderr, then a table and a summary on
// stdout. Afterwards every kernel is looked up in the cache again: a warm-up
// that compiled kernels it could not keep (an unwritable directory, a full
// disk, FLASHJIT_CACHE_MAX_MB too small for the list) has warmed nothing, and
// says so. Exit codes: 0 every spec compiled or was cached and is in the cache
// now, 1 a spec failed (its error, with the NVRTC log, is printed) or is not
// in the cache, 2 bad usage (FLASHJIT_CACHE_DISABLE=1 among it).
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "compiler/spec.h"
#include "runtime/cache.h"
#include "runtime/flashjit.h"
#include "runtime/jit.h"
#include "tools/spec_flags.h"

namespace {

using flashjit::Error;
using flashjit::KernelSpec;
using flashjit::Result;
using flashjit::Status;

constexpr int kExitError = 1;
constexpr int kExitUsage = 2;

/// What happened to one spec.
struct Outcome {
  std::string spec;
  bool ok = false;
  Error error;
  flashjit::CompileRecord record;
  double wall_s = 0;
  bool in_cache = false;  ///< a valid entry found after every compile finished
};

/// One element of --specs-json: a spec string, or an object of spec fields
/// (direction, dtype, precision, head_dim, causal, padding, arch, deterministic).
Result<KernelSpec> spec_from_json(const nlohmann::json& item, const std::string& default_arch,
                                  bool* names_tile) {
  *names_tile = false;
  if (item.is_string()) return KernelSpec::parse(item.get<std::string>(), names_tile);
  if (!item.is_object()) {
    return flashjit::make_error(Status::kInvalidSpec,
                                "each element must be a spec string or an object; got " + item.dump());
  }
  static const std::set<std::string> kKeys = {"direction", "dtype",   "precision", "head_dim",
                                              "causal",    "padding", "arch",      "deterministic"};
  for (const auto& [key, value] : item.items()) {
    if (!kKeys.count(key)) {
      return flashjit::make_error(
          Status::kInvalidSpec,
          fmt::format("unknown key '{}' in {} (known: direction, dtype, precision, head_dim, "
                      "causal, padding, arch, deterministic)",
                      key, item.dump()));
    }
  }
  flashjit::tools::SpecFlags f;
  try {
    f.direction = item.value("direction", std::string("fwd"));
    f.dtype = item.value("dtype", std::string("bf16"));
    f.precision = item.value("precision", std::string());
    f.head_dim = item.value("head_dim", 128);
    f.causal = item.value("causal", false);
    const std::string padding = item.value("padding", std::string("padded"));
    if (padding != "even" && padding != "padded") {
      return flashjit::make_error(Status::kInvalidSpec,
                                  fmt::format("padding must be even or padded; got '{}' in {}",
                                              padding, item.dump()));
    }
    f.even = padding == "even";
    f.arch = item.value("arch", default_arch);
    f.deterministic = item.value("deterministic", false);
  } catch (const nlohmann::json::exception& e) {
    return flashjit::make_error(Status::kInvalidSpec,
                                fmt::format("bad field type in {}: {}", item.dump(), e.what()));
  }
  auto spec = f.spec();
  if (!spec) {
    return flashjit::make_error(spec.error().status,
                                fmt::format("{} (in {})", spec.error().message, item.dump()));
  }
  return spec;
}

/// The specs of a --specs-json file, each with whether it names its tile.
Result<std::vector<std::pair<KernelSpec, bool>>> specs_from_file(const std::string& path,
                                                                 const std::string& default_arch) {
  std::ifstream in(path);
  if (!in) {
    return flashjit::make_error(Status::kInvalidArgument,
                                fmt::format("--specs-json: cannot open '{}'", path));
  }
  nlohmann::json j;
  try {
    in >> j;
  } catch (const nlohmann::json::exception& e) {
    return flashjit::make_error(Status::kInvalidArgument,
                                fmt::format("--specs-json: '{}' is not JSON: {}", path, e.what()));
  }
  if (!j.is_array()) {
    return flashjit::make_error(Status::kInvalidArgument,
                                fmt::format("--specs-json: '{}' must hold a JSON array", path));
  }
  std::vector<std::pair<KernelSpec, bool>> out;
  for (const auto& item : j) {
    bool names_tile = false;
    auto s = spec_from_json(item, default_arch, &names_tile);
    if (!s) {
      return flashjit::make_error(s.error().status,
                                  fmt::format("--specs-json {}: {}", path, s.error().message));
    }
    out.emplace_back(*s, names_tile);
  }
  return out;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

nlohmann::json record_json(const Outcome& o) {
  nlohmann::json j = {{"spec", o.spec}, {"ok", o.ok}, {"wall_s", o.wall_s}};
  if (!o.ok) {
    j["status"] = flashjit::status_name(o.error.status);
    j["error"] = o.error.message;
    return j;
  }
  const auto& r = o.record;
  j["status"] = "ok";
  j["key"] = r.key;
  j["outcome"] = flashjit::to_string(r.outcome);
  j["codegen_s"] = r.codegen_s;
  j["nvrtc_s"] = r.nvrtc_s;
  j["disk_s"] = r.disk_s;
  j["load_s"] = r.load_s;
  j["compile_s"] = r.compile_s;
  j["registers"] = r.registers;
  j["spill_bytes"] = r.spill_bytes;
  j["smem_bytes"] = r.smem_bytes;
  j["in_cache"] = o.in_cache;
  return j;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"flashjit-warmup: compile kernel specs into the disk cache (no GPU needed)"};
  std::vector<std::string> spec_strings;
  std::string specs_json, grid, json_out;
  bool list_only = false;
  unsigned hw = std::thread::hardware_concurrency();
  int jobs = hw > 0 ? static_cast<int>(hw) : 1;
  flashjit::tools::SpecFlags flags;
  app.add_option("specs", spec_strings,
                 "canonical spec strings; without the tile suffix, every kernel a call may launch for the spec");
  flags.add_to(&app, "One spec from flags (--arch also applies to --grid and --specs-json objects)");
  app.add_option("--specs-json", specs_json,
                 "JSON array of spec strings or objects {direction, dtype, precision, head_dim, "
                 "causal, padding, arch, deterministic}")
      ->check(CLI::ExistingFile);
  app.add_option("--grid", grid, "seed: the seed benchmark grid; all: every supported spec")
      ->check(CLI::IsMember({"seed", "all"}));
  app.add_option("-j,--jobs", jobs, "parallel compiles")->check(CLI::Range(1, 256));
  app.add_option("--json", json_out, "write per-spec records to this file");
  app.add_flag("--list", list_only, "print the specs that would be compiled, one a line, and exit");
  app.set_version_flag("--version", flashjit::version());

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : kExitUsage;
  }

  auto arch = flashjit::tools::parse_arch(flags.arch);
  if (!arch) {
    std::fprintf(stderr, "flashjit-warmup: %s\n", arch.error().message.c_str());
    return kExitUsage;
  }

  // Gather the specs, in order, without duplicates.
  std::vector<KernelSpec> specs;
  std::set<std::string> seen;
  auto add = [&](const KernelSpec& s) {
    if (seen.insert(s.to_string()).second) specs.push_back(s);
  };
  auto add_named = [&](const KernelSpec& s, bool names_tile) {
    if (names_tile) {
      add(s);
    } else {
      for (const KernelSpec& k : flashjit::launch_specs(s)) add(k);
    }
  };
  for (const auto& text : spec_strings) {
    bool names_tile = false;
    auto s = KernelSpec::parse(text, &names_tile);
    if (!s) {
      std::fprintf(stderr, "flashjit-warmup: %s\n", s.error().message.c_str());
      return kExitError;
    }
    add_named(*s, names_tile);
  }
  if (flags.given_besides_arch()) {
    auto s = flags.spec();
    if (!s) {
      std::fprintf(stderr, "flashjit-warmup: %s\n", s.error().message.c_str());
      return kExitError;
    }
    add_named(*s, false);
  }
  if (!specs_json.empty()) {
    auto list = specs_from_file(specs_json, flags.arch);
    if (!list) {
      std::fprintf(stderr, "flashjit-warmup: %s\n", list.error().message.c_str());
      return kExitError;
    }
    for (const auto& [s, names_tile] : *list) add_named(s, names_tile);
  }
  if (grid == "seed") {
    for (const auto& s : flashjit::seed_grid_specs(*arch)) add(s);
  } else if (grid == "all") {
    for (const auto& s : flashjit::all_supported_specs(*arch)) add(s);
  }
  if (specs.empty()) {
    std::fprintf(stderr,
                 "flashjit-warmup: no specs: give spec strings, spec flags, --specs-json or --grid\n%s",
                 app.help().c_str());
    return kExitUsage;
  }
  if (list_only) {
    for (const KernelSpec& s : specs) std::printf("%s\n", s.to_string().c_str());
    return 0;
  }

  std::mutex print_mu;
  flashjit::ContextOptions options;
  options.arch = *arch;
  options.on_warning = [&](const std::string& w) {
    std::lock_guard<std::mutex> lock(print_mu);
    std::fprintf(stderr, "flashjit-warmup: warning: %s\n", w.c_str());
  };
  auto ctx = flashjit::Context::create(std::move(options));
  if (!ctx) {
    std::fprintf(stderr, "flashjit-warmup: %s\n", ctx.error().message.c_str());
    return kExitError;
  }
  flashjit::DiskCache& cache = (*ctx)->disk_cache();
  if (!cache.options().disk_enabled) {
    std::fprintf(stderr,
                 "flashjit-warmup: the disk cache is disabled (FLASHJIT_CACHE_DISABLE): a warm-up would keep "
                 "nothing\n");
    return kExitUsage;
  }

  const int n_threads = std::min<int>(jobs, static_cast<int>(specs.size()));
  std::fprintf(stderr, "flashjit-warmup: %zu specs, %d jobs, cache %s\n", specs.size(), n_threads,
               (*ctx)->disk_cache().options().dir.c_str());
  std::vector<Outcome> outcomes(specs.size());
  std::atomic<size_t> next{0};
  size_t done = 0;  // guarded by print_mu
  const auto t0 = std::chrono::steady_clock::now();
  auto worker = [&] {
    for (size_t i = next++; i < specs.size(); i = next++) {
      Outcome& o = outcomes[i];
      o.spec = specs[i].to_string();
      const auto s0 = std::chrono::steady_clock::now();
      auto r = (*ctx)->compile(specs[i]);
      o.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - s0).count();
      o.ok = r.ok();
      if (r) o.record = *r;
      else o.error = r.error();
      std::lock_guard<std::mutex> lock(print_mu);
      ++done;
      if (o.ok) {
        std::fprintf(stderr, "[%zu/%zu] %s %s %.2f s\n", done, specs.size(), o.spec.c_str(),
                     flashjit::to_string(o.record.outcome), o.record.compile_s);
      } else {
        std::fprintf(stderr, "[%zu/%zu] %s FAILED (%s)\n", done, specs.size(), o.spec.c_str(),
                     flashjit::status_name(o.error.status));
      }
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < n_threads; ++t) threads.emplace_back(worker);
  for (auto& t : threads) t.join();
  const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  // Looked up after all compiles: a later store may have evicted an earlier
  // entry under the size cap.
  size_t not_in_cache = 0;
  for (size_t i = 0; i < specs.size(); ++i) {
    Outcome& o = outcomes[i];
    if (!o.ok) continue;
    o.in_cache = flashjit::find_cached(cache, specs[i]).has_value();
    not_in_cache += !o.in_cache;
  }

  // Table.
  auto cell = [](int v) { return v < 0 ? std::string("-") : std::to_string(v); };
  fmt::print("{:<56} {:<10} {:>9} {:>8} {:>5} {:>6}\n", "spec", "outcome", "compile_s", "nvrtc_s",
             "regs", "spills");
  std::vector<double> cold;
  size_t failed = 0, compiled = 0, hits = 0;
  for (const Outcome& o : outcomes) {
    if (!o.ok) {
      ++failed;
      fmt::print("{:<56} {:<10} {:>9} {:>8} {:>5} {:>6}\n", o.spec, "FAILED", "-", "-", "-", "-");
      continue;
    }
    const auto& r = o.record;
    if (r.outcome == flashjit::CacheOutcome::kCompiled) {
      ++compiled;
      cold.push_back(r.compile_s);
    } else {
      ++hits;
    }
    fmt::print("{:<56} {:<10} {:>9.2f} {:>8.2f} {:>5} {:>6}\n", o.spec, flashjit::to_string(r.outcome),
               r.compile_s, r.nvrtc_s, cell(r.registers), cell(r.spill_bytes));
  }
  const double cold_median = median(cold);
  const double cold_max = cold.empty() ? 0 : *std::max_element(cold.begin(), cold.end());
  fmt::print("\n{} specs: {} compiled, {} cached, {} failed{}\n", outcomes.size(), compiled, hits, failed,
             not_in_cache ? fmt::format(", {} not in the cache afterwards", not_in_cache) : "");
  if (!cold.empty()) {
    fmt::print("cold compile_s: median {:.2f}, max {:.2f}\n", cold_median, cold_max);
  }
  fmt::print("wall: {:.2f} s with {} jobs\n", wall_s, n_threads);

  for (const Outcome& o : outcomes) {
    if (o.ok) continue;
    std::fprintf(stderr, "\n=== %s failed (%s) ===\n%s\n", o.spec.c_str(),
                 flashjit::status_name(o.error.status), o.error.message.c_str());
  }

  if (not_in_cache > 0) {
    const auto& co = cache.options();
    std::string missing;
    for (const Outcome& o : outcomes) {
      if (o.ok && !o.in_cache) missing += "  " + o.spec + "\n";
    }
    std::fprintf(stderr,
                 "\nflashjit-warmup: error: %zu %s not in the cache %s after the warm-up:\n%s%s\n", not_in_cache,
                 not_in_cache == 1 ? "kernel is" : "kernels are", co.dir.c_str(), missing.c_str(),
                 cache.writable()
                     ? fmt::format("the directory took them, so the size cap (FLASHJIT_CACHE_MAX_MB, now {} MiB) "
                                   "evicted them (raise it or warm fewer specs), or another process removed them",
                                   co.max_bytes >> 20)
                           .c_str()
                     : "the directory could not be written (see the warning above): point FLASHJIT_CACHE_DIR "
                       "at a writable directory");
  }

  if (!json_out.empty()) {
    nlohmann::json j;
    j["arch"] = flashjit::to_string(*arch);
    j["jobs"] = n_threads;
    j["wall_s"] = wall_s;
    j["summary"] = {{"count", outcomes.size()},   {"compiled", compiled},
                    {"cached", hits},             {"failed", failed},
                    {"not_in_cache", not_in_cache},
                    {"cold_median_s", cold_median}, {"cold_max_s", cold_max}};
    j["records"] = nlohmann::json::array();
    for (const Outcome& o : outcomes) j["records"].push_back(record_json(o));
    std::ofstream out(json_out);
    out << j.dump(2) << "\n";
    if (!out) {
      std::fprintf(stderr, "flashjit-warmup: cannot write '%s'\n", json_out.c_str());
      return kExitError;
    }
  }
  return failed == 0 && not_in_cache == 0 ? 0 : kExitError;
}
