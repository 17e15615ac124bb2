#!/usr/bin/env bash
# tests/gpu/pack.sh's part for tests/gpu/scaling.sh: bench/allreduce and the
# executables it runs, the Python baselines, scaling.sh itself and, where
# this machine has Open MPI and bench/mpi_allreduce was built against it,
# Open MPI relocated into the bundle (mpirun, its MCA components, help files
# and parameters, PMIx's; scaling.sh points OPAL_PREFIX and its kin at
# them), with every library these load that the bundle does not yet hold.
#
#   tests/gpu/pack-scaling.sh BUILD ROOT    (ROOT: the bundle's ferry/ folder)
set -euo pipefail
[ $# -eq 2 ] || { sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
B=$1 R=$2
src=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$R/bench" "$R/tests/gpu" "$R/lib"
added=()
for f in bench/allreduce bench/tcp_allreduce bench/grpc_allreduce bench/mpi_allreduce; do
  [ -x "$B/$f" ] && cp -a "$B/$f" "$R/$f" && added+=("$R/$f")
done
cp "$src/bench/train_ddp.py" "$src/bench/fmnist_torch.py" "$src/bench/allreduce_gloo.py" "$R/bench/"
cp "$src/tests/gpu/scaling.sh" "$R/tests/gpu/"

# Open MPI, found where the one mpi_allreduce links says it lives.
if [ -x "$R/bench/mpi_allreduce" ] && command -v ompi_info >/dev/null; then
  path() { ompi_info --path "$1" --parsable | cut -d: -f3-; }
  O=$R/openmpi
  mkdir -p "$O/bin" "$O/lib" "$O/share" "$O/etc" "$O/pmix/lib" "$O/pmix/share" "$O/pmix/etc"
  bindir=$(path bindir)
  cp -L "$bindir/orterun" "$O/bin/mpirun"
  cp -L "$bindir/orted" "$O/bin/"
  cp -rL "$(path pkglibdir)" "$O/lib/"
  cp -rL "$(path pkgdatadir)" "$O/share/"
  cp -L "$(path sysconfdir)"/*.conf "$O/etc/" 2>/dev/null || true
  added+=("$O/bin/mpirun" "$O/bin/orted" "$O/lib/$(basename "$(path pkglibdir)")"/*.so)
  # PMIx (Debian's is a library of its own): its components and help files
  # lie beside the libpmix the components load.
  pmix=$(ldd "$O"/lib/*/mca_pmix_*.so 2>/dev/null | awk '/libpmix\.so/ && /=> \//{print $3; exit}')
  if [ -n "$pmix" ]; then
    pdir=$(dirname "$(readlink -f "$pmix")")
    [ -d "$pdir/pmix" ] && cp -rL "$pdir/pmix" "$O/pmix/lib/" && added+=("$O"/pmix/lib/pmix/*.so)
    [ -d "$pdir/../share/pmix" ] && cp -rL "$pdir/../share/pmix" "$O/pmix/share/"
    cp -L "$pdir"/../share/*.conf "$O/pmix/etc/" 2>/dev/null || true
  fi
fi

# The libraries they load, but glibc's and the compiler runtime's (as pack.sh).
ldd "${added[@]}" 2>/dev/null | awk '/=> \//{print $3}' | sort -u |
  grep -vE '/(libc|libm|libdl|libpthread|librt|ld-linux[^/]*|libgcc_s|libstdc\+\+)\.so|libferry' |
  while read -r l; do [ -e "$R/lib/$(basename "$l")" ] || cp -L "$l" "$R/lib/"; done
