"""gymbuild's benchmark suite: render, submit, no-op, partial re-submit and status at N benchmarks,
each against a floor measured in the same run (see bench/README.md).

    python bench/run.py                      # N = 10 100 1000, 3 runs each, every measure
    python bench/run.py -n 100 --runs 5 --only submit,noop --json out.json --markdown out.md

Runs against the real test cluster (`ssh gym-login`). Every job is queued with `--begin=now+7days`
(bench/genconfig.py), so nothing runs; the suite cancels its own jobs by id with one `scancel` after
each measurement and removes its run directories at the end.

Counting: a wrapper directory first on the PATH of the gymbuild process (and of the floor) logs each
`ssh` and `rsync` call; when the remote command is `bash -s` (gymbuild's persistent shell, and the
floor's), the wrapper runs it with a second wrapper directory first on the login-side PATH, which logs
each `sbatch`, `squeue` and `sacct` call (and refuses sbatch for benchmarks in a fail list: the
partial measure). The floor goes through the same wrappers, so their small cost hits both alike.
"""

from __future__ import annotations

import argparse
import compileall
import importlib.util
import itertools
import json
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from genconfig import bench_name, write_config

HERE = Path(__file__).resolve().parent
HOST = "gym-login"
REMOTE_BASE = "/var/tmp/gymbuild-cluster"
MEASURES = ("render", "submit", "noop", "partial", "status")
PARTIAL_FAILURES = 10

TARGETS = {
    "render": "1000: < 1 s wall, < 150 MB (floor: write and print the same files)",
    "submit": "<= 1.3x floor (N = 100, 1000)",
    "noop": "<= 0.25x first submit (N = 100); 0 sbatch/rsync/ssh master",
    "partial": "10 sbatch; <= 1.3x floor for 10",
    "status": "<= 1.3x floor; 1 squeue + 1 sacct",
}


def gymbuild_exe() -> str:
    """The console script of this interpreter, not a version manager's shim (pyenv's costs ~0.1 s)."""
    beside = Path(sys.executable).with_name("gymbuild")
    return str(beside) if beside.exists() else (shutil.which("gymbuild") or "gymbuild")


def compile_package(source: Path | None) -> None:
    """Byte-compile the gymbuild that is measured, as `pip install` does when it installs a package.

    Without it, a checkout run under PYTHONDONTWRITEBYTECODE=1 (this sandbox sets it) compiles all of
    gymbuild's modules from source on every run, about 50 ms that no installed gymbuild pays.
    """
    if source is not None:
        package = source.resolve() / "gymbuild"
    else:
        spec = importlib.util.find_spec("gymbuild")
        if spec is None or spec.origin is None:
            return
        package = Path(spec.origin).parent
    compileall.compile_dir(str(package), quiet=1)


# --- wrappers that count calls ---------------------------------------------------------------------


class Counters:
    """PATH wrappers on both sides; each call appends a line to `<logs>/<program>.log`."""

    def __init__(self, root: Path) -> None:
        self.logs = root / "logs"
        self.local_bin = root / "bin"
        self.login_bin = root / "login-bin"
        self.fail_list = root / "fail-list"
        for d in (self.logs, self.local_bin, self.login_bin):
            d.mkdir(parents=True)
        self._wrapper(
            self.local_bin / "ssh",
            'printf "%s\\n" "$*" >> {log}\n'
            'args=("$@"); last=$(( ${{#args[@]}} - 1 ))\n'
            'if [ "${{args[$last]}}" = "bash -s" ]; then\n'
            '  args[$last]="PATH={login}:\\$PATH exec bash -s"\n'
            "fi\n"
            'exec {real} "${{args[@]}}"\n',
            "ssh",
        )
        self._wrapper(self.local_bin / "rsync", 'printf "%s\\n" "$*" >> {log}\nexec {real} "$@"\n', "rsync")
        self._wrapper(
            self.login_bin / "sbatch",
            'script="${{@: -1}}"; d="${{script%/*}}"; bench="${{d##*/}}"\n'
            'printf "%s\\n" "$bench" >> {log}\n'
            f'if [ -s {self.fail_list} ] && grep -qx -- "$bench" {self.fail_list}; then\n'
            '  echo "sbatch: error: refused by bench/run.py fail list: $bench" >&2; exit 1\nfi\n'
            'exec {real} "$@"\n',
            "sbatch",
        )
        for prog in ("squeue", "sacct", "scancel"):
            self._wrapper(self.login_bin / prog, 'printf "%s\\n" "$*" >> {log}\nexec {real} "$@"\n', prog)

    def _wrapper(self, path: Path, body: str, prog: str) -> None:
        real = shutil.which(prog, path="/usr/local/bin:/usr/bin:/bin")
        assert real, f"{prog} not found"
        text = body.format(log=shlex.quote(str(self.logs / f"{prog}.log")), real=real, login=self.login_bin)
        path.write_text(f"#!/bin/bash\n{text}")
        path.chmod(0o755)

    def env(self, cache: Path) -> dict[str, str]:
        env = dict(os.environ)
        env["PATH"] = f"{self.local_bin}:{env['PATH']}"
        env["XDG_CACHE_HOME"] = str(cache)  # the local index of bench runs stays out of the user's
        return env

    def reset(self) -> None:
        for log in self.logs.glob("*.log"):
            log.unlink()

    def lines(self, prog: str) -> list[str]:
        path = self.logs / f"{prog}.log"
        return path.read_text().splitlines() if path.exists() else []

    def counts(self) -> dict[str, int]:
        ssh = self.lines("ssh")
        return {
            "ssh_master": sum(1 for line in ssh if " -M " in f" {line} "),
            "ssh": len(ssh),
            "rsync": len(self.lines("rsync")),
            "sbatch": len(self.lines("sbatch")),
            "squeue": len(self.lines("squeue")),
            "sacct": len(self.lines("sacct")),
        }


