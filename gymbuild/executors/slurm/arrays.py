"""Job arrays on Slurm: the array's task script and its one sbatch (MaxArraySize: limits.py).

An array's task runs its benchmark's own job.sh, unchanged (the script `render` shows and the goldens
pin): a small task script, written beside the first job's script when the array is queued, holds the
job directories in task order, cds into its task's and execs `bash ./job.sh`. The directives the
tasks share go on sbatch's command line (job.sh's `#SBATCH` lines are comments to a script sbatch
does not read); the per-task ones (chdir, output, job name) are the task script's.

A task's job.sh knows itself by `$SLURM_JOB_ID` (its logs, its exit file, a resume chain's entry),
which for an array task is a number of its own; the record, squeue and sacct know it as
`<array id>_<index>`. So the task script leaves two marks before the exec, in the job's directory:
`.gym_exit-<array id>_<index>` is a symlink to `.gym_exit-<SLURM_JOB_ID>` (status without
accounting reads the exit status through it; `logs` reads the number from it, through the executor's
`own_number`, for the logs named after it), and `<array id>_<index>` is a line of `.gym_job_chain`
(so status follows a resumable task's chain: the job.sh appends `$SLURM_JOB_ID` after it, and its
successor, a plain job, after that).
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence
from typing import TYPE_CHECKING

from gymbuild.executors.base import Answer, Queued
from gymbuild.shell import join, quote

if TYPE_CHECKING:
    from gymbuild.executors.connection import Connection
    from gymbuild.executors.secrets import SecretsFile
    from gymbuild.plan.arrays import Directives

ARRAY_JOB_NAME = "gym-array-{attempt}"  # the attempt's own: a lost answer is found by it (`recover`)
TASK_SCRIPT = ".gym_array-{attempt}.sh"  # in the first job's directory: the queue log is its parent's


def task_script(job_dirs: Sequence[str]) -> str:
    """The array's batch script: task i runs the job.sh in `job_dirs[i]`, as that job's own."""
    return (
        "#!/bin/bash\n"
        "# gymbuild job array: task i runs the job.sh of the i-th directory below, unchanged (the script\n"
        "# `gymbuild render` shows). Written when the array was queued.\n"
        f"__gym_dirs=({join(job_dirs)})\n"
        "__gym_task=${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}\n"
        'cd "${__gym_dirs[SLURM_ARRAY_TASK_ID]}" || exit 1\n'
        "# Slurm's output of this task, in the job's own logs/ as a plain job's (%A_%a)\n"
        'exec >>"logs/slurm-$__gym_task.log" 2>&1\n'
        "# status and logs know this task as <array id>_<index>; job.sh names its files $SLURM_JOB_ID\n"
        'ln -sfn ".gym_exit-$SLURM_JOB_ID" ".gym_exit-$__gym_task"\n'
        'grep -qx "$__gym_task" .gym_job_chain 2>/dev/null ||\n'
        "  printf '%s\\n' \"$__gym_task\" >>.gym_job_chain\n"
        "exec bash ./job.sh\n"
    )


def task_script_path(first_job_dir: str, attempt: str) -> str:
    return posixpath.join(first_job_dir, TASK_SCRIPT.format(attempt=attempt))


def sbatch_command(spec: str, directives: Directives, run_dir: str, script: str, attempt: str) -> str:
    """`sbatch --parsable --array=<spec>` with the tasks' shared directives, the array named after
    its attempt, working in the run dir (each task cds into its job's) and its own output nowhere
    (each task's goes to its job's logs/), then the task script."""
    options = [f"--{key}" if value is None else f"--{key}={value}" for key, value in directives]
    name = ARRAY_JOB_NAME.format(attempt=attempt)
    head = [f"--array={spec}", f"--job-name={name}", f"--chdir={run_dir}", "--output=/dev/null"]
    return f"sbatch --parsable {join([*head, *options])} {quote(script)}"


def queue_command(
    spec: str,
    directives: Directives,
    run_dir: str,
    job_dirs: Sequence[str],
    secrets: Sequence[SecretsFile],
    attempt: str,
) -> str:
    """The attempt (attempts.queue_command) that writes the task script and every task's secrets
    file, then queues the array: nothing is queued unless every file was written."""
    from gymbuild.executors import attempts  # queueing only: planning reads this module

    script = task_script_path(job_dirs[0], attempt)
    writes = [f"printf '%s' {quote(task_script(job_dirs))} >{quote(script)}"]
    writes += [s.write() for s in secrets if s.values]
    start = " && ".join(f"{{ {w}\n}}" for w in writes)
    return attempts.queue_command(
        f"{start} && {sbatch_command(spec, directives, run_dir, script, attempt)}", script, None, attempt
    )


def send(conn: Connection, command: str) -> Answer:
    """Send an array's attempt (`queue_command`) into the session's shell; its answer is the array's
    job id."""
    from gymbuild.executors.slurm import queued

    marker = conn.send(command, in_session=True)
    return lambda: queued(conn.receive(marker))


def recover(conn: Connection, first_job_dir: str, attempt: str, run_dir: str) -> Queued | None:
    """The array a killed run's attempt queued (its id), or None once that attempt can never run.

    As a plain job's (slurm.recover_lost): first the attempt's answer in the queue log (the attempt
    revoked if it never ran), then Slurm itself, by the array's name (its attempt's own) and working
    directory (the run dir), for an sbatch whose answer was lost before the log was written."""
    from gymbuild.executors.attempts import recover as recover_attempt
    from gymbuild.executors.slurm import find_queued

    adopted = recover_attempt(conn, task_script_path(first_job_dir, attempt), attempt)
    if adopted is not None:
        return adopted
    array_id = find_queued(conn, run_dir, ARRAY_JOB_NAME.format(attempt=attempt), frozenset())
    return Queued(array_id, None) if array_id else None


def task_id(array_id: str, index: int) -> str:
    """What squeue, sacct, scancel and the record call task `index` of array `array_id`."""
    return f"{array_id}_{index}"
