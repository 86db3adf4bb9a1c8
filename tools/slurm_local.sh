#!/usr/bin/env bash
# A one-node Slurm cluster on this machine, for testing needlebench's SlurmRunner path.
#
#   tools/slurm_local.sh up [--gpus N]   install (Debian slurm-wlm + munge) if missing, write the
#                                        config, start munged/slurmctld/slurmd, wait for an idle node
#   tools/slurm_local.sh down            stop exactly the daemons `up` started (their PIDs are recorded)
#   tools/slurm_local.sh status          what runs, and sinfo
#
# Root on Debian (as CI is); no systemd needed: the daemons are started directly and fork.
# State (config, spool, logs, PIDs) lives in $NB_SLURM_STATE (default <repo>/.cache/slurm).
# /etc/slurm/slurm.conf and gres.conf are symlinked there so srun/sinfo need no SLURM_CONF;
# a slurm.conf that is not ours is never replaced (then export SLURM_CONF=<state>/slurm.conf).
# --gpus N advertises N test GPUs backed by existing device files (/dev/null, /dev/zero, ...),
# so `srun --gres=gpu:N` gets CUDA_VISIBLE_DEVICES and queues when they are taken; nothing
# computes on them. Calling `up` again with another --gpus restarts the daemons it started.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
STATE="${NB_SLURM_STATE:-$REPO/.cache/slurm}"
CONF="$STATE/slurm.conf"
GRES="$STATE/gres.conf"
PIDS="$STATE/pids"
WAIT_S="${NB_SLURM_WAIT:-30}"
GPU_FILES=(/dev/null /dev/zero /dev/full /dev/random /dev/urandom /dev/tty)

die() { echo "slurm_local: $*" >&2; exit 1; }
say() { echo "slurm_local: $*"; }

need_root() { [ "$(id -u)" = 0 ] || die "must run as root (it installs packages and starts daemons)"; }

install_packages() {
    if command -v srun >/dev/null && command -v slurmctld >/dev/null && command -v slurmd >/dev/null \
        && command -v munged >/dev/null; then
        return
    fi
    command -v apt-get >/dev/null || die "slurm-wlm/munge are missing and there is no apt-get to install them"
    say "installing slurm-wlm and munge"
    export DEBIAN_FRONTEND=noninteractive
    if ! apt-get install -y -q slurm-wlm munge >"$STATE/apt.log" 2>&1; then
        apt-get update -q >>"$STATE/apt.log" 2>&1
        apt-get install -y -q slurm-wlm munge >>"$STATE/apt.log" 2>&1 || die "apt-get install failed; see $STATE/apt.log"
    fi
}

write_config() {  # $1 = number of test GPUs; writes into "$1.new" files, the caller compares
    local gpus=$1 host node_gres="" gres_line=""
    host="$(hostname -s)"
    if [ "$gpus" -gt 0 ]; then
        [ "$gpus" -le "${#GPU_FILES[@]}" ] || die "--gpus: at most ${#GPU_FILES[@]} test GPUs"
        local files
        files="$(IFS=,; echo "${GPU_FILES[*]:0:$gpus}")"
        node_gres="Gres=gpu:$gpus"
        gres_line="GresTypes=gpu"
        printf '# written by tools/slurm_local.sh\nName=gpu File=%s\n' "$files" >"$GRES.new"
    else
        printf '# written by tools/slurm_local.sh (no test GPUs)\n' >"$GRES.new"
    fi
    cat >"$CONF.new" <<EOF
# written by tools/slurm_local.sh: a one-node test cluster (needlebench)
ClusterName=needlebench
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
AuthType=auth/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/spool
SlurmctldPidFile=$STATE/slurmctld.pid
SlurmdPidFile=$STATE/slurmd.pid
SlurmctldLogFile=$STATE/slurmctld.log
SlurmdLogFile=$STATE/slurmd.log
KillWait=2
$gres_line
NodeName=$host NodeAddr=127.0.0.1 CPUs=2 $node_gres State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
}

link_etc() {  # srun/sinfo read /etc/slurm/slurm.conf; link ours there unless someone else's is
    mkdir -p /etc/slurm
    local f
    for f in slurm.conf gres.conf; do
        # ours: a link here, or a file this script wrote (another checkout's state dir, say)
        if [ -e "/etc/slurm/$f" ] && [ "$(readlink -f "/etc/slurm/$f")" != "$(readlink -f "$STATE/$f")" ] \
            && ! head -1 "/etc/slurm/$f" | grep -q '^# written by tools/slurm_local.sh'; then
            say "/etc/slurm/$f is not ours; left alone: export SLURM_CONF=$CONF"
            continue
        fi
        ln -sfn "$STATE/$f" "/etc/slurm/$f"
    done
}

alive() {  # $1 = pid, $2 = expected command name: true if that process still runs
    [ -n "$1" ] && [ "$(cat "/proc/$1/comm" 2>/dev/null)" = "$2" ]
}

recorded() {  # $1 = daemon name: its recorded PID, if any
    if [ -f "$PIDS" ]; then awk -v n="$1" '$1 == n { print $2 }' "$PIDS" | tail -1; fi
}

munge_ok() { munge -n 2>/dev/null | unmunge >/dev/null 2>&1; }
ctld_ok() { scontrol ping 2>/dev/null | grep -q 'is UP'; }

node_state() { sinfo -h -N -o '%T' 2>/dev/null | head -1; }

pid_from() {  # $1 = a daemon's pid file: its PID, waiting briefly for the forked daemon to write it
    local i
    for i in $(seq 1 50); do [ -s "$1" ] && break; sleep 0.1; done
    [ -s "$1" ] || die "no PID file $1: the daemon did not start (see the logs in $STATE)"
    cat "$1"
}

