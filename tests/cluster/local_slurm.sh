#!/usr/bin/env bash
# A one-node SLURM cluster on this machine, for tests/cluster/test_slurm.py.
#   local_slurm.sh start DIR   install slurm-wlm and munge if absent, write DIR/slurm.conf,
#                              start munged, slurmctld and slurmd; prints the names of the
#                              CPU partition (the default) and of the GPU partition
#                              (the same node; two names, so that a test sees where a job
#                              was sent)
#   local_slurm.sh stop DIR    stop the daemons that `start DIR` started and remove its
#                              links in /etc/slurm
# Measured facts for Debian's slurm-wlm 22.05: slurmd starts when there is no cgroup.conf
# with ProctrackType=proctrack/linuxproc and TaskPlugin=task/none; there is no accounting
# database, so clients use squeue for job status (sacct finds nothing).
# One fake GPU (GRES without a device file) lets the scheduler place --gpus jobs.
set -euo pipefail
cmd=${1:?start or stop}
dir=$(realpath -m "${2:?state directory}")
partition=vqarobust
gpu_partition=vqarobust-gpu
host=$(hostname -s)

stop() {
  for name in slurmd slurmctld munged; do
    if [ -f "$dir/$name.pid" ]; then
      kill "$(cat "$dir/$name.pid")" 2>/dev/null || true
      rm -f "$dir/$name.pid"
    fi
  done
}

# The client config links that `start DIR` made. Left behind, they point clients at a
# controller that is gone: `scontrol show config`, which the SLURM executor plugin runs
# whenever Snakemake starts, then waits about 9 s for it, in every later `snakemake` call.
unlink_config() {
  for name in slurm.conf gres.conf; do
    if [ "$(readlink "/etc/slurm/$name" 2>/dev/null)" = "$dir/$name" ]; then
      rm -f "/etc/slurm/$name"
    fi
  done
}

if [ "$cmd" = stop ]; then
  stop
  unlink_config
  exit 0
fi

if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
  export DEBIAN_FRONTEND=noninteractive
  # The lock the tests' other apt-get calls wait on (tests/conftest.py, APT_LOCK).
  flock /tmp/vqarobust-apt.lock apt-get update -qq >/dev/null
  flock /tmp/vqarobust-apt.lock apt-get install -y -qq slurm-wlm munge >/dev/null
fi

mkdir -p "$dir"/{spool,state,log,munge}
chmod 700 "$dir/munge"
if [ ! -f "$dir/munge/munge.key" ]; then
  dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
  chmod 400 "$dir/munge/munge.key"
fi
mem=$(awk '/MemTotal/ {print int($2 / 1024 * 0.8)}' /proc/meminfo)
cpus=$(nproc)
conf_dir=/etc/slurm
mkdir -p "$conf_dir"
cat > "$dir/slurm.conf" <<CONF
ClusterName=vqarobust-test
SlurmctldHost=$host
SlurmUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.socket
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/backfill
GresTypes=gpu
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
NodeName=$host CPUs=$cpus RealMemory=$mem Gres=gpu:1 State=UNKNOWN
PartitionName=$partition Nodes=$host Default=YES MaxTime=INFINITE State=UP
PartitionName=$gpu_partition Nodes=$host Default=NO MaxTime=INFINITE State=UP
CONF
printf 'AutoDetect=off\nName=gpu File=/dev/null Count=1\n' > "$dir/gres.conf"
# Clients (sbatch, squeue) read the default location.
ln -sf "$dir/slurm.conf" "$conf_dir/slurm.conf"
ln -sf "$dir/gres.conf" "$conf_dir/gres.conf"

stop
if pgrep -r R,S,D -x slurmctld >/dev/null || pgrep -r R,S,D -x slurmd >/dev/null; then
  echo "a slurmctld or slurmd is already running on this machine; stop it first" >&2
  exit 1
fi
munged --key-file="$dir/munge/munge.key" --socket="$dir/munge/munge.socket" \
  --pid-file="$dir/munged.pid" --log-file="$dir/log/munged.log" --seed-file="$dir/munge/seed" --force
slurmctld -f "$dir/slurm.conf"
slurmd -f "$dir/slurm.conf"
for _ in $(seq 60); do
  if sinfo -h -o %T 2>/dev/null | grep -qE '^(idle|mixed|allocated)'; then
    echo "$partition $gpu_partition"
    exit 0
  fi
  sleep 1
done
echo "SLURM did not come up; logs in $dir/log" >&2
sinfo >&2 || true
exit 1
