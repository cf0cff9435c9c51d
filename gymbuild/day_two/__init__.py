"""Day two: find a submission again, say what became of its jobs, and act on them.

- `states`: the states of many jobs from one squeue and one sacct, over the run's one connection
- `verbs`: status, logs, cancel and resubmit
- `watch`: `status watch=1`, the live table
- `runs`: the local index listed and pruned

It sits on `submit/` (a resubmit is a submit of some benchmarks) and below `results/`.
"""
