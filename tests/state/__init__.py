"""Tests of gymbuild/state/: the job record and the local index, config cache, rollout counts."""
