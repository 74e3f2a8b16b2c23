#!/bin/bash
# make test-slurm: the Slurm recipes of deploy/slurm/ end to end on a one-node Slurm of this machine.
#
# Installs slurmctld, slurmd and munge from the distribution if they are missing (apt-get, as
# root or through sudo -n), configures a private one-node Slurm (its own config, ports, spool,
# munge socket and key under a temporary directory: a Slurm already on the machine is left
# alone) whose node has two "v100" GPUs as a gres without device files, starts munged,
# slurmctld and slurmd, submits deploy/slurm/scheduler.sbatch and
# `sbatch --gres=gpu:v100:2 deploy/slurm/worker.sbatch`, submits a tiny ResNet-18 job with
# `gavel-ng submit --wait`, and tears everything down. Ends with PASS or FAIL (exit 0 or 1).
# Needs gavel-ng on PATH (the Makefile puts .venv/bin first).
set -uo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
deadline_s=${GAVEL_NG_SLURM_TIMEOUT:-600}
t0=$(date +%s)
work=$(mktemp -d /tmp/gavel-ng-slurm.XXXXXX)
chmod 755 "$work"
SUDO=()
[ "$(id -u)" -eq 0 ] || SUDO=(sudo -n)

step() { printf '[%4ss] %s\n' "$(( $(date +%s) - t0 ))" "$*"; }
result=FAIL
finish() {
    step "tearing down"
    if [ -n "${SLURM_CONF:-}" ] && command -v scancel >/dev/null; then
        scancel --user "$(id -un)" 2>/dev/null
        for _ in $(seq 1 20); do
            [ -z "$(squeue -h -o %i 2>/dev/null)" ] && break
            sleep 1
        done
    fi
    for f in slurmd slurmctld munged; do
        [ -s "$work/$f.pid" ] && "${SUDO[@]}" kill "$(cat "$work/$f.pid")" 2>/dev/null
    done
    sleep 1
    if [ "$result" != PASS ]; then
        for f in "$work"/log/*; do
            [ -f "$f" ] || continue
            echo "----- $f (last 40 lines)"
            tail -n 40 "$f"
        done
        echo "(kept $work)"
    else
        "${SUDO[@]}" rm -rf "$work"
    fi
    step "$result: Slurm recipes end to end"
    [ "$result" = PASS ]
}
trap 'finish; exit $?' EXIT
die() { step "error: $*"; exit 1; }

# 1. Slurm and munge from the distribution.
if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null || ! command -v sbatch >/dev/null \
        || ! command -v munged >/dev/null; then
    command -v apt-get >/dev/null || die "slurmctld/slurmd/munge missing and no apt-get to install them"
    step "installing slurm-wlm (slurmctld, slurmd, munge) with apt-get"
    "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q >/dev/null || die "apt-get update failed"
    "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q slurm-wlm >/dev/null \
        || die "apt-get install slurm-wlm failed"
fi
command -v gavel-ng >/dev/null || die "gavel-ng is not on PATH (run through 'make test-slurm')"
step "slurm $(slurmctld -V | awk '{print $2}'), $(munged -V 2>&1 | awk '{print $1}'), gavel-ng at $(command -v gavel-ng)"

# 2. A private one-node Slurm whose node has 2 "v100" GPUs (a gres without GPU devices).
mkdir -p "$work"/{etc,dev,log,spool/ctld,spool/d,munge,shared}
node=$(hostname -s)
cpus=$(nproc)
cat > "$work/etc/slurm.conf" <<CONF
ClusterName=gavelng
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=${GAVEL_NG_SLURMCTLD_PORT:-16817}
SlurmdPort=${GAVEL_NG_SLURMD_PORT:-16818}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$work/munge/munge.socket
CredType=cred/munge
StateSaveLocation=$work/spool/ctld
SlurmdSpoolDir=$work/spool/d
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd.pid
SlurmctldLogFile=$work/log/slurmctld.log
SlurmdLogFile=$work/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MpiDefault=none
GresTypes=gpu
NodeName=$node NodeAddr=127.0.0.1 CPUs=$cpus Gres=gpu:v100:2 State=UNKNOWN
PartitionName=debug Nodes=$node Default=YES MaxTime=INFINITE State=UP
CONF
# Slurm's gres/gpu drops a GPU without File= ("Removing file-less GPU gpu:v100 from final GRES
# list") and the node then registers with 0 of its 2 GPUs; empty regular files stand in for the
# device nodes (never opened: no cgroup device constraint here). Slurm numbers the GPUs from
# the files' trailing digits and sets CUDA_VISIBLE_DEVICES=0,1 for the worker's job.
touch "$work/dev/gpu0" "$work/dev/gpu1"
cat > "$work/etc/gres.conf" <<CONF
Name=gpu Type=v100 File=$work/dev/gpu[0-1]
CONF
export SLURM_CONF=$work/etc/slurm.conf

step "starting munged, slurmctld, slurmd (config $SLURM_CONF)"
"${SUDO[@]}" mungekey --create --keyfile="$work/munge/munge.key" >/dev/null 2>&1 \
    || "${SUDO[@]}" sh -c "dd if=/dev/urandom bs=1 count=1024 of='$work/munge/munge.key' 2>/dev/null"
"${SUDO[@]}" chmod 600 "$work/munge/munge.key"
"${SUDO[@]}" munged --force --socket="$work/munge/munge.socket" --key-file="$work/munge/munge.key" \
    --pid-file="$work/munged.pid" --log-file="$work/log/munged.log" --seed-file="$work/munge/seed" \
    || die "munged did not start"
munge -n --socket="$work/munge/munge.socket" | unmunge --socket="$work/munge/munge.socket" >/dev/null \
    || die "munge does not round-trip"
"${SUDO[@]}" env SLURM_CONF="$SLURM_CONF" slurmctld -f "$SLURM_CONF" || die "slurmctld did not start"
"${SUDO[@]}" env SLURM_CONF="$SLURM_CONF" slurmd -f "$SLURM_CONF" || die "slurmd did not start"
for i in $(seq 1 60); do
    state=$(sinfo -h -n "$node" -o %T 2>/dev/null)
    case $state in idle) break ;; *drain*|*inval*|*down*) [ "$i" -ge 5 ] && break ;; esac
    sleep 1
done
[ "${state:-}" = idle ] || die "node $node is '${state:-unknown}', not idle"
step "node $node idle: $(sinfo -h -N -o '%N cpus=%c gres=%G')"

# 3. The scheduler and a worker, as the recipes say.
shared=$work/shared
cat > "$shared/cluster.json" <<JSON
{"worker_types": ["v100"], "policy": "las", "round_seconds": 10,
 "checkpoint_root": "$shared/checkpoints"}
JSON
export GAVEL_NG_SHARED=$shared
export PYTHONUNBUFFERED=1
sched_job=$(sbatch --parsable --output="$work/log/scheduler-%j.out" --chdir="$work" \
    "$repo/deploy/slurm/scheduler.sbatch") || die "sbatch scheduler.sbatch failed"
step "submitted scheduler.sbatch: Slurm job $sched_job"
worker_job=$(sbatch --parsable --gres=gpu:v100:2 --dependency="after:$sched_job" \
    --output="$work/log/worker-%j.out" --chdir="$work" "$repo/deploy/slurm/worker.sbatch") \
    || die "sbatch worker.sbatch failed"
step "submitted sbatch --gres=gpu:v100:2 worker.sbatch: Slurm job $worker_job"

for _ in $(seq 1 120); do
    [ -s "$shared/scheduler.address" ] && break
    [ "$(squeue -h -j "$sched_job" -o %T 2>/dev/null)" = "" ] && die "the scheduler job ended"
    sleep 1
done
[ -s "$shared/scheduler.address" ] || die "no $shared/scheduler.address"
address=$(cat "$shared/scheduler.address")
step "scheduler at $address (from $shared/scheduler.address)"
for _ in $(seq 1 120); do
    grep -q "listening on" "$work/log/worker-$worker_job.out" 2>/dev/null && break
    [ "$(squeue -h -j "$worker_job" -o %T 2>/dev/null)" = "" ] && die "the worker job ended"
    sleep 1
done
grep -q "listening on" "$work/log/worker-$worker_job.out" || die "the worker did not start"
step "worker: $(grep -m1 'worker for' "$work/log/worker-$worker_job.out")"

# 4. A tiny job through gavel-ng submit, waited for.
echo '{"job_type": "ResNet-18 (batch size 32)", "steps": 50, "size": "tiny"}' > "$work/job.json"
step "gavel-ng submit job.json --wait"
remaining=$(( deadline_s - ($(date +%s) - t0) ))
ids=$(timeout "$remaining" gavel-ng submit "$work/job.json" --scheduler "$address" \
    --token-file "$shared/state/token" --wait) || die "submit --wait failed or timed out"
step "job $ids finished"
status_json=$(gavel-ng status --scheduler "$address" --token-file "$shared/state/token" --json --all) \
    || die "gavel-ng status failed"
echo "$status_json" | python3 -c '
import json, sys
st = json.load(sys.stdin)
(job,) = st["jobs"]
(worker,) = st["workers"]
print("         job %(job_id)s %(job_type)s: %(status)s, %(steps_done)s/%(steps_total)s steps, "
      "%(attempts)s attempt(s), %(renewals)s renewal(s)" % job)
print("         worker %(worker_id)s at %(address)s: %(gpus)s x %(gpu_type)s" % worker)
assert job["status"] == "done" and job["steps_done"] >= job["steps_total"] == 50, job
assert (worker["gpu_type"], worker["gpus"]) == ("v100", 2), worker
' || die "the job is not done: $status_json"

# 5. scancel stops both with SIGTERM: the scheduler exits cleanly and withdraws its address.
step "scancel $sched_job $worker_job"
scancel "$sched_job" "$worker_job"
for _ in $(seq 1 60); do
    [ -z "$(squeue -h -j "$sched_job,$worker_job" -o %i 2>/dev/null)" ] && break
    sleep 1
done
[ -z "$(squeue -h -j "$sched_job,$worker_job" -o %i 2>/dev/null)" ] || die "the jobs are still in the queue"
[ ! -e "$shared/scheduler.address" ] || die "scheduler.address is still there"
grep -q "scheduler exited with status 0" "$work/log/scheduler-$sched_job.out" \
    || die "the scheduler did not exit cleanly: $(tail -n 3 "$work/log/scheduler-$sched_job.out")"
step "both jobs left the queue; the scheduler exited with status 0 and removed scheduler.address"
result=PASS
