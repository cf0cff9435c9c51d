"""Tests of gymbuild/executors/: the SSH connection, the local and Slurm executors, states, attempts."""
