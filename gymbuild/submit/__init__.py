"""One submission: what `gymbuild submit` does, in the order it does it.

- `session`: the run's context (the invocation, the workspace, the connection), opened once per command
- `pipeline`: the steps in order, for one config or a batch of them
- `plans`: the planner's job plans for this run, packed into jobs
- `stage` -> `sync` -> `queue` -> `record`: the four steps; each takes the settled values it needs
- `show`: what a verb prints of a submission

Below it: render (scripts), executors (where jobs run), plan and state. Above it: day two, results,
sweeps and the command line, which call it and are never called by it.
"""
