"""Tests of gymbuild/day_two/: status, logs, cancel, resubmit, runs and watch, under each executor."""
