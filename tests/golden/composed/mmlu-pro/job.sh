#!/bin/bash
#SBATCH --job-name=gym-mmlu-pro
#SBATCH --account=gym
#SBATCH --time=04:00:00
#SBATCH --chdir=/runs/gym-job-20260101T000000Z-abcdef/mmlu-pro
#SBATCH --output=logs/slurm-%j.log
#SBATCH --partition=gpu
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=1
#SBATCH --gpus-per-node=1


# gymbuild job for benchmark mmlu-pro of gym-job-20260101T000000Z-abcdef. Generated: re-render, do not edit.
set -uo pipefail

GYM_BENCH_DIR=/runs/gym-job-20260101T000000Z-abcdef/mmlu-pro
GYM_PORT_DIR=$GYM_BENCH_DIR/.gym_ports
export GYM_BENCH_DIR GYM_PORT_DIR
export GYM_JOB_ID=$SLURM_JOB_ID
# gym_term_driver PID: TERM to the driver step's tasks (PID is its srun). A TERM sent to srun makes it
# kill the tasks with SIGKILL at once, so the driver could never stop cleanly; scancel --signal
# delivers TERM to the tasks themselves, as Slurm's own time limit does. The monitor loop calls it.
# shellcheck disable=SC2317  # called by gym_monitor
gym_term_driver() {
  local step
  step=$(squeue -h -s -j "$SLURM_JOB_ID" -o '%i %j' 2>/dev/null | awk '$2 == "gym-driver" {print $1; exit}')
  if [[ -n $step ]] && scancel --signal=TERM "$step" 2>/dev/null; then
    return 0
  fi
  kill -TERM "$1" 2>/dev/null
}
cd "$GYM_BENCH_DIR" || exit 1
# One live copy of this job per bench dir: a second copy (the job started twice) exits 75 here, before
# it touches anything. The lock is flock(2) on .gym_job.lock, open in this shell and so in every
# process the job starts: the kernel drops it when the last of them ends, however it ends. A job waits
# for it up to GYM_JOB_LOCK_WAIT_SECONDS (default 120): a resumable chain's successor starts the
# moment its predecessor's script ends, while Slurm is still ending the processes that hold the lock.
exec {__gym_lock}>>.gym_job.lock || exit 1
__gym_lock_wait=${GYM_JOB_LOCK_WAIT_SECONDS:-120}
[[ $__gym_lock_wait =~ ^[0-9]+([.][0-9]+)?$ ]] || __gym_lock_wait=120
if command -v flock >/dev/null 2>&1; then
  flock -w "$__gym_lock_wait" -E 75 "$__gym_lock"
else  # no util-linux (macOS, a local job): Python's flock(2) on the same open file
  python3 -c 'import fcntl, sys, time
deadline = time.monotonic() + float(sys.argv[2])
while True:
    try:
        fcntl.flock(int(sys.argv[1]), fcntl.LOCK_EX | fcntl.LOCK_NB)
        break
    except BlockingIOError:
        if time.monotonic() >= deadline:
            sys.exit(75)
        time.sleep(0.2)' "$__gym_lock" "$__gym_lock_wait"
fi
__gym_locked=$?
if ((__gym_locked == 75)); then
  echo "gym: job $(<.gym_job.lock) is still running in $GYM_BENCH_DIR (it held .gym_job.lock for ${__gym_lock_wait} s): this second copy, job $GYM_JOB_ID, exits 75 and leaves it alone" >&2
  exit 75
elif ((__gym_locked != 0)); then
  echo "gym: warning: cannot lock $GYM_BENCH_DIR/.gym_job.lock (does its file system support flock?): a second copy of this job would not be refused" >&2
fi
printf '%s on %s\n' "$GYM_JOB_ID" "$HOSTNAME" >.gym_job.lock

