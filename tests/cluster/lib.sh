# shellcheck shell=bash
# shellcheck disable=SC2034  # the variables are used by the scripts that source this file
# Shared by tests/cluster/up and tests/cluster/down: where the test cluster keeps its state.
# See tests/cluster/README.md.

STATE=/var/lib/gymbuild-cluster   # all state, logs and pid files of the processes `up` started
RUN="$STATE/run"                  # pid files: only processes listed here are stopped by `down`
LOG="$STATE/log"
SSHD_DIR="$STATE/sshd"
NODES=(node1 node2)
declare -A NODE_ADDR=([node1]=10.77.0.11 [node2]=10.77.0.12)
BRIDGE=gymbr0
BRIDGE_ADDR=10.77.0.1
NETNS_PREFIX=gym-
SSH_PORT=2222
SSH_ALIAS=gym-login
CLIENT_KEY=/root/.ssh/gymbuild-test_ed25519
RUNS_ROOT=/var/tmp/gymbuild-cluster   # shared by every "node": run dirs for tests go under here

log() { printf '[cluster] %s\n' "$*" >&2; }

# pid_of NAME: the pid recorded for NAME if that process is still alive and is what we started.
pid_of() {
    local name="$1" pidfile="$RUN/$1.pid" pid comm
    [ -s "$pidfile" ] || return 1
    pid="$(tr -dc '0-9' <"$pidfile")"
    [ -n "$pid" ] && [ -d "/proc/$pid" ] || return 1
    comm="$(cat "/proc/$pid/comm" 2>/dev/null || true)"
    case "$name" in
        slurmd-*) [ "$comm" = slurmd ] || return 1 ;;
        mariadbd) [ "$comm" = mariadbd ] || [ "$comm" = mysqld ] || return 1 ;;
        *) [ "$comm" = "$name" ] || return 1 ;;
    esac
    printf '%s\n' "$pid"
}

# stop NAME: TERM the recorded process, wait for it, KILL it if it lingers, forget the pid file.
stop() {
    local name="$1" pid i
    if pid="$(pid_of "$name")"; then
        log "stopping $name (pid $pid)"
        kill -TERM "$pid" 2>/dev/null || true
        for _ in $(seq 1 100); do
            [ -d "/proc/$pid" ] || break
            sleep 0.2
        done
        if [ -d "/proc/$pid" ]; then
            log "$name did not stop within 20s: killing it"
            kill -KILL "$pid" 2>/dev/null || true
        fi
    fi
    rm -f "$RUN/$name.pid" "$RUN/$name.owned"
}
