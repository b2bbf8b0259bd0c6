#!/usr/bin/env bash
# One command on a GPU machine: flashjit-bench, peers.py torch, peers.py jax
# (separate processes, as the seed ran them), then report.py over everything in
# the results directory.
#
#   bench/run_all.sh [options] [-- grid flags for all three tools]
#
# Options:
#   --bin-dir DIR     where flashjit-bench is (default: .dist/bin, then build/, build/bin)
#   --out-dir DIR     results directory (default: bench/results/<UTC date>-<gpu>)
#   --name NAME       suffix of this call's JSON files, so split runs accumulate in one
#                     directory (default: derived from the grid flags, "all" without any)
#   --only LIST       comma list of flashjit,torch,jax (default: all three)
#   --seed FILE       the seed's results for the report (default: shared/seed/attention_h100.json
#                     or ../shared/seed/attention_h100.json when present)
#   --max-seconds S   passed to each tool: no new row after S seconds (each tool separately)
#   --export DIR      after the report, tar the results directory into DIR/results-<name>.tgz
#                     (the device machine returns at most 8 files: use --export "$OUT")
#
# Grid flags after "--" go to every tool (--dtypes, --head-dims, --seqs, --seq-k,
# --modes, --causal, --batch, --heads, --quick, --target-ms, --reps, --config).
# The full seed grid with all peers does not fit one 10-minute call: split it,
# e.g. one call with "-- --modes fwd" and one with "-- --modes fwd_bwd" into the
# same --out-dir; each call's report covers every JSON file there so far.
#
# Exit status: 0 when every tool ran (rows may still have failed: see the
# report), 1 on a usage error, 2 when no tool could run.
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
bin_dir=""
out_dir=""
name=""
only="flashjit,torch,jax"
seed=""
max_seconds=""
export_dir=""
grid=()

while [[ $# -gt 0 ]]; do
  case "$1" in
    --bin-dir) bin_dir="$2"; shift 2 ;;
    --out-dir) out_dir="$2"; shift 2 ;;
    --name) name="$2"; shift 2 ;;
    --only) only="$2"; shift 2 ;;
    --seed) seed="$2"; shift 2 ;;
    --max-seconds) max_seconds="$2"; shift 2 ;;
    --export) export_dir="$2"; shift 2 ;;
    --) shift; grid=("$@"); break ;;
    -h|--help) sed -n '2,30p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "run_all.sh: unknown option '$1' (grid flags go after --)" >&2; exit 1 ;;
  esac
done

# --- where things are -------------------------------------------------------
if [[ -z "$bin_dir" ]]; then
  for d in "$root/.dist/bin" "$root/build" "$root/build/bin"; do
    if [[ -x "$d/flashjit-bench" ]]; then bin_dir="$d"; break; fi
  done
fi
gpu="gpu"
if command -v nvidia-smi >/dev/null 2>&1; then
  g="$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n1)"
  [[ -n "$g" ]] && gpu="$(echo "$g" | tr '[:upper:]' '[:lower:]' | sed -e 's/^nvidia //' -e 's/[^a-z0-9]\+/_/g' -e 's/^_//' -e 's/_$//')"
fi
[[ -z "$out_dir" ]] && out_dir="$root/bench/results/$(date -u +%Y-%m-%d)-$gpu"
if [[ -z "$name" ]]; then
  name="$(printf '%s_' "${grid[@]+"${grid[@]}"}" | sed -e 's/--//g' -e 's/[^A-Za-z0-9]\+/_/g' -e 's/^_//' -e 's/_$//' | cut -c1-60)"
  [[ -z "$name" ]] && name="all"
fi
if [[ -z "$seed" ]]; then
  for s in "$root/shared/seed/attention_h100.json" "$root/../shared/seed/attention_h100.json"; do
    if [[ -f "$s" ]]; then seed="$s"; break; fi
  done
fi
mkdir -p "$out_dir" || exit 1
extra=()
[[ -n "$max_seconds" ]] && extra=(--max-seconds "$max_seconds")

echo "run_all: results in $out_dir (name $name), grid flags: ${grid[*]+"${grid[*]}"}" >&2
ran=0
status=()

run_tool() {  # label, log file, command...
  local label="$1" logf="$2"; shift 2
  local t0=$SECONDS
  echo "run_all: $label: $*" >&2
  "$@" 2> >(tee "$logf.err" >&2) | tee "$logf.out"
  local rc=${PIPESTATUS[0]}
  status+=("$label rc=$rc $((SECONDS - t0))s")
  return $rc
}

# --- flashjit ---------------------------------------------------------------
if [[ ",$only," == *",flashjit,"* ]]; then
  if [[ -z "$bin_dir" || ! -x "$bin_dir/flashjit-bench" ]]; then
    echo "run_all: flashjit-bench not found (give --bin-dir)" >&2
    status+=("flashjit: not found")
  else
    run_tool flashjit "$out_dir/flashjit-$name" "$bin_dir/flashjit-bench" \
      --out "$out_dir/flashjit-$name.json" "${extra[@]+"${extra[@]}"}" "${grid[@]+"${grid[@]}"}"
    rc=$?
    # 3: finished with failed rows (recorded in the JSON); 2: no GPU.
    [[ $rc -eq 0 || $rc -eq 3 ]] && ran=$((ran + 1))
  fi
fi

# --- peers: one process per framework -------------------------------------------
for fw in torch jax; do
  if [[ ",$only," == *",$fw,"* ]]; then
    if [[ "$fw" == jax ]]; then export XLA_PYTHON_CLIENT_PREALLOCATE=false; fi
    PYTHONUNBUFFERED=1 run_tool "$fw" "$out_dir/$fw-$name" python3 "$here/peers.py" --framework "$fw" \
      --out "$out_dir/$fw-$name.json" "${extra[@]+"${extra[@]}"}" "${grid[@]+"${grid[@]}"}"
    [[ $? -eq 0 ]] && ran=$((ran + 1))
  fi
done

# --- report over every result file in the directory --------------------------------
shopt -s nullglob
jsons=("$out_dir"/flashjit-*.json "$out_dir"/torch-*.json "$out_dir"/jax-*.json)
if [[ ${#jsons[@]} -gt 0 ]]; then
  seed_args=()
  [[ -n "$seed" ]] && seed_args=(--seed "$seed")
  python3 "$here/report.py" "${jsons[@]}" "${seed_args[@]+"${seed_args[@]}"}" --out-dir "$out_dir" \
    --title "flashjit attention benchmark ($gpu, $(date -u +%Y-%m-%d))" || status+=("report failed")
fi

echo "run_all: ${status[*]+"${status[*]}"}" >&2
if [[ -n "$export_dir" ]]; then
  mkdir -p "$export_dir" && tar czf "$export_dir/results-$name.tgz" -C "$(dirname "$out_dir")" "$(basename "$out_dir")" &&
    echo "run_all: exported $export_dir/results-$name.tgz" >&2
fi
[[ $ran -gt 0 ]] || exit 2
exit 0
