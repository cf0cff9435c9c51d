"""One submission: what `gymbuild submit` does, in the order it does it.

- `session`: the run's context (the invocation, the workspace, the lock), opened once per command
- `settled`: what the run settles once and hands to the steps as values; `link`: its one connection
- `pipeline`: the steps in order (STEPS, which the doit graph follows), for one config or a batch
- `plans`: the planner's job plans for this run, packed into jobs
- `stage` -> `sync` -> `queue` -> `record`: the four steps; each takes the settled values it needs
- `quota`, `arrays`, `shards`: what fits the user's quota (the rest waits), jobs queued as arrays, and a
  sharded benchmark's shards queued as jobs and kept as one outcome
- `live`: the guard against queueing one evaluation twice from two workspaces
- `show`: what a verb prints of a submission

Below it: render (scripts), executors (where jobs run), plan and state. Above it: day two, results,
sweeps and the command line, which call it and are never called by it.
"""