remember() {  # $1 = daemon name, $2 = PID: record it (replacing an older record of that daemon)
    touch "$PIDS"
    { awk -v n="$1" '$1 != n' "$PIDS"; echo "$1 $2"; } >"$PIDS.new"
    mv "$PIDS.new" "$PIDS"
}

start_munge() {
    if munge_ok; then
        [ -n "$(recorded munged)" ] || say "munged already running (not ours; left alone)"
        return
    fi
    mkdir -p /run/munge /var/log/munge /var/lib/munge
    chown munge:munge /run/munge /var/log/munge /var/lib/munge
    chmod 0755 /run/munge
    if [ ! -s /etc/munge/munge.key ]; then
        say "creating /etc/munge/munge.key"
        dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key status=none
    fi
    chown munge:munge /etc/munge/munge.key
    chmod 0400 /etc/munge/munge.key
    rm -f /run/munge/munged.pid
    runuser -u munge -- /usr/sbin/munged
    local i
    for i in $(seq 1 50); do munge_ok && break; sleep 0.1; done
    munge_ok || die "munged did not start (see /var/log/munge/munged.log)"
    remember munged "$(pid_from /run/munge/munged.pid)"
}

start_slurm() {
    mkdir -p "$STATE/ctld" "$STATE/spool"
    if ! ctld_ok; then
        rm -f "$STATE/slurmctld.pid"
        # -c: a fresh controller state (a throwaway cluster keeps no jobs across restarts)
        slurmctld -c -f "$CONF" || die "slurmctld failed to start; see $STATE/slurmctld.log"
        remember slurmctld "$(pid_from "$STATE/slurmctld.pid")"
    fi
    if ! alive "$(recorded slurmd)" slurmd; then
        rm -f "$STATE/slurmd.pid"
        slurmd -f "$CONF" || die "slurmd failed to start; see $STATE/slurmd.log"
        remember slurmd "$(pid_from "$STATE/slurmd.pid")"
    fi
}

wait_idle() {
    local deadline=$((SECONDS + WAIT_S)) state=""
    while [ $SECONDS -lt $deadline ]; do
        state="$(node_state)"
        case "$state" in idle*|mixed*|allocated*) say "node $(hostname -s) is $state"; return ;; esac
        sleep 0.2
    done
    die "the node did not become idle in ${WAIT_S}s (state: '${state:-no answer}'); see $STATE/slurmctld.log and $STATE/slurmd.log"
}

stop() {  # the daemons named, all at once (each takes ~2 s to shut down), then wait for them
    local name pid i left
    local -a names=()
    for name in "$@"; do
        pid="$(recorded "$name")"
        if alive "$pid" "$name"; then kill "$pid"; names+=("$name"); fi
    done
    for i in $(seq 1 150); do
        left=0
        for name in "${names[@]}"; do alive "$(recorded "$name")" "$name" && left=1; done
        [ "$left" = 0 ] && break
        sleep 0.1
    done
    for name in "${names[@]}"; do
        pid="$(recorded "$name")"
        if alive "$pid" "$name"; then kill -9 "$pid"; fi
        say "stopped $name ($pid)"
    done
    for name in "$@"; do
        [ -f "$PIDS" ] && { awk -v n="$name" '$1 != n' "$PIDS" >"$PIDS.new"; mv "$PIDS.new" "$PIDS"; }
    done
    return 0
}

stop_ours() {
    [ -f "$PIDS" ] || { say "nothing recorded in $PIDS; nothing to stop"; return; }
    stop slurmd slurmctld  # the Slurm daemons first, munged last (they authenticate through it)
    stop munged
    rm -f "$PIDS"
}

cmd_up() {
    local gpus=0
    while [ $# -gt 0 ]; do
        case "$1" in
            --gpus) [ $# -ge 2 ] || die "--gpus needs a number"; gpus="$2"; shift 2 ;;
            --gpus=*) gpus="${1#--gpus=}"; shift ;;
            *) die "up: unknown option '$1' (usage: up [--gpus N])" ;;
        esac
    done
    [[ "$gpus" =~ ^[0-9]+$ ]] || die "--gpus: '$gpus' is not a number"
    need_root
    mkdir -p "$STATE"
    install_packages
    write_config "$gpus"
    local changed=0
    cmp -s "$CONF.new" "$CONF" && cmp -s "$GRES.new" "$GRES" || changed=1
    mv "$CONF.new" "$CONF"
    mv "$GRES.new" "$GRES"
    link_etc
    start_munge
    if ctld_ok && [ -z "$(recorded slurmctld)" ]; then
        die "a Slurm controller that this script did not start already answers; use it, or stop it first"
    fi
    if [ "$changed" = 1 ] && ctld_ok; then
        say "configuration changed: restarting the Slurm daemons this script started"
        stop slurmd slurmctld
    fi
    if ctld_ok && alive "$(recorded slurmd)" slurmd; then
        say "already up"
    fi
    start_slurm
    wait_idle
}

cmd_status() {
    if [ -f "$PIDS" ]; then
        local name pid
        while read -r name pid; do
            if alive "$pid" "$name"; then echo "$name $pid running"; else echo "$name $pid gone"; fi
        done <"$PIDS"
    else
        echo "no daemons recorded in $PIDS"
    fi
    if command -v sinfo >/dev/null && ctld_ok; then sinfo; else echo "slurmctld: not reachable"; fi
}

case "${1:-}" in
    up) shift; cmd_up "$@" ;;
    down) need_root; stop_ours ;;
    status) cmd_status ;;
    *) echo "usage: $0 up [--gpus N] | down | status" >&2; exit 2 ;;
esac
