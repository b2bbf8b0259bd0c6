#!/usr/bin/env bash
# Builds run 67's binaries on the CPU machine (no GPU needed), from a clean checkout of the commit that holds
# this file: .dist = HEAD (bench, GPU tests, CLIs), .dist-0 = main 6ae3d42 (bench), and one directory per patch
# in this folder, .dist-<first letter, upper case> (bench and GPU tests): L = l-lazy-rescale.patch,
# M = m-lazy-rescale-every-kernel.patch, N = n-lazy-rescale-uniform-q.patch, W = w-wait-after-softmax.patch.
# Only the embedded templates differ between variants, so each relinks in seconds once build/ is configured.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
here=bench/results/2026-12-04-h200-run67
git diff --quiet templates || { echo "build.sh: templates/ has local changes; commit or stash them" >&2; exit 1; }
[ -f build/CMakeCache.txt ] || bash scripts/setup.sh
targets="flashjit-bench flashjit_gpu_tests flashjit-cli flashjit-warmup"
make -C build -j"$(nproc)" $targets
rm -rf .dist && cmake --install build --prefix .dist --strip > /dev/null && rm -rf .dist/lib .dist/include
cp build/tests/flashjit_gpu_tests .dist/bin/ && strip .dist/bin/flashjit_gpu_tests
for patch in l-lazy-rescale m-lazy-rescale-every-kernel n-lazy-rescale-uniform-q w-wait-after-softmax; do
  v=$(echo "${patch:0:1}" | tr a-z A-Z)
  git apply "$here/$patch.patch"
  if make -C build -j"$(nproc)" flashjit-bench flashjit_gpu_tests > /tmp/run67-build-$v.log 2>&1; then
    mkdir -p .dist-$v/bin
    strip -o .dist-$v/bin/flashjit-bench build/flashjit-bench
    strip -o .dist-$v/bin/flashjit_gpu_tests build/tests/flashjit_gpu_tests
  else
    echo "build.sh: variant $v failed to build (/tmp/run67-build-$v.log)" >&2
  fi
  git checkout -q templates
done
make -C build -j"$(nproc)" $targets > /dev/null  # build/ back to HEAD
if [ ! -x .dist-0/bin/flashjit-bench ]; then
  rm -rf /tmp/run67-main && git worktree add -f /tmp/run67-main 6ae3d42 > /dev/null
  cmake -S /tmp/run67-main -B /tmp/run67-main/build -DCMAKE_BUILD_TYPE=Release > /dev/null
  make -C /tmp/run67-main/build -j"$(nproc)" flashjit-bench > /dev/null
  mkdir -p .dist-0/bin && strip -o .dist-0/bin/flashjit-bench /tmp/run67-main/build/flashjit-bench
  git worktree remove --force /tmp/run67-main
fi
du -sh .dist .dist-*
