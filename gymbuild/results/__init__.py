"""What came back: a submission's metrics read from its run directory, tabled and compared.

- `read`: the artifacts of each benchmark (metrics, rollouts) read over the connection
- `table`: the rows and their text and JSON forms
- `compare`, `compare_read`: two runs side by side, the gate (`max_drop=`) and its reading
- `stats`: the uncertainty of a score (confidence intervals, paired differences)

It reads job states from `day_two/`; sweeps above it tabulate many runs.
"""
