#!/usr/bin/env bash
# Builds run 70's binaries on the CPU machine (no GPU needed), from a clean checkout of the commit that holds
# this file: .dist = HEAD (bench, GPU tests, CLIs), .dist-A = HEAD + a-ring-addresses-32bit.patch (bench and
# GPU tests). Only the embedded templates differ, so A relinks in seconds once build/ is configured.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
here=bench/results/2026-12-05-h200-run70
git diff --quiet templates || { echo "build.sh: templates/ has local changes; commit or stash them" >&2; exit 1; }
[ -f build/CMakeCache.txt ] || bash scripts/setup.sh
targets="flashjit-bench flashjit_gpu_tests flashjit-cli flashjit-warmup"
make -C build -j"$(nproc)" $targets
rm -rf .dist && cmake --install build --prefix .dist --strip > /dev/null && rm -rf .dist/lib .dist/include
cp build/tests/flashjit_gpu_tests .dist/bin/ && strip .dist/bin/flashjit_gpu_tests
git apply "$here/a-ring-addresses-32bit.patch"
if make -C build -j"$(nproc)" flashjit-bench flashjit_gpu_tests > /tmp/run70-build-A.log 2>&1; then
  rm -rf .dist-A && mkdir -p .dist-A/bin
  strip -o .dist-A/bin/flashjit-bench build/flashjit-bench
  strip -o .dist-A/bin/flashjit_gpu_tests build/tests/flashjit_gpu_tests
else
  echo "build.sh: variant A failed to build (/tmp/run70-build-A.log)" >&2
fi
git checkout -q templates
make -C build -j"$(nproc)" $targets > /dev/null  # build/ back to HEAD
du -sh .dist .dist-A
