"""Executors: the only modules that run commands on the submit target.

- `connection`: the one SSH connection (or this machine's shell) every command goes through
- `base`: the `Executor` protocol; `slurm/` and `local/` implement it, each with its template parts
- `states`: the states of many jobs in one round trip; `chain`: a resume chain followed to its newest
  job; `shard_states`: a sharded benchmark's one state and rows from its shards' (pure)
- `attempts`: the queue's attempt log every executor starts jobs through
- `rundir`: the run directory (mounts, creation, the copy); `secrets`: the owner-only secrets file
"""
