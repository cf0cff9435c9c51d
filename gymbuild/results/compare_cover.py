"""Whether a benchmark of `gymbuild compare` was compared in full, and if not why: one line per reason.

A gate that is green when nothing was compared would pass the worst regression of all, a run that
crashed; so every way a side can fall short (absent, its job not COMPLETED, no rollouts file, an empty
one, partial as a whole or for one agent, nothing paired, no metric to gate on) is named here, and
gate.py makes each such benchmark INCONCLUSIVE whatever its numbers say. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gymbuild.executors.states import is_unqueued_reason
from gymbuild.results.compare import ROLLOUTS_FILE, AgentDiff, Side


@dataclass(frozen=True)
class Found:
    """One run's side of a benchmark as it was found: whether the run has the benchmark at all, the
    end state of its job (None: not looked at), and its files (None: no rollouts file)."""

    has: bool
    state: str | None
    side: Side | None


COMPLETED = "COMPLETED"


def _side_shortfalls(benchmark: str, name: str, found: Found) -> list[str]:
    if not found.has:
        return [f"{benchmark}: the {name} run has no such benchmark"]
    out = []
    if found.state is not None and is_unqueued_reason(found.state):  # no job: status's words
        out.append(f"{benchmark}: the {name} has no job: {found.state}")
    elif found.state is not None and found.state != COMPLETED:
        out.append(f"{benchmark}: the {name}'s job is {found.state}, not COMPLETED")
    side = found.side
    if side is None:
        out.append(f"{benchmark}: no {ROLLOUTS_FILE} in the {name}")
    elif side.scored == 0:
        out.append(f"{benchmark}: the {name}'s {ROLLOUTS_FILE} is empty: no rollout")
    elif side.expected_by_agent:  # each agent's own count (shortfalls): here, those that wrote none
        for agent, count in side.expected_by_agent.items():
            if agent not in side.rollouts:
                out.append(f"{benchmark} ({agent}): the {name} is partial: 0/{count} rollouts scored")
    elif side.partial and any(side.expected_of(a) is None for a in side.rollouts):
        # Agents' own counts unknown (inputs that name no agent, several agents): the benchmark's.
        out.append(f"{benchmark}: the {name} is partial: {side.distinct}/{side.expected} rollouts scored")
    return out


def shortfalls(benchmark: str, base: Found, cand: Found, agents: Sequence[AgentDiff]) -> list[str]:
    """Why `benchmark` was not compared in full, one line each (none: it was): a side without it,
    whose job did not complete, with no rollouts file, an empty one or fewer rollouts than asked for;
    an agent partial, with no pair, or no metric to gate on. (An agent only one side has is
    diff_benchmark's.)"""
    out = _side_shortfalls(benchmark, "baseline", base) + _side_shortfalls(benchmark, "candidate", cand)
    for a in agents:
        out += [f"{benchmark} ({a.agent}): the {n}" for n in a.notes if " is partial: " in n]
        if a.pairs == 0:
            out.append(
                f"{benchmark} ({a.agent}): no rollout of one run has a partner (task, repeat) in the other"
            )
        elif a.primary is None:
            out.append(f"{benchmark} ({a.agent}): {a.primary_why}")
    return list(dict.fromkeys(out))


NOTHING = "nothing was compared: no benchmark has rollouts paired across the two runs"
