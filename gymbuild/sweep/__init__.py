"""One config, many submissions: a sweep over checkpoints or values, and what it becomes.

- `expand`: the sweep's cells from the overrides (Hydra's multirun syntax, globs on the target)
- `record`: the sweep's record: its id, its cells and the submission each became
- `batch`: the cells submitted (or rendered, resolved) as one batch, over one connection
- `day_two`: status, cancel, resubmit, logs and results over every cell, with one look for all
- `follow`: new checkpoints found and submitted as they appear (`submit follow=1`)
- `series`: the scores of a sweep as a curve
- `report`, `export`: the curve as an HTML report, and to a tracker (MLflow, W&B)
- `gated`: every checkpoint gated against a baseline (`baseline=` with `max_drop=` or `policy=`), for
  the series, the report and the export
"""
