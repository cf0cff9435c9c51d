"""One config, many submissions: a sweep over checkpoints or values, and what it becomes.

- `expand`: the sweep's cells from `sweep=` (Hydra's multirun syntax)
- `batch`: the cells as one batch of submissions and the day-two verbs over all of them
- `follow`: new checkpoints found and submitted as they appear
- `series`: the scores of a sweep as a curve
- `report`, `export`: the curve as an HTML report, and to a tracker (MLflow, W&B)
"""