# --- running and timing ----------------------------------------------------------------------------


@dataclass
class Run:
    wall: float
    maxrss_mb: float
    status: int
    stdout: str
    stderr: str
    counts: dict[str, int] = field(default_factory=dict)


GNU_TIME = "/usr/bin/time"


def timed(argv: list[str], env: dict[str, str], cwd: Path, counters: Counters) -> Run:
    """Wall time and peak RSS of one command, with the calls it made.

    The peak comes from GNU time, which forks the command from its own small process. The rusage
    of a child of this script would not do: Linux carries the parent's high-water RSS through fork
    and exec into the child's ru_maxrss, so every command measured late in a suite "used" the
    suite's own 90 MB.
    """
    counters.reset()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        with tempfile.NamedTemporaryFile("r") as rss:
            start = time.perf_counter()
            proc = subprocess.Popen(
                [GNU_TIME, "-q", "-f", "%M", "-o", rss.name, *argv], stdout=out, stderr=err, env=env, cwd=cwd
            )
            _, status, _usage = os.wait4(proc.pid, 0)
            wall = time.perf_counter() - start
            peak_kb = int(rss.read().split()[-1])
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return Run(
            wall,
            peak_kb / 1024,
            proc.returncode,
            out.read().decode(errors="replace"),
            err.read().decode(errors="replace"),
            counters.counts(),
        )


def check(run: Run, what: str, expect_status: int = 0) -> Run:
    if run.status != expect_status:
        tail = f"{run.stdout[-2000:]}\n{run.stderr[-2000:]}"
        raise SystemExit(f"{what}: exit {run.status} (expected {expect_status})\n{tail}")
    return run


