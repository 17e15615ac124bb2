#!/usr/bin/env bash
# Packs a ferry build for a GPU machine that has a CUDA driver (and CUDA's
# runtime, cuBLAS and cuDNN somewhere, e.g. in a PyTorch install) but none
# of Debian's -dev packages: the executables, ferry-cuda.so, the task
# modules and the GPU test suites in the build folder's own layout (so
# meson's $ORIGIN rpaths still hold), every shared library they load that is
# neither glibc's nor CUDA's, Fashion-MNIST, the scripts of tests/gpu and
# the Python baselines of bench/.
#
#   tests/gpu/pack.sh BUILD OUTDIR     -> OUTDIR/ferry-gpu.tar.xz
#
# On the GPU machine: tests/gpu/device.sh (OUTDIR .gpu), or by hand
#   mkdir -p /tmp/f && tar -C /tmp/f -xJf ferry-gpu.tar.xz && /tmp/f/ferry/tests/gpu/run.sh
set -euo pipefail
[ $# -eq 2 ] || { sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
B=$(cd "$1" && pwd); O=$2; mkdir -p "$O"; O=$(cd "$O" && pwd)
src=$(cd "$(dirname "$0")/../.." && pwd)
[ -f "$B/build.ninja" ] || { echo "pack.sh: $B is not a meson build folder" >&2; exit 2; }
[ -f "$B/runtime/device/cuda/ferry-cuda.so" ] ||
  { echo "pack.sh: $B has no ferry-cuda.so: configure with the CUDA toolkit" >&2; exit 2; }
[ -x "$B/tests/cuda/test-cuda" ] ||
  { echo "pack.sh: $B has no tests/cuda/test-cuda: configure it with -Dtests=true" >&2; exit 2; }
S=$(mktemp -d); trap 'rm -rf "$S"' EXIT
R=$S/ferry
keep() { # keep PATH...: copies build-folder paths to the same place
  for f in "$@"; do mkdir -p "$R/$(dirname "$f")"; cp -a "$B/$f" "$R/$f"; done
}
cd "$B"
keep ferry runtime/device/cuda/ferry-cuda.so
for f in libferry.so*; do [ -d "$f" ] || keep "$f"; done
keep tasks/*.so
for t in cuda device gpu e2e; do keep "tests/$t/test-$t"; done
keep tests/e2e/*.so
[ -d tests/modules ] && for f in tests/modules/*; do [ -f "$f" ] && keep "$f"; done
[ -x bench/train ] && keep bench/train
cd - >/dev/null
mkdir -p "$R/lib" "$R/data" "$R/tests/gpu"
# Every library the binaries load, but glibc's, the compiler runtime's and
# CUDA's (those come with the GPU machine's driver and CUDA install).
find "$R" -type f \( -name '*.so*' -o -perm -u+x \) -exec ldd {} \; 2>/dev/null |
  awk '/=> \//{print $3}' | sort -u |
  grep -vE '/(libc|libm|libdl|libpthread|librt|ld-linux[^/]*|libgcc_s|libstdc\+\+)\.so|/cuda|libcu(dart|blas|blasLt|dnn)|libnvidia|libferry' |
  while read -r l; do cp -L "$l" "$R/lib/"; done
cp -L /usr/share/datasets/fashion-mnist/*-ubyte* "$R/data/"
# What device.sh runs there: every script of tests/gpu, and the baselines
# bench/train starts (it finds them beside itself).
cp "$src"/tests/gpu/*.sh "$src"/tests/gpu/*.py "$R/tests/gpu/"
mkdir -p "$R/bench" && cp "$src"/bench/*.py "$R/bench/"
# tests/gpu/scaling.sh (16-core scaling: bench/train --sync, bench/allreduce)
# and what it runs: the all-reduce benches, the Python baselines, Open MPI.
"$src/tests/gpu/pack-scaling.sh" "$B" "$R"
echo "ferry GPU bundle from $(git -C "$src" describe --always --dirty 2>/dev/null || echo '?'), built in $B" > "$R/BUNDLE"
tar -C "$S" -cJf "$O/ferry-gpu.tar.xz" ferry
ls -la "$O/ferry-gpu.tar.xz"
