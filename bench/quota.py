"""The cost of feeding waiting benchmarks (issue 43): round trips per poll of `submit watch=1`.

    python bench/quota.py                      # 1000 waiting behind MaxSubmitJobs=50
    python bench/quota.py --waiting 200 --limit 20 --polls 8

On the test cluster (`ssh gym-login`), in an account of its own (`gymquotabench<hex>`, MaxSubmitJobs
set on root's association in it, removed at the end): `gymbuild submit` of limit + waiting `command`
benchmarks, every job queued with `--begin=now+7days` (nothing runs: bench/genconfig.py), so `limit`
are queued and `waiting` wait for room. Then the polls of `submit watch=1` (day_two/feed.py's
Feeder.look, the same code) run in this process, and each poll's SSH round trips are counted on the
run's Connection (`round_trips`: one per command answered in the session). Between two polls the
bench cancels `--freed` of its own jobs, as if they had ended, so one poll feeds. Timing is printed
for information only; the figure that matters is round trips per poll.
"""

from __future__ import annotations

import argparse
import os
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from genconfig import make_config

HOST = "gym-login"
REMOTE_BASE = "/var/tmp/gymbuild-cluster"


def ssh(command: str) -> str:
    return subprocess.run(
        ["ssh", "-o", "BatchMode=yes", HOST, command], capture_output=True, text=True
    ).stdout


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--waiting", type=int, default=1000)
    parser.add_argument("--limit", type=int, default=50)
    parser.add_argument("--polls", type=int, default=7)
    parser.add_argument("--freed", type=int, default=10, help="jobs cancelled before the 3rd poll")
    parser.add_argument("--profile", help="write a cProfile of the feeding poll (the 3rd) to this file")
    args = parser.parse_args()

    scratch = Path(tempfile.mkdtemp(prefix="gymbuild-quota-bench-"))
    os.environ["XDG_STATE_HOME"] = str(scratch / "state")
    os.environ["XDG_CACHE_HOME"] = str(scratch / "cache")
    account = f"gymquotabench{secrets.token_hex(3)}"
    output = f"{REMOTE_BASE}/bench-quota-{account}"
    ssh(
        f"sacctmgr -i add account {account} >/dev/null && sacctmgr -i add user root account={account} "
        f">/dev/null && sacctmgr -i modify user where name=root account={account} set "
        f"MaxSubmitJobs={args.limit} >/dev/null"
    )
    try:
        config = make_config(args.limit + args.waiting, output, kind="command")
        config["compute"]["cluster"]["account"] = account
        path = scratch / "quota.yaml"
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        started = time.monotonic()
        first = subprocess.run(
            [str(Path(sys.executable).with_name("gymbuild")), "submit", f"config={path}"],
            capture_output=True,
            text=True,
        )
        print(f"submit: exit {first.returncode} in {time.monotonic() - started:.1f} s")
        print("  " + "\n  ".join(line for line in first.stdout.splitlines() if line.startswith("waiting")))
        measure(path, args, account)
    finally:
        ssh(
            f"scancel -A {account}; sleep 2; sacctmgr -i delete user root account={account} >/dev/null; "
            f"sacctmgr -i delete account {account} >/dev/null; rm -rf {output}"
        )


def measure(path: Path, args: argparse.Namespace, account: str) -> None:
    """Each poll of the Feeder: its round trips, what it fed, its wall time."""
    from gymbuild.day_two.feed import Feeder
    from gymbuild.request.invocation import Invocation
    from gymbuild.submit.session import Session

    ctx = Session(Invocation.from_argv(["submit", f"config={path}", "watch=1"]))
    ctx.hold_workspace()
    try:
        feeder = Feeder(ctx)
        print(f"{'poll':>4}  {'round trips':>11}  {'fed':>4}  {'waiting':>7}  {'seconds':>7}")
        for poll in range(1, args.polls + 1):
            if poll == 3:
                ours = [o.job_id for o in ctx.workspace.outcomes().values() if o.job_id][: args.freed]
                ssh(f"scancel {' '.join(ours)}")
                print(f"      (cancelled {len(ours)} of the queued jobs: room for {len(ours)})")
            conn = ctx.connection()
            before, fed_before, started = conn.round_trips, feeder.feeds, time.monotonic()
            if poll == 3 and args.profile:
                import cProfile

                profile = cProfile.Profile()
                rows = profile.runcall(feeder.look)
                profile.dump_stats(args.profile)
            else:
                rows = feeder.look()
            waiting = sum(1 for r in rows if r.job_id is None)
            trips = conn.round_trips - before
            fed = "yes" if feeder.feeds > fed_before else "no"
            print(f"{poll:>4}  {trips:>11}  {fed:>4}  {waiting:>7}  {time.monotonic() - started:>7.2f}")
    finally:
        ctx.close()
    print(f"account {account}: MaxSubmitJobs={args.limit}, {args.waiting} waiting at the start")


if __name__ == "__main__":
    main()
