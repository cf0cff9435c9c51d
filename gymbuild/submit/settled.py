"""What a run settles once and hands down to its steps as values.

The run context (session.py) opens things lazily: the config on first need, the submission when a
step first needs it, the connection when something is to be copied or queued. Once the pipeline's
steps run, what they act on is settled, so the session settles it in one place (Session.settle) and
the steps take it as arguments: `Settled` (the submission, its executor and plans, the workspace,
the run's one link) and the run's `Memory` (what the steps write down for the verb's report). A step
never asks the run context again.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from gymbuild.config.model import thaw
from gymbuild.progress import Progress
from gymbuild.state.workspace import digest

if TYPE_CHECKING:
    from gymbuild.config import Resolved
    from gymbuild.config.model import Config
    from gymbuild.executors.base import Executor
    from gymbuild.executors.connection import Connection
    from gymbuild.render import RenderedJob
    from gymbuild.state.workspace import Submission, Workspace
    from gymbuild.submit.link import Link
    from gymbuild.submit.plans import RunPlans


@dataclass
class Memory:
    """What the steps of a run write down as they go, for the verb's report and for each other."""

    progress: Progress  # "queued 350/1000", on a terminal only
    rendered: dict[str, RenderedJob] = field(default_factory=dict)  # job dir -> its files as staged
    queued_now: list[str] = field(default_factory=list)  # benchmarks whose outcome this run wrote
    queue_done: set[str] = field(default_factory=set)  # benchmarks this run has queued (or tried to)
    queue_total: int | None = None  # what the run's first queue pass set out to queue
    waiting: list[str] = field(default_factory=list)  # benchmarks this run wrote down as waiting for room
    lock: threading.Lock = field(default_factory=threading.Lock)  # outcomes are written on IO threads


@dataclass(frozen=True)
class Settled:
    """One run's settled values: made once (Session.settle), after its submission is settled (with
    new=1 that empties the workspace's outcomes and stamps, which no step may read before)."""

    submission: Submission
    executor: Executor
    plans: RunPlans
    workspace: Workspace
    link: Link  # the run's one connection, opened by the first step that copies or queues
    hostname: str | None  # where the link goes if it is not open yet: the config's compute host
    config_file: Path  # the config as the user named it (messages, the local index's notes)
    selected: tuple[str, ...]  # the benchmarks the run acts on, in config order
    sweep_values: tuple[str, ...]  # a sweep's combination: its swept key=values
    memory: Memory

    @property
    def resolved(self) -> Resolved:
        return self.plans.resolved

    @property
    def config(self) -> Config:
        return self.plans.resolved.config

    @cached_property
    def resolved_yaml(self) -> str:
        """The resolved config as YAML, host: values kept as references (once a run: the dump of
        1000 benchmarks takes a twentieth of a second)."""
        from gymbuild.config.output import dump_tree  # late: PyYAML (House rules)

        return dump_tree(self.resolved.tree)

    @cached_property
    def resolved_digest(self) -> str:
        """A digest of the resolved tree: what the staged resolved-config.yaml is stamped with (not
        its YAML text, whose dump for 1000 benchmarks is a tenth of a render)."""
        return digest(thaw(self.resolved.tree))

    def to_queue(self) -> list[str]:
        """The selected benchmarks with no job id in the submission (read from the workspace now)."""
        outcomes = self.workspace.outcomes()  # a sharded one is to queue while a shard has no job id
        units = self.plans.units
        return [
            b for b in self.selected if not all((o := outcomes.get(u)) and o.job_id for u in (b, *units(b)))
        ]

    def connection(self) -> Connection:
        """The run's one connection, opened now if it is not open yet (the pipeline asks once a pass)."""
        return self.link.get(self.hostname)
