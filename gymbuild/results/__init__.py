"""What came back: a submission's metrics read from its run directory, tabled and compared.

- `read`: the artifacts of each benchmark (metrics, rollouts) read over the connection
- `table`: the rows and their text and JSON forms
- `compare`, `compare_read`, `compare_cover`, `compare_text`: two runs paired by task, read, checked
  for what was not compared in full, and printed; `compare_rows`: what compare reads of a rollout
  line (here, and as the head of the reader program sent to the target)
- `gate`: the verdict per benchmark (PASS, DROP, INCONCLUSIVE); `policy`: a policy across benchmarks
  (tiers, margins, metrics) and the one overall verdict; `gate_text`: a gate printed (compact, markdown)
- `choose`: the best non-inferior checkpoint of a sweep, and how sure against the runner-up
- `stats`: the task-clustered statistics (intervals, tests, detectable effect; numpy and scipy)

It reads job states from `day_two/`; sweeps above it tabulate many runs.
"""
