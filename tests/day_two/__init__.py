"""Tests of gymbuild/day_two/: status and the rollout counts it shows, logs, cancel, resubmit, runs, watch."""
