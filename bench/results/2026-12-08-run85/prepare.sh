#!/usr/bin/env bash
# Run 85's CPU half: the two binary trees run85.sh compares, built on the CPU machine from a set-up checkout
# (scripts/setup.sh has made build/). .dist = main with partial-first-full-width.patch (R), .dist-main = main.
# The work tree is main again afterwards (the patch is applied only while .dist builds).
# Then, on the device: bash bench/results/2026-12-08-run85/run85.sh, carry [".dist", ".dist-main"], timeout 590.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
here=bench/results/2026-12-08-run85
git diff --quiet -- templates tests tools || { echo "prepare: templates/tests/tools have local changes" >&2; exit 1; }
dist() {  # dist DIR: install build/'s binaries (no headers or static library) into DIR
  cmake --build build -j"$(nproc)" >/dev/null
  rm -rf "$1" && cmake --install build --prefix "$1" --strip >/dev/null && rm -rf "$1/lib" "$1/include"
}
git apply "$here/partial-first-full-width.patch"
trap 'git checkout -- templates tests tools' EXIT
dist .dist
git checkout -- templates tests tools
trap - EXIT
dist .dist-main
# The builds must differ in the templates the library embeds: main's has the narrow step 0 (narrow_first), R's not.
narrow() { strings "$1/bin/flashjit-bench" | grep -c narrow_first || true; }
if [ "$(narrow .dist)" != 0 ] || [ "$(narrow .dist-main)" = 0 ]; then
  echo "prepare: .dist (R) and .dist-main (main) do not hold the templates they should" >&2; exit 1
fi
du -sh .dist .dist-main
