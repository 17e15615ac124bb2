#!/usr/bin/env bash
# A GPU machine's whole run in one command, for a machine lent for minutes:
# ferry's GPU checks and figures from a pack.sh bundle, stage by stage, the
# most valuable first, each under a timeout so that a hang costs only its
# stage, all within --budget seconds (default 480), the time each took
# printed. From the repository root of a copy of the tree that holds the
# bundle in .gpu/:
#
#   on the build machine (the bundle stays out of git):
#     meson setup build-rel --buildtype=release && meson compile -C build-rel
#     grep -qx /.gpu/ .git/info/exclude || echo /.gpu/ >> .git/info/exclude
#     tests/gpu/pack.sh build-rel .gpu
#   on the GPU machine, through the device tool (one call, ~8 min + start):
#     run  command: bash tests/gpu/device.sh   carry: [".gpu"]   timeout_s: 540
#   a second run after a fix (the machine starts again: ~3 min are left),
#   only what failed, e.g.:
#     run  command: bash tests/gpu/device.sh --stages tests --budget 170
#          carry: [".gpu"]   timeout_s: 200
#
#   tests/gpu/device.sh [--no-require-gpu] [--stages LIST] [--budget S]
#                       [--bundle FILE]
#
# Stages (times guessed for an H200 with 16 cores until a run prints the
# real ones; the cap is the stage's timeout, cut to what is left of the
# budget):
#   unpack   the bundle into /tmp/ferry-gpu-bundle                ~10 s, cap 60
#   tests    run.sh --require-gpu: tests/cuda, opening cuda, tests/gpu,
#            the e2e GPU sync test (the "none skipped" run)      ~150 s, cap 210
#   bench    run.sh: bench/train --device cuda, ferry against PyTorch
#            eager and AMP, MLP, CNN, ResNet, batch 128 and 1024 ~120 s, cap 180
#   scaling  scaling.sh, where the bundle has it: CPU workers on the
#            cores (its parts' own limits sum to 172 s; --quick,
#            a dry run, only when under 120 s are left)    ~120 s, cap 190
#   train    run.sh: MLP, CNN, ResNet by `ferry start 1 --device cuda`
#            in fp32, tf32, bf16 to their accuracy targets       ~100 s, what is left
# Scaling goes before the training passes: nothing else measures it, while
# the passes' MLP and CNN are also trained by tests/gpu and bench.
# --stages runs those named (in this order); --no-require-gpu lets GPU
# tests skip (a dry run on a machine without a GPU: every GPU step then
# says why it skipped). Running it twice is safe: each run starts from a
# fresh unpack and stops the workers an earlier one left.
#
# $OUT (default: a new folder) gets at most 8 files: summary.txt (what this
# prints), env.log (the machine), train.jsonl, bench.jsonl, scaling.jsonl,
# tables.md (the README's tables, tests/gpu/tables.py), logs.tgz (every
# log). Exit status 0 when every stage run passed.
set -u
require=--require-gpu stages="unpack tests bench scaling train" budget=480
bundle=.gpu/ferry-gpu.tar.xz
while [ $# -gt 0 ]; do
  case $1 in
    --no-require-gpu) require= ;;
    --stages) stages="unpack ${2:?--stages takes a list}"; shift ;;
    --budget) budget=${2:?--budget takes seconds}; shift ;;
    --bundle) bundle=${2:?--bundle takes a file}; shift ;;
    -h|--help) sed -n '2,45p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "device.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
for s in $stages; do
  case $s in unpack|tests|bench|scaling|train) ;;
    *) echo "device.sh: no stage $s (tests, bench, scaling, train)" >&2; exit 2 ;;
  esac
done
OUT=${OUT:-$(mktemp -d /tmp/ferry-device.XXXXXX)}
mkdir -p "$OUT"
U=/tmp/ferry-gpu-bundle   # the bundle, unpacked
B=$U/ferry
W=/tmp/ferry-gpu-work     # what the stages write; $OUT gets it gathered
start=$SECONDS
status=0

