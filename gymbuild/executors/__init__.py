"""Executors: the only modules that run commands on the submit target (connection, slurm, local)."""
