#!/usr/bin/env bash
# usage: local-slurm.sh up DIR | down DIR
# A Slurm cluster of 4 nodes on this machine: slurmctld and four slurmd
# (n1..n4 on 127.0.1.1..4, each name prefixed with this script's pid so
# that clusters started side by side never share one), every file under
# DIR, on free ports. `up` returns once the 4 nodes are idle and prints
# the SLURM_CONF to use; `down` cancels its jobs and stops its daemons by
# the pids they wrote. Needs root, slurmctld and slurmd.
set -euo pipefail
cmd=$1 dir=$2
conf=$dir/slurm.conf

down() {
  if [ -f "$conf" ]; then
    SLURM_CONF=$conf timeout 10 scancel --full --quiet --user="$(id -un)" 2>/dev/null || true
  fi
  local pids=()
  for f in "$dir"/run/*.pid; do
    [ -f "$f" ] && pids+=("$(cat "$f")")
  done
  ((${#pids[@]})) || return 0
  kill "${pids[@]}" 2>/dev/null || true
  for _ in $(seq 50); do
    kill -0 "${pids[@]}" 2>/dev/null || return 0
    sleep 0.1
  done
  kill -9 "${pids[@]}" 2>/dev/null || true
}

free_ports() {
  python3 - "$1" <<'PY'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
PY
}

up() {
  mkdir -p "$dir"/{state,spool,run,log}
  local host prefix ports
  host=$(hostname -s)
  prefix=ferry$$n
  read -r -a ports <<<"$(free_ports 6)"
  cat >"$conf" <<END
ClusterName=ferry$$
SlurmctldHost=$host(127.0.0.1)
AuthType=auth/none
CredType=cred/none
SlurmUser=root
SlurmdUser=root
SlurmctldPort=${ports[0]}
SlurmdPort=${ports[1]}
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd-%n.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
MpiDefault=none
ReturnToService=2
SchedulerType=sched/backfill
JobCompType=jobcomp/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
END
  for i in 1 2 3 4; do
    echo "NodeName=$prefix$i NodeHostname=$host NodeAddr=127.0.1.$i Port=${ports[$((i + 1))]} CPUs=1 State=UNKNOWN" >>"$conf"
  done
  echo "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP" >>"$conf"
  export SLURM_CONF=$conf
  slurmctld -i
  for i in 1 2 3 4; do slurmd -N "$prefix$i"; done
  for _ in $(seq 300); do
    if [ "$(sinfo -h -N -t idle -o %N 2>/dev/null | wc -l)" = 4 ]; then
      echo "$conf"
      return 0
    fi
    sleep 0.1
  done
  echo "local-slurm.sh: the 4 nodes were not idle within 30 s; sinfo says:" >&2
  sinfo -N >&2 || true
  tail -5 "$dir"/log/*.log >&2 || true
  return 1
}

case $cmd in
  up) up || { down; exit 1; } ;;
  down) down ;;
  *) echo "usage: $0 up DIR | down DIR" >&2; exit 2 ;;
esac
