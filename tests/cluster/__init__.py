"""The test Slurm cluster (README.md, up, down) and the test proving it is what e2e tests need."""
