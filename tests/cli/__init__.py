"""Tests of gymbuild/cli/: the command line, its contract, doit's graph and backend."""
