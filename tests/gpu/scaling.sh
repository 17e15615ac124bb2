#!/usr/bin/env bash
# Scaling on a many-core machine, in one step, each part under a time limit
# of its own: `bench/train --sync` (ferry's synchronous training on 1, 2, 4
# and 8 local workers bound to cores, one BLAS thread a worker, against
# PyTorch DDP with gloo on as many ranks), then `bench/allreduce` on 2, 4 and
# 8 ranks at 1, 16 and 64 MiB against Open MPI (where there is one: a
# bundle's own, or the system's mpirun) and gloo. PyTorch is the first
# python3 on PATH that imports torch and numpy. Needs no meson and nothing a
# pack.sh bundle lacks.
#
#   tests/gpu/scaling.sh [--quick] [DIR]
#
# DIR: a meson build folder (default: build) or an unpacked pack.sh bundle
# (default when run from one). Every JSON line goes to $OUT/scaling.jsonl,
# the benches' progress to $OUT/scaling.log ($OUT default: a new folder
# under /tmp); the ratio lines are summed up at the end. --quick: a dry run
# of the plumbing (1 and 2 workers, 1 epoch; 2 ranks, small sizes).
# Exit status 0 when every part ran to its end (targets missed included).
set -u
quick=0 dir=
for a in "$@"; do
  case $a in
    --quick) quick=1 ;;
    -h|--help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "scaling.sh: unknown option $a" >&2; exit 2 ;;
    *) dir=$a ;;
  esac
done
here=$(cd "$(dirname "$0")" && pwd)
if [ -z "$dir" ]; then
  if [ -f "$here/../../BUNDLE" ]; then dir=$here/../..; else dir=$here/../../build; fi
fi
D=$(cd "$dir" 2>/dev/null && pwd) || { echo "scaling.sh: no folder $dir" >&2; exit 2; }
for f in ferry bench/train bench/allreduce tasks/mlp.so; do
  [ -e "$D/$f" ] || { echo "scaling.sh: no $D/$f" >&2; exit 2; }
done
OUT=${OUT:-$(mktemp -d /tmp/ferry-scaling.XXXXXX)}; mkdir -p "$OUT"
J=$OUT/scaling.jsonl L=$OUT/scaling.log
: > "$J"; : > "$L"
say() { echo "$*" | tee -a "$L"; }

[ -d "$D/lib" ] && export LD_LIBRARY_PATH="$D/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
dataopt=()
[ -d "$D/data" ] && dataopt=(--data "$D/data")
# The benches run their Python baselines without PYTHONPATH, PYTHONHOME and
# the user's site-packages: look for torch the same way.
py= py_note=
for p in $(command -v -a python3 2>/dev/null) /usr/bin/python3; do
  if env -u PYTHONPATH -u PYTHONHOME PYTHONNOUSERSITE=1 "$p" -c 'import torch, numpy' 2>/dev/null
  then py=$p; break; fi
  [ -z "$py_note" ] && "$p" -c 'import torch, numpy' 2>/dev/null &&
    py_note="$p imports torch only through PYTHONPATH or the user's site-packages, which the benches leave out"
done
[ -n "$py" ] || { py=/usr/bin/python3; py_note=${py_note:-"no python3 imports torch and numpy: DDP and gloo are skipped"}; }
# Open MPI: the bundle's (relocated: tests/gpu/pack.sh), else the system's.
mpiopt=() mpi_note="none: the Open MPI lines are skipped with the reason"
if [ -x "$D/openmpi/bin/mpirun" ]; then
  export OPAL_PREFIX=$D/openmpi OPAL_LIBDIR=$D/lib OPAL_PKGLIBDIR=$D/openmpi/lib/openmpi3
  export OPAL_PKGDATADIR=$D/openmpi/share/openmpi OPAL_SYSCONFDIR=$D/openmpi/etc
  # PMIx looks for its components where it was installed unless told.
  export PMIX_MCA_mca_base_component_path=$D/openmpi/pmix/lib/pmix PMIX_PREFIX=$D/openmpi/pmix
  export PMIX_PKGDATADIR=$D/openmpi/pmix/share/pmix PMIX_SYSCONFDIR=$D/openmpi/pmix/etc
  mpiopt=(--mpirun "$D/openmpi/bin/mpirun") mpi_note="the bundle's, $D/openmpi"
elif command -v mpirun >/dev/null; then
  mpi_note="the system's, $(command -v mpirun)"
fi
# ferry's homes go under a folder of this run's own, so that a part killed
# at its limit leaves no cluster behind (see stop_clusters).
T=$(mktemp -d /tmp/fsc.XXXXXX)
trap 'stop_clusters; rm -rf "$T"' EXIT

