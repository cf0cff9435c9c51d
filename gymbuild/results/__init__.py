"""What came back: a submission's metrics read from its run directory, tabled and compared.

- `read`: the artifacts of each benchmark (metrics, rollouts) read over the connection
- `table`: the rows and their text and JSON forms
- `compare`, `compare_read`, `compare_cover`, `compare_text`: two runs paired by task, read, checked
  for what was not compared in full, and printed
- `gate`: the verdict per benchmark of `max_drop=` (PASS, DROP, INCONCLUSIVE), for a policy to build on
- `stats`: the task-clustered statistics (intervals, tests, detectable effect; numpy and scipy)

It reads job states from `day_two/`; sweeps above it tabulate many runs.
"""
