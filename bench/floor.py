"""The floor: only the work a submit (or a status call) cannot avoid, done by a plain script.

    python bench/floor.py submit HOST STAGE RUN_DIR BENCH...   -> one job id per line
    python bench/floor.py status HOST JOB_ID...                -> squeue and sacct lines
    python bench/floor.py render STAGE DEST                    -> every file of STAGE, printed

render: what a dry run cannot avoid on this disk: start Python, then write every file of a staged
tree (the same bytes, under the same directories) into DEST and print each to stdout. Reading the
source files (in the page cache) is the only work gymbuild does not do.

submit: one SSH master, one `mkdir` of the run directory, one rsync of the staged tree over that
master, one `bash -s` that runs `sbatch --parsable RUN_DIR/<bench>/job.sh` for every benchmark, and
closing the master. status: one SSH master, one `bash -s` running one squeue and one sacct over every
job id. bench/run.py times this in the same run as gymbuild, so both see the same load.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import tempfile

SSH = ["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=15"]


class Master:
    """One SSH ControlMaster for the whole floor run, as gymbuild keeps one."""

    def __init__(self, host: str) -> None:
        self.host = host
        self.control = os.path.join(tempfile.gettempdir(), f"floor-{os.getpid()}.ssh")
        subprocess.run(
            [*SSH, "-M", "-S", self.control, "-o", "ControlPersist=120", "-f", "-N", host],
            stdin=subprocess.DEVNULL,
            check=True,
        )
        self.via = [*SSH, "-S", self.control, "-o", "ControlMaster=no"]

    def bash(self, script: str) -> str:
        """One `bash -s` reading `script` on stdin, as gymbuild's persistent shell does."""
        done = subprocess.run(
            [*self.via, self.host, "bash -s"], input=script, capture_output=True, text=True, check=True
        )
        return done.stdout

    def close(self) -> None:
        subprocess.run(["ssh", "-S", self.control, "-O", "exit", self.host], capture_output=True, check=False)


def submit(host: str, stage: str, run_dir: str, benches: list[str]) -> list[str]:
    master = Master(host)
    try:
        master.bash(f"mkdir -p {shlex.quote(run_dir)}\n")
        rsh = shlex.join(master.via)
        subprocess.run(
            ["rsync", "-rlpt", "--checksum", "--protect-args", "-e", rsh, f"{stage}/", f"{host}:{run_dir}/"],
            check=True,
        )
        script = "".join(f"sbatch --parsable {shlex.quote(f'{run_dir}/{b}/job.sh')}\n" for b in benches)
        out = master.bash(script)
    finally:
        master.close()
    return [line.split(";")[0] for line in out.split()]


def status(host: str, job_ids: list[str]) -> str:
    master = Master(host)
    ids = ",".join(job_ids)
    try:
        return master.bash(
            f"squeue -h -o '%i %T %M %N' -j {ids}\n"
            f"sacct -X -n -P -o JobID,State,ExitCode,Elapsed,NodeList -j {ids}\n"
        )
    finally:
        master.close()


def render(stage: str, dest: str) -> None:
    out = sys.stdout.buffer
    for here, dirs, files in os.walk(stage):
        dirs.sort()
        target = os.path.join(dest, os.path.relpath(here, stage))
        os.makedirs(target, exist_ok=True)
        for name in sorted(files):
            with open(os.path.join(here, name), "rb") as src:
                data = src.read()
            with open(os.path.join(target, name), "wb") as dst:
                dst.write(data)
            out.write(data)


def main(argv: list[str]) -> None:
    verb, host, *rest = argv
    if verb == "render":
        render(host, *rest)
    elif verb == "submit":
        stage, run_dir, *benches = rest
        print("\n".join(submit(host, stage, run_dir, benches)))
    elif verb == "status":
        sys.stdout.write(status(host, rest))
    else:
        raise SystemExit(f"unknown verb {verb}")


if __name__ == "__main__":
    main(sys.argv[1:])
