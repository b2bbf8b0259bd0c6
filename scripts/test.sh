#!/usr/bin/env bash
# Sets up, builds and runs every test. GPU tests report "Skipped" on a machine
# without a GPU. The kernel cache of the tests lives in build/, not in ~/.cache.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export FLASHJIT_CACHE_DIR="$PWD/build/test-cache"
cd build
ctest --output-on-failure -j2 "$@"
