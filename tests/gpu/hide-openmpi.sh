#!/usr/bin/env bash
# Runs a command as on a machine without Open MPI: in a private mount
# namespace (root; nothing outside it changes), every file of this Debian
# machine's Open MPI, PMIx, hwloc and libevent packages is covered (folders
# by an empty tmpfs, files by /dev/null), so that only a pack.sh bundle's
# relocated copy can serve. What tests/gpu/scaling.sh was checked with:
#
#   tests/gpu/hide-openmpi.sh env OUT=/tmp/s /tmp/f/ferry/tests/gpu/scaling.sh --quick
set -euo pipefail
[ $# -gt 0 ] || { sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
if [ -z "${HIDE_OPENMPI_INSIDE:-}" ]; then
  exec env HIDE_OPENMPI_INSIDE=1 unshare -m --propagation private "$0" "$@"
fi
pkgs=(openmpi-bin libopenmpi3 openmpi-common libpmix2 libhwloc15 libevent-core-2.1-7
      libevent-pthreads-2.1-7)
dirs=(/usr/lib/x86_64-linux-gnu/openmpi /usr/lib/x86_64-linux-gnu/pmix2 /usr/share/openmpi
      /etc/openmpi)
for d in "${dirs[@]}"; do
  [ -d "$d" ] && mount -t tmpfs -o size=1m "${HIDE_TAG:-hide-openmpi}" "$d"
done
n=0
while read -r f; do
  case $f in /usr/share/doc/*|/usr/share/man/*) continue ;; esac
  for d in "${dirs[@]}"; do case $f in "$d"/*) continue 2 ;; esac; done
  [ -f "$f" ] && [ ! -L "$f" ] && mount --bind /dev/null "$f" && n=$((n + 1))
done < <(dpkg -L "${pkgs[@]}" 2>/dev/null)
echo "hide-openmpi: ${#dirs[@]} folders and $n files of ${pkgs[*]} hidden" >&2
unset HIDE_OPENMPI_INSIDE
exec "$@"
