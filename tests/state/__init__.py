"""Tests of gymbuild/state/: the job record and the local index, and the config cache."""