{ echo "== $(date -u +%FT%TZ) scaling.sh$([ $quick -eq 1 ] && echo ' --quick') on $D"
  echo "cores: $(nproc) of $(grep -c ^processor /proc/cpuinfo)  $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-)"
  echo "python: $py $("$py" -c 'import torch; print("torch", torch.__version__)' 2>&1 | tail -1)"
  [ -n "$py_note" ] && echo "python: $py_note"
  echo "Open MPI: $mpi_note"
  [ ${#mpiopt[@]} -gt 0 ] && "${mpiopt[1]}" --version 2>&1 | head -1
  [ ${#dataopt[@]} -gt 0 ] && echo "data: ${dataopt[1]}"; } | tee -a "$L"

# Every ferry cluster a killed bench/train left in this run's folder.
stop_clusters() {
  local h
  for h in "$T"/ferry-bench-sync-*; do
    [ -d "$h" ] || continue
    FERRY_HOME=$h timeout 20 "$D/ferry" shutdown --grace-ms 500 >/dev/null 2>&1
    rm -rf "$h"
  done
}

# The processes of session SID, from /proc (a bare machine may lack ps).
session_pids() {
  local sid=$1 f line p
  for f in /proc/[0-9]*/stat; do
    read -r line 2>/dev/null < "$f" || continue
    set -- ${line##*) } # state ppid pgrp session ...
    p=${f#/proc/}
    [ "${4:-}" = "$sid" ] && echo "${p%/stat}"
  done
}

fail=0
# part NAME SECONDS CMD...: runs CMD in a session of its own, its stdout to
# the JSON lines, its stderr to the log; past SECONDS every process of that
# session is killed (the benches run their children in process groups of
# their own, which a plain `timeout` would miss).
part() {
  local name=$1 limit=$2; shift 2
  say "== $(date -u +%T) $name (limit ${limit} s): ${*#$D/}"
  local t0=$SECONDS
  TMPDIR=$T setsid "$@" >> "$J" 2>> "$L" &
  local pid=$! rc
  while kill -0 "$pid" 2>/dev/null && [ $((SECONDS - t0)) -lt "$limit" ]; do sleep 1; done
  if kill -0 "$pid" 2>/dev/null; then
    { session_pids "$pid" | xargs -r kill -KILL; wait "$pid"; } 2>/dev/null
    stop_clusters
    say "   $name: killed at its limit of $limit s; its lines so far are kept"
    fail=1
    return
  fi
  wait "$pid"; rc=$?
  [ "$rc" -eq 0 ] || { say "   $name: exited $rc (see $L)"; fail=1; }
  say "   $name: $((SECONDS - t0)) s"
}

# Sizes: BYTES:REPETITIONS:ITERATIONS (bench/allreduce --plan).
if [ "$quick" -eq 1 ]; then
  part "bench/train --sync" 300 "$D/bench/train" --sync --workers 1,2 --epochs 1 \
    --python "$py" "${dataopt[@]}"
  part "bench/allreduce, 2 ranks" 240 "$D/bench/allreduce" --ranks 2 --no-grpc \
    --plan 1048576:3:2,16777216:3:1 --python "$py" "${mpiopt[@]}"
else
  part "bench/train --sync" 100 "$D/bench/train" --sync --workers 1,2,4,8 --epochs 3 \
    --python "$py" "${dataopt[@]}"
  # One run a rank count: one killed at its limit keeps the others' ratios.
  for n in 2 4 8; do
    part "bench/allreduce, $n ranks" $((10 + 3 * n)) "$D/bench/allreduce" --ranks "$n" \
      --no-grpc --plan 1048576:7:3,16777216:7:1,67108864:5:1 --python "$py" "${mpiopt[@]}"
  done
fi

say "== ratio lines (value, target; skipped ones with the reason)"
"$py" - "$J" <<'PY' 2>&1 | tee -a "$L" || grep '"unit":"ratio"' "$J" | cut -c1-240
import json, sys
for line in open(sys.argv[1]):
    try:
        r = json.loads(line)
    except ValueError:
        continue
    if r.get("unit") != "ratio" or r.get("bound"):
        continue
    where = ", ".join("%s %s" % (k, r[k]) for k in ("workers", "vs_workers", "vs", "ranks", "bytes")
                      if k in r)
    v, t = r.get("value"), r.get("target_min", r.get("target_max"))
    mark = ""
    if t is not None and v is not None:
        ok = v >= t if "target_min" in r else v <= t
        mark = "met" if ok else "MISSED"
    print("%-32s %-44s %8s  %s %s %s" % (
        r.get("metric"), where, "%.3f" % v if v is not None else "-",
        "target %g" % t if t is not None else "", mark,
        "skipped: " + r["skipped"] if r.get("skipped") else ""))
PY
say "== $(grep -c . "$J") JSON lines in $J, progress in $L"
exit "$fail"
