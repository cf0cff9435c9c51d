"""Day two: find a submission again, say what became of its jobs, and act on them.

- `find`: a submission found again (the workspace, the local index `run=<id>`, the run's manifest)
- `status`: what became of its jobs, as a table or JSON; `watch` redraws it (`status watch=1`)
- `logs`: a benchmark's driver log, shown or followed
- `act`: `cancel`, `resubmit`, and `requeue` (shared with sweeps and `submit follow=1`)
- `replan`: resubmit's plan (what it would queue and why, from gym's row files), pure
- `runs`: the local index listed and pruned

The states of many jobs come from executors/states.py (one squeue and one sacct a call). It sits
on `submit/` (a resubmit is a submit of some benchmarks) and below `results/`.
"""