mkdir -p logs artifacts .gym_ports
# A requeued job runs again under the same id: the ports its last run's steps published are stale,
# and a readiness check that read one would wait on a port no server of this run holds.
rm -f .gym_ports/*-"$GYM_JOB_ID" .gym_ports/*-"$GYM_JOB_ID".tmp

# However the job ends, its exit status goes to .gym_exit-<job id>: `status` reads it once the job is
# gone (and where Slurm keeps no accounting). A signal ends the job with 128 + its number.
# shellcheck disable=SC2317  # run by the EXIT trap
gym_on_exit() {
  local status=$?
  printf '%s\n' "$status" >"$GYM_BENCH_DIR/.gym_exit-$GYM_JOB_ID"
}
trap gym_on_exit EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM

# Ports are settled at run time on the node that uses them, so two jobs sharing a node never reach
# each other's services: the configured port first, then the next free ones (skipping the ports this
# job's other services want first). The port taken goes to $GYM_PORT_DIR/<name>-<job id>.
# A port found free is also claimed, because a server binds it only later (vLLM after loading the
# model): the claim is an abstract unix socket named after the port, which every container on the
# node's network sees, held by a small process until the shell that picked the port (the step, once
# it execs its server) exits. Two jobs probing at once cannot both win the claim.
# Steps get these functions through GYM_STEP_LIB (below); shellcheck cannot see those calls.
__gym_reserved=(8000)
# shellcheck disable=SC2317  # called inside the steps, through GYM_STEP_LIB
__gym_port_free() {
  if command -v python3 >/dev/null 2>&1; then
    python3 -c 'import os, socket, sys, time
port, owner = int(sys.argv[1]), int(sys.argv[2])
claim = socket.socket(socket.AF_UNIX)
try:
    claim.bind("\0gym-port-%d" % port)
except OSError:
    sys.exit(1)
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("", port))
s.close()
if os.fork():
    os._exit(0)
os.setsid()
null = os.open(os.devnull, os.O_RDWR)
for fd in (0, 1, 2):
    os.dup2(null, fd)
while True:
    try:
        os.kill(owner, 0)
    except ProcessLookupError:
        break
    except PermissionError:
        pass
    time.sleep(2)' "$1" "$$" 2>/dev/null
    return
  fi
  # Without python: a port nothing listens on (locally) is taken to be free.
  ! (: <>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}
# shellcheck disable=SC2317  # called inside the steps, through GYM_STEP_LIB
__gym_pick_port() {
  local port=$1 n
  for ((n = 0; n < 200; n++, port++)); do
    if ((n > 0)) && [[ " ${__gym_reserved[*]} " == *" $port "* ]]; then
      continue
    fi
    if __gym_port_free "$port"; then
      echo "$port"
      return 0
    fi
  done
  echo "gym: no free port in $1..$port on $(hostname)" >&2
  return 1
}
# shellcheck disable=SC2317  # called inside the steps, through GYM_STEP_LIB
__gym_publish() {
  printf '%s\n' "$2" >"$GYM_PORT_DIR/$1-$GYM_JOB_ID.tmp" &&
    mv -f "$GYM_PORT_DIR/$1-$GYM_JOB_ID.tmp" "$GYM_PORT_DIR/$1-$GYM_JOB_ID"
}
# shellcheck disable=SC2317  # called inside the steps, through GYM_STEP_LIB
__gym_poll_interval() {  # GYM_POLL_SECONDS when it is a positive number of seconds, else 5
  local poll=${GYM_POLL_SECONDS:-5}
  [[ $poll =~ ^[0-9]*[.]?[0-9]+$ && $poll =~ [1-9] ]] || poll=5
  echo "$poll"
}
# __gym_polls SECONDS: how many polls of GYM_POLL_SECONDS (default 5) make SECONDS, at least one.
# Every wait counts polls against its budget rather than reading a clock, so the budget stays what
# it is whatever the poll, and a `sleep` that returns at once (the parity harness's) shortens it.
# shellcheck disable=SC2317  # called inside the steps, through GYM_STEP_LIB
__gym_polls() {
  local poll whole frac='' ms
  poll=$(__gym_poll_interval)
  whole=${poll%%.*}
  [[ $poll == *.* ]] && frac=${poll#*.}
  frac=${frac}000
  ms=$((10#${whole:-0} * 1000 + 10#${frac:0:3}))
  ((ms > 0)) || ms=5000
  echo $(($1 * 1000 / ms > 0 ? $1 * 1000 / ms : 1))
}
# shellcheck disable=SC2317  # called inside the steps, through GYM_STEP_LIB
__gym_wait_port() {
  local file="$GYM_PORT_DIR/$1-$GYM_JOB_ID" poll n polls
  poll=$(__gym_poll_interval)
  polls=$(__gym_polls 3600)
  for ((n = 0; n < polls; n++)); do
    if [[ -s $file ]]; then
      cat "$file"
      return 0
    fi
    sleep "$poll"
  done
  echo "gym: $1 published no port within an hour" >&2
  return 1
}
GYM_STEP_LIB=$(declare -p __gym_reserved; declare -f __gym_port_free __gym_pick_port __gym_publish __gym_polls __gym_poll_interval __gym_wait_port)
export GYM_STEP_LIB

# How often the job looks at its steps (GYM_POLL_SECONDS, default 5 s) changes only how soon an
# event is seen: a health check's budget stays its attempts times NeMo Gym's 5 s (__gym_polls).
__gym_poll_seconds=$(__gym_poll_interval)
__gym_attempt_seconds=5
__gym_flush_seconds=${GYM_COLLECTOR_FLUSH_SECONDS:-20}
[[ $__gym_flush_seconds =~ ^[0-9]*[.]?[0-9]+$ ]] || __gym_flush_seconds=20
GYM_STEP_NAMES=()
GYM_STEP_PIDS=()

# gym_started NAME PID: a service step the monitor loop watches.
gym_started() {
  GYM_STEP_NAMES+=("$1")
  GYM_STEP_PIDS+=("$2")
}

# gym_nodes FIRST COUNT: hostnames of allocation nodes FIRST.., comma-separated (for --nodelist).
# shellcheck disable=SC2317  # called only on multi-node allocations
gym_nodes() {
  local IFS=,
  echo "${GYM_NODES[*]:$1:$2}"
}

# gym_http_ok URL: a 2xx answer. curl, else wget, else a plain HTTP/1.0 GET over bash's /dev/tcp.
gym_http_ok() {
  if command -v curl >/dev/null 2>&1; then
    curl -fsS -o /dev/null --max-time 5 "$1" 2>/dev/null
    return
  fi
  if command -v wget >/dev/null 2>&1; then
    wget -q -O /dev/null -T 5 "$1" 2>/dev/null
    return
  fi
  local rest=${1#http://} fd status
  local hostport=${rest%%/*} path=/${rest#*/}
  [[ $rest == */* ]] || path=/
  exec {fd}<>"/dev/tcp/${hostport%:*}/${hostport##*:}" 2>/dev/null || return 1
  printf 'GET %s HTTP/1.0\r\nHost: %s\r\n\r\n' "$path" "$hostport" >&"$fd"
  read -r -t 5 _ status _ <&"$fd"
  exec {fd}>&-
  [[ $status == 2* ]]
}

# gym_write_target FILE HOST:PORT...: a Prometheus file_sd target list for the collector.
# shellcheck disable=SC2317  # called only when the collector is on
gym_write_target() {
  local file=$1 sep='' out='[{"targets":['
  shift
  for target; do
    out+="$sep\"$target\""
    sep=,
  done
  printf '%s]}]\n' "$out" >"$file.tmp" && mv -f "$file.tmp" "$file"
}

# gym_wait_ready NAME PID HOST PORT_VAR PORT_FILE HEALTH_PATH ATTEMPTS [HEALTH_PORT] [TARGET_FILE]
# Poll every GYM_POLL_SECONDS for ATTEMPTS x 5 s: the step must still be running (its own PID, at
# every poll, so a server of another job on the same port never passes for ours); read the port it
# settled from PORT_FILE into PORT_VAR; then, with a HEALTH_PATH, wait for http://HOST:PORT/PATH to
# answer 2xx.
gym_wait_ready() {
  local name=$1 pid=$2 host=$3 var=$4 file=$5 path=$6 attempts=$7 health_port=${8:-} target=${9:-}
  local port=${!var:-} n polls
  polls=$(__gym_polls $((attempts * __gym_attempt_seconds)))
  for ((n = 1; n <= polls; n++)); do
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "gym: service $name exited before it was ready; see logs/$name-$GYM_JOB_ID.log" >&2
      return 1
    fi
    if [[ -z $port && -n $file && -s $file ]]; then
      port=$(<"$file")
      if [[ ! $port =~ ^[0-9]+$ ]]; then
        echo "gym: service $name published a bad port: $port" >&2
        return 1
      fi
      printf -v "$var" '%s' "$port"
      if [[ -n $target ]]; then
        gym_write_target "$target" "$host:$port"
      fi
    fi
    if [[ -n $port ]]; then
      if [[ -z $path ]]; then
        return 0
      fi
      if gym_http_ok "http://$host:${health_port:-$port}$path" && kill -0 "$pid" 2>/dev/null; then
        echo "gym: service $name is healthy at http://$host:${health_port:-$port}$path"
        return 0
      fi
    fi
    sleep "$__gym_poll_seconds"
  done
  echo "gym: service $name was not ready within $((attempts * __gym_attempt_seconds)) s ($attempts attempts of $__gym_attempt_seconds s)" >&2
  return 1
}

# gym_monitor DRIVER_PID: while the driver runs, check every service step every GYM_POLL_SECONDS.
# When one has exited, say which, send the driver TERM and return 1; otherwise the driver's status.
gym_monitor() {
  local driver=$1 i
  while kill -0 "$driver" 2>/dev/null; do
    for i in "${!GYM_STEP_PIDS[@]}"; do
      if ! kill -0 "${GYM_STEP_PIDS[i]}" 2>/dev/null; then
        echo "gym: service step ${GYM_STEP_NAMES[i]} exited while the driver was running; stopping the driver" >&2
        if declare -F gym_term_driver >/dev/null; then  # the executor's way, when it has one
          gym_term_driver "$driver"
        else
          kill -TERM "$driver" 2>/dev/null
        fi
        wait "$driver"
        return 1
      fi
    done
    sleep "$__gym_poll_seconds"
  done
  wait "$driver"
}

# gym_stop_collector PID: let it flush, TERM it, give it 30 s to exit.
# shellcheck disable=SC2317  # called only when the collector is on
gym_stop_collector() {
  local pid=$1 n
  sleep "$__gym_flush_seconds"
  kill -TERM "$pid" 2>/dev/null || return 0
  for ((n = 0; n < 30; n++)); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 1
  done
  echo "gym: the collector did not exit within 30 s of TERM" >&2
}


# --- service step policy (vllm): 1 node(s) from node 0
# shellcheck disable=SC2016  # the step's script is expanded by the step's own bash, not by this one
  srun --overlap --nodes=1 --ntasks=1 \
    --no-container-mount-home --container-image=vllm/vllm-openai:v0.10.1 \
    --container-mounts=/runs/gym-job-20260101T000000Z-abcdef/mmlu-pro/.gym_ports:/runs/gym-job-20260101T000000Z-abcdef/mmlu-pro/.gym_ports \
    --kill-on-bad-exit=1 --wait=1 \
    bash -c 'set -uo pipefail
eval "$GYM_STEP_LIB"
__gym_task=${SLURM_PROCID:-0}
__gym_role=()
__gym_args=()
GYM_PORT=$(__gym_pick_port 8000) || exit 1
__gym_publish policy "$GYM_PORT" || exit 1
exec vllm serve Qwen/Qwen3-8B --port "${GYM_PORT}" --tensor-parallel-size 1 "${__gym_args[@]}" "${__gym_role[@]}"
' \
    >logs/policy-"${GYM_JOB_ID}".log 2>&1 </dev/null &
gym_started policy $!

# --- readiness: the port each step settled, then its health check
gym_wait_ready policy "${GYM_STEP_PIDS[0]}" localhost GYM_PORT_POLICY "${GYM_PORT_DIR}"/policy-"${GYM_JOB_ID}" \
  /health 12 '' '' || exit 1

# --- driver: gym eval run, with the bench dir at the same path
# shellcheck disable=SC2016  # the step's script is expanded by the step's own bash, not by this one
GYM_POLICY_PORT="${GYM_PORT_POLICY}" \
  srun --overlap --nodes=1 --ntasks=1 \
    --job-name=gym-driver \
    --no-container-mount-home --container-image=python:3.12 \
    --container-mounts=/runs/gym-job-20260101T000000Z-abcdef/mmlu-pro:/runs/gym-job-20260101T000000Z-abcdef/mmlu-pro \
    bash -c 'set -euo pipefail
eval "$GYM_STEP_LIB"
GYM_HEAD_PORT=$(__gym_pick_port 11000)
export GYM_HEAD_PORT
echo "gym: the driver'"'"'s head server takes port $GYM_HEAD_PORT" >&2
__gym_resume=()
if [ -s /runs/gym-job-20260101T000000Z-abcdef/mmlu-pro/artifacts/rollouts.jsonl ] && [ -s /runs/gym-job-20260101T000000Z-abcdef/mmlu-pro/artifacts/rollouts_materialized_inputs.jsonl ]; then
  echo "gym: continuing from the rollouts an earlier job wrote ($(wc -l </runs/gym-job-20260101T000000Z-abcdef/mmlu-pro/artifacts/rollouts.jsonl) of $(wc -l </runs/gym-job-20260101T000000Z-abcdef/mmlu-pro/artifacts/rollouts_materialized_inputs.jsonl))" >&2
  __gym_resume=(+resume_from_cache=True)
fi
# shellcheck disable=SC2016  # overrides are literal text for gym; only ${GYM_POLICY_PORT} and ${GYM_HEAD_PORT} expand
exec gym eval run +output_jsonl_fpath=/runs/gym-job-20260101T000000Z-abcdef/mmlu-pro/artifacts/rollouts.jsonl --model-type openai_model +observability_enabled=True '"'"'+config_paths=[benchmarks/mmlu_pro/config.yaml]'"'"' +metadata.model=Qwen/Qwen3-8B +policy_base_url=http://localhost:"${GYM_POLICY_PORT}"/v1 +policy_model_name=Qwen/Qwen3-8B +policy_api_key=dummy +model_call_capture_dir=/runs/gym-job-20260101T000000Z-abcdef/mmlu-pro/model-calls +require_complete=True ++head_server.port="${GYM_HEAD_PORT}" ${__gym_resume[@]+"${__gym_resume[@]}"}
' \
    >logs/driver-"${GYM_JOB_ID}".log 2>&1 </dev/null &
__gym_driver_pid=$!

# --- monitor: every service step, every 5 s, while the driver runs; the job's status is the driver's
gym_monitor "$__gym_driver_pid"
__gym_status=$?
exit "$__gym_status"
