"""What this machine and the run directory remember: the state a submission leaves behind.

- `workspace`: the config's workspace (current submission, stamps, outcomes, the draft of a dry run)
- `records`: the record `gym-job.json` and the local index (NeMo Gym's `jobs.py`, what was submitted)
- `notes`: gymbuild's note beside an index entry, and the guard against a second live submission
- `ids`: the one check of a gym_job_id before it names a file; `provenance`: the id minted, when and by
  which gymbuild commit a submission was made
- `config_cache`: validated configs kept by content, so a day-two verb does not validate again
- `rollouts`: rollouts done and expected, counted from a benchmark's files
- `shards`: a sharded benchmark's shard ids, kept in its record entry's executor_metadata

It imports only the config and the ground below it: nothing here knows how a run is planned or sent.
"""