class Bench:
    """One suite run: a scratch directory here, one run-directory tree on the cluster."""

    def __init__(self, runs: int, kind: str, source: Path | None = None, *, cold: bool = False) -> None:
        self.stamp = time.strftime("%Y%m%dT%H%M%S")
        self.root = Path(tempfile.mkdtemp(prefix=f"gymbuild-bench-{self.stamp}-"))
        self.remote = f"{REMOTE_BASE}/bench-{self.stamp}-{os.getpid()}"
        self.runs = runs
        self.kind = kind
        self.counters = Counters(self.root)
        self.env = self.counters.env(self.root / "cache")
        if source is not None:  # a checkout (e.g. a git worktree) imported before the installed package
            self.env["PYTHONPATH"] = str(source.resolve())
        self.exe = gymbuild_exe()
        compile_package(source)
        self.cold = cold
        self.caches = itertools.count()  # --cold: one fresh cache directory per run
        self.serial = 0
        self.results: list[dict] = []

    def fresh(self, label: str) -> Path:
        self.serial += 1
        return self.root / f"ws-{label}-{self.serial}"

    def gymbuild(self, verb: str, config: Path, workspace: Path, *extra: str) -> Run:
        """One gymbuild run. Normally the runs of a suite share one $XDG_CACHE_HOME, as a user's runs
        do: from the second run on, the config's validation and the compiled templates come from
        there. With --cold each run gets an empty one, so every run pays for both."""
        argv = [self.exe, verb, f"config={config}", f"workspace={workspace}", *extra]
        # A fresh workspace is a fresh user's: its own state home, so the claim a config's submission
        # leaves there (workspace.Workspace.claimed_elsewhere) does not refuse the next round's submit.
        env = {**self.env, "XDG_STATE_HOME": f"{workspace}-state"}
        if self.cold:
            env = {**env, "XDG_CACHE_HOME": str(self.root / f"cache-{next(self.caches)}")}
        return timed(argv, env, self.root, self.counters)

    def floor_submit(self, stage: Path, run_dir: str, benches: list[str]) -> tuple[Run, list[str]]:
        argv = [sys.executable, str(HERE / "floor.py"), "submit", HOST, str(stage), run_dir, *benches]
        run = check(timed(argv, self.env, self.root, self.counters), "floor submit")
        return run, run.stdout.split()

    def floor_status(self, job_ids: list[str]) -> Run:
        argv = [sys.executable, str(HERE / "floor.py"), "status", HOST, *job_ids]
        return check(timed(argv, self.env, self.root, self.counters), "floor status")

    def cancel(self, job_ids: list[str]) -> None:
        """Our own jobs only, by id, in one scancel (outside every timed run)."""
        if job_ids:
            subprocess.run(["ssh", HOST, f"scancel {' '.join(job_ids)}"], check=True, env=os.environ)

    @staticmethod
    def job_ids(workspace: Path) -> list[str]:
        ids = []
        for path in workspace.glob("*/outcomes/*.json"):
            job_id = json.loads(path.read_text()).get("job_id")
            if job_id:
                ids.append(job_id)
        return ids

    @staticmethod
    def stage_of(workspace: Path) -> Path:
        """The staged tree a run left: a submit's, or (render stages into the draft) a dry run's."""
        return next(p for pattern in ("*/stage", "*/draft/stage") for p in workspace.glob(pattern))

    def record(
        self, n: int, measure: str, runs: list[Run], floors: list[Run] | None = None, **extra: object
    ) -> dict:
        walls = [r.wall for r in runs]
        entry: dict = {
            "n": n,
            "measure": measure,
            "runs": len(runs),
            "median": statistics.median(walls),
            "min": min(walls),
            "max": max(walls),
            "maxrss_mb": max(r.maxrss_mb for r in runs),
            "counts": runs[-1].counts,
            "all_counts": [r.counts for r in runs],
            **extra,
        }
        if floors:
            fw = [r.wall for r in floors]
            entry.update(floor_median=statistics.median(fw), floor_min=min(fw), floor_max=max(fw))
            entry["ratio"] = entry["median"] / entry["floor_median"]
        self.results.append(entry)
        print(summary_line(entry), flush=True)
        return entry

    # --- the measures ---------------------------------------------------------------------------

    def config(self, n: int) -> Path:
        return write_config(self.root / f"bench{n}.yaml", n, f"{self.remote}/n{n}", self.kind)

    def render(self, n: int, config: Path) -> Path:
        """`render` in a fresh workspace, against the floor of writing and printing the same staged
        tree (bench/floor.py render): the disk's share, which on this machine varies several-fold
        from one hour to the next, shows there rather than as gymbuild's."""
        runs, floors = [], []
        last: Path | None = None
        for rep in range(self.runs):
            workspace = self.fresh(f"render{n}")
            floor_first = rep % 2 == 1 and last is not None
            if floor_first:
                floors.append(self.floor_render(last))
            runs.append(check(self.gymbuild("render", config, workspace), "render"))
            last = workspace
            if not floor_first:
                floors.append(self.floor_render(last))
        self.record(n, "render", runs, floors)
        assert last is not None
        return last

    def floor_render(self, workspace: Path) -> Run:
        dest = self.fresh("floor-render")
        argv = [sys.executable, str(HERE / "floor.py"), "render", str(self.stage_of(workspace)), str(dest)]
        return check(timed(argv, self.env, self.root, self.counters), "floor render")

    def submit_noop_status(self, n: int, config: Path, stage: Path, measures: set[str]) -> None:
        benches = [bench_name(i) for i in range(n)]
        submits, floors, noops, statuses, status_floors = [], [], [], [], []
        for rep in range(self.runs):
            workspace = self.fresh(f"submit{n}")
            floor_dir = f"{self.remote}/floor{n}-{rep}"
            # Alternate which goes first, so a load change within a pair hits both alike.
            if rep % 2 == 0:
                run = check(self.gymbuild("submit", config, workspace), "submit")
                floor, floor_ids = self.floor_submit(stage, floor_dir, benches)
            else:
                floor, floor_ids = self.floor_submit(stage, floor_dir, benches)
                run = check(self.gymbuild("submit", config, workspace), "submit")
            ids = self.job_ids(workspace)
            assert len(ids) == n == len(floor_ids), (len(ids), len(floor_ids))
            submits.append(run)
            floors.append(floor)
            try:
                if "noop" in measures:
                    noop = check(self.gymbuild("submit", config, workspace), "no-op submit")
                    assert "nothing to submit" in noop.stdout, noop.stdout
                    noops.append(noop)
                if "status" in measures:
                    if rep % 2 == 0:
                        status_run = self.gymbuild("status", config, workspace)
                        status_floor = self.floor_status(ids)
                    else:
                        status_floor = self.floor_status(ids)
                        status_run = self.gymbuild("status", config, workspace)
                    check(status_run, "status")
                    assert status_run.stdout.count("PENDING") >= n, status_run.stdout[-500:]
                    statuses.append(status_run)
                    status_floors.append(status_floor)
            finally:
                self.cancel(ids + floor_ids)
        if "submit" in measures:
            self.record(n, "submit", submits, floors)
        if "noop" in measures:
            self.record(n, "noop", noops, submits, vs="first submit")
        if "status" in measures:
            self.record(n, "status", statuses, status_floors)

    def partial(self, n: int, config: Path, stage: Path) -> None:
        failing = [bench_name(i) for i in range(0, n, max(n // PARTIAL_FAILURES, 1))][:PARTIAL_FAILURES]
        resubmits, floors = [], []
        for rep in range(self.runs):
            workspace = self.fresh(f"partial{n}")
            self.counters.fail_list.write_text("".join(f"{b}\n" for b in failing))
            try:
                first = check(self.gymbuild("submit", config, workspace), "partial first submit", 1)
            finally:
                self.counters.fail_list.write_text("")
            refused = all(f"failed {b}:" in first.stdout for b in failing)
            assert first.counts["sbatch"] == n and refused, first.stdout[-800:]
            floor_dir = f"{self.remote}/floorp{n}-{rep}"
            if rep % 2 == 0:
                run = check(self.gymbuild("submit", config, workspace), "partial re-submit")
                floor, floor_ids = self.floor_submit(stage, floor_dir, failing)
            else:
                floor, floor_ids = self.floor_submit(stage, floor_dir, failing)
                run = check(self.gymbuild("submit", config, workspace), "partial re-submit")
            self.cancel(self.job_ids(workspace) + floor_ids)
            resubmits.append(run)
            floors.append(floor)
        self.record(n, "partial", resubmits, floors, failed=len(failing))

    def cleanup(self) -> None:
        subprocess.run(["ssh", HOST, f"rm -rf {shlex.quote(self.remote)}"], check=False)
        shutil.rmtree(self.root, ignore_errors=True)


# --- reporting -------------------------------------------------------------------------------------


def summary_line(e: dict) -> str:
    c = e["counts"]
    calls = (
        f"ssh masters {c['ssh_master']}, rsync {c['rsync']}, sbatch {c['sbatch']}, "
        f"squeue {c['squeue']}, sacct {c['sacct']}"
    )
    ratio = f", floor {e['floor_median']:.3f} s, ratio {e['ratio']:.2f}" if "ratio" in e else ""
    return (
        f"N={e['n']:>5} {e['measure']:<8} median {e['median']:.3f} s [{e['min']:.3f}, {e['max']:.3f}]"
        f"{ratio}; peak {e['maxrss_mb']:.0f} MB; {calls}"
    )


def machine() -> dict[str, str]:
    meminfo = Path("/proc/meminfo").read_text().splitlines()
    mem_kb = next(int(line.split()[1]) for line in meminfo if line.startswith("MemTotal"))
    return {
        "date": time.strftime("%Y-%m-%d %H:%M %Z"),
        "uname": " ".join(platform.uname()),
        "cores": str(os.cpu_count()),
        "ram": f"{mem_kb / 1024 / 1024:.1f} GiB",
        "python": platform.python_version(),
        "load": " ".join(f"{x:.2f}" for x in os.getloadavg()),
    }


def markdown(results: list[dict], info: dict[str, str]) -> str:
    out = [
        f"Ran {info['date']} on `{info['uname']}`: {info['cores']} cores, {info['ram']} RAM, Python "
        f"{info['python']}; load average {info['load_before']} before, {info['load']} after; "
        f"caches {info.get('caches', 'shared across the runs')}.",
        "",
        "| N | measure | median (s) | spread min–max (s) | floor median (s) | ratio | peak RSS (MB) "
        "| calls (ssh master / rsync / sbatch / squeue / sacct) | target |",
        "| ---: | --- | ---: | --- | ---: | ---: | ---: | --- | --- |",
    ]
    for e in results:
        c = e["counts"]
        ratio = f"{e['ratio']:.2f}" if "ratio" in e else ""
        floor = f"{e['floor_median']:.3f}" if "floor_median" in e else ""
        out.append(
            f"| {e['n']} | {e['measure']} | {e['median']:.3f} | {e['min']:.3f}–{e['max']:.3f} | {floor} "
            f"| {ratio} | {e['maxrss_mb']:.0f} "
            f"| {c['ssh_master']} / {c['rsync']} / {c['sbatch']} / {c['squeue']} / {c['sacct']} "
            f"| {TARGETS[e['measure']]} |"
        )
    slopes = render_slopes(results)
    if slopes:
        out += [
            "",
            f"Render, marginal cost per benchmark (slope of the median between N): {', '.join(slopes)}.",
        ]
    return "\n".join(out) + "\n"


def render_slopes(results: list[dict]) -> list[str]:
    renders = sorted((e["n"], e["median"]) for e in results if e["measure"] == "render")
    return [
        f"{a}→{b}: {(tb - ta) / (b - a) * 1000:.2f} ms" for (a, ta), (b, tb) in itertools.pairwise(renders)
    ]


def wait_for_low_load(limit: float, patience: float) -> None:
    deadline = time.monotonic() + patience
    while os.getloadavg()[0] > limit and time.monotonic() < deadline:
        print(f"load {os.getloadavg()[0]:.2f} > {limit}: waiting", file=sys.stderr, flush=True)
        time.sleep(15)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("-n", type=int, nargs="+", default=[10, 100, 1000])
    parser.add_argument("--runs", type=int, default=3, help="runs per measure (median and min/max reported)")
    parser.add_argument("--only", default=",".join(MEASURES), help=f"a subset of {','.join(MEASURES)}")
    parser.add_argument("--kind", choices=("run", "command"), default="run", help="gym-run or command")
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument("--markdown", type=Path, help="write the table here")
    parser.add_argument("--max-load", type=float, default=1.5, help="first wait for a lower 1-min load")
    parser.add_argument("--patience", type=float, default=300)
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory and run dirs")
    parser.add_argument(
        "--source", type=Path, help="measure the gymbuild in this checkout (a git worktree of a commit)"
    )
    parser.add_argument(
        "--cold", action="store_true", help="an empty $XDG_CACHE_HOME for every gymbuild run (no caches)"
    )
    args = parser.parse_args()
    measures = set(args.only.split(","))
    wait_for_low_load(args.max_load, args.patience)
    info = {"load_before": " ".join(f"{x:.2f}" for x in os.getloadavg())}
    bench = Bench(args.runs, args.kind, args.source, cold=args.cold)
    source = f" from {args.source}" if args.source else ""
    info["caches"] = "cold (an empty $XDG_CACHE_HOME per run)" if args.cold else "shared across the runs"
    print(f"scratch {bench.root}, run dirs {bench.remote}, gymbuild {bench.exe}{source}", flush=True)
    try:
        for n in args.n:
            config = bench.config(n)
            if "render" in measures:
                stage_ws = bench.render(n, config)
            else:
                stage_ws = bench.fresh(f"render{n}")
                check(bench.gymbuild("render", config, stage_ws), "render")
            stage = bench.stage_of(stage_ws)
            if measures & {"submit", "noop", "status"}:
                bench.submit_noop_status(n, config, stage, measures)
            if "partial" in measures:
                bench.partial(n, config, stage)
    finally:
        if not args.keep:
            bench.cleanup()
    info.update(machine())
    text = markdown(bench.results, info)
    print(text)
    if args.json:
        args.json.write_text(json.dumps({"machine": info, "results": bench.results}, indent=2) + "\n")
    if args.markdown:
        args.markdown.write_text(text)


if __name__ == "__main__":
    main()
