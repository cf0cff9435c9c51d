"""doit's database survives a signal during its save (gymbuild/cli/doit_backend.py).

doit saves its json database at the end of a run by truncating the file and writing it again; a
submit interrupted there (the model test of the promises met it on the cluster) left an empty file,
and the next submit died on doit's DatabaseException. The signal is delivered for real, by an
interval timer, at moments spread over the save; after each, the file must hold a whole database.
"""

from __future__ import annotations

import json
import random
import signal
from pathlib import Path

from doit.dependency import JSONCodec

from gymbuild.cli.doit_backend import AtomicJsonDB


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def test_a_signal_at_any_moment_of_the_save_leaves_a_whole_database(tmp_path: Path) -> None:
    path = tmp_path / "doit-db.json"
    db = AtomicJsonDB(str(path), JSONCodec())
    for i in range(40_000):  # a save of a few megabytes: long enough for a timer to land inside it
        db.set(f"queue:bench-{i}", "result:", "x" * 40)
    db.dump()
    saved = json.loads(path.read_text())
    rng = random.Random(40)
    landed = 0
    before = signal.signal(signal.SIGALRM, _interrupt)
    try:
        for round_ in range(60):
            db.set("queue:bench-0", "result:", f"round {round_}")
            signal.setitimer(signal.ITIMER_REAL, rng.uniform(0.0005, 0.05))
            try:
                db.dump()
                signal.setitimer(signal.ITIMER_REAL, 0)
                saved = json.loads(path.read_text())
            except KeyboardInterrupt:
                landed += 1
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
            on_disk = json.loads(path.read_text())  # never empty, never half a file
            assert on_disk == saved or on_disk["queue:bench-0"]["result:"] == f"round {round_}"
            saved = on_disk
    finally:
        signal.signal(signal.SIGALRM, before)
    assert landed > 0, "no signal landed during a save: the test proved nothing"
    assert not list(tmp_path.glob(".*.tmp.*")), "an interrupted save left its temp file"
    reopened = AtomicJsonDB(str(path), JSONCodec())
    assert all(reopened.in_(f"queue:bench-{i}") for i in range(40_000))