# Workers an earlier run of the bundle left (a stage killed at its
# timeout cannot stop the ones it started): by pid, from their executable.
stop_leftovers() {
  local p exe
  for p in /proc/[0-9]*; do
    exe=$(readlink "$p/exe" 2>/dev/null) || continue
    case $exe in "$B"/*) kill -9 "${p#/proc/}" 2>/dev/null ;; esac
  done
}

# Everything back in $OUT so far: a run the device tool cuts short still
# returns what the finished stages wrote.
gather() {
  local f
  for f in run/train.jsonl run/bench.jsonl scaling/scaling.jsonl; do
    [ -f "$W/$f" ] && cp "$W/$f" "$OUT/"
  done
  tar -C "$W" -czf "$OUT/logs.tgz" . 2>/dev/null
}

say() { echo "$*" | tee -a "$OUT/summary.txt"; }

# stage NAME CAP COMMAND...: runs it under a timeout of CAP seconds or what
# is left of the budget, whichever is less; its output goes to the summary.
declare -a report
stage() {
  local name=$1 cap=$2; shift 2
  local left=$((budget - (SECONDS - start))) t0=$SECONDS rc
  [ "$cap" -gt "$left" ] && cap=$left
  if [ "$cap" -lt 20 ]; then
    say "=== $name: not run, ${left} s of the budget left"
    report+=("$(printf '%-8s not run (budget spent)' "$name")")
    status=1
    return
  fi
  say "=== $name (at $((SECONDS - start)) s, cap $cap s): $*"
  # Into the file, not through a pipe: a worker a killed stage left behind
  # would hold a pipe open, and the stage would never end.
  local from
  from=$(($(stat -c %s "$OUT/summary.txt") + 1))
  timeout -k 15 "$cap" "$@" >> "$OUT/summary.txt" 2>&1 < /dev/null
  rc=$?
  tail -c "+$from" "$OUT/summary.txt"
  stop_leftovers
  local took=$((SECONDS - t0)) what
  case $rc in
    0) what=passed ;;
    124|137) what="TIMED OUT at its cap" ;;
    *) what="FAILED (exit $rc)" ;;
  esac
  [ "$rc" -eq 0 ] || status=1
  say "=== $name: $what in $took s"
  report+=("$(printf '%-8s %-22s %4d s  (cap %d s)' "$name" "$what" "$took" "$cap")")
  gather
}

want() { case " $stages " in *" $1 "*) return 0 ;; esac; return 1; }

# The machine, for the tables: the GPU (nvidia-smi's CSV line), the cores.
machine() {
  echo "== $(date -u +%FT%TZ)"
  cat "$B/BUNDLE" 2>/dev/null
  local g
  if ! command -v nvidia-smi > /dev/null; then
    echo "nvidia-smi: not found"
  elif g=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1)
  then echo "gpu: ${g%%$'\n'*}"
  else echo "nvidia-smi: $g"
  fi
  echo "cpu: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1), $(nproc) cores"
  echo "memory: $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo)"
  echo "kernel: $(uname -r)"
  echo "torch: $(python3 -c 'import torch; print(torch.__version__, "CUDA", torch.version.cuda)' \
    2>&1 | tail -1)"
  nvidia-smi 2>/dev/null
}

: > "$OUT/summary.txt"
say "device.sh: stages $stages, budget $budget s, bundle $bundle, results in $OUT"
stop_leftovers
rm -rf "$W" && mkdir -p "$W/run" "$W/scaling"
if [ -f "$bundle" ]; then
  rm -rf "$U" && mkdir -p "$U"
  stage unpack 60 tar -C "$U" -xJf "$bundle"
  cat "$B/BUNDLE" 2>/dev/null
else
  say "device.sh: no bundle $bundle: make it with tests/gpu/pack.sh"
fi
if [ ! -x "$B/tests/gpu/run.sh" ]; then
  say "device.sh: no run.sh in the bundle; nothing else can run"
  gather
  exit 1
fi
machine > "$OUT/env.log" 2>&1
head -8 "$OUT/env.log" | tee -a "$OUT/summary.txt"

# The run.sh stages share one log folder: each writes its own files.
want tests && stage tests 210 env OUT="$W/run" "$B/tests/gpu/run.sh" $require \
  --no-train --no-bench "$B"
want bench && stage bench 180 env OUT="$W/run" "$B/tests/gpu/run.sh" --no-tests --no-train "$B"
if want scaling; then
  if [ -f "$B/tests/gpu/scaling.sh" ]; then
    left=$((budget - (SECONDS - start))); cap=$((left < 190 ? left : 190))
    quick=; [ "$cap" -lt 120 ] && quick=--quick
    stage scaling "$cap" env OUT="$W/scaling" bash "$B/tests/gpu/scaling.sh" $quick "$B"
  else
    say "=== scaling: the bundle has no tests/gpu/scaling.sh"
    report+=("scaling  not in the bundle")
  fi
fi
want train && stage train 600 env OUT="$W/run" "$B/tests/gpu/run.sh" $require \
  --no-tests --no-bench "$B"

stop_leftovers
files=()
for f in bench.jsonl train.jsonl scaling.jsonl; do
  [ -f "$OUT/$f" ] && files+=("$OUT/$f")
done
if [ ${#files[@]} -gt 0 ]; then
  python3 "$B/tests/gpu/tables.py" --env "$OUT/env.log" "${files[@]}" > "$OUT/tables.md" 2>&1
fi
say ""
say "=== stages ($((SECONDS - start)) s in all, budget $budget s)"
for r in "${report[@]}"; do say "  $r"; done
[ -f "$OUT/tables.md" ] && { say ""; cat "$OUT/tables.md" | tee -a "$OUT/summary.txt"; }
gather
say "=== $(ls "$OUT" | wc -l) files in $OUT: $(ls "$OUT" | tr '\n' ' ')"
if [ "$status" -eq 0 ]; then say "=== device.sh: passed"; else say "=== device.sh: FAILED"; fi
exit "$status"
