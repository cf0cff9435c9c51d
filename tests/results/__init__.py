"""Tests of gymbuild/results/: the score table and `compare`, against NeMo Gym 0.7.0's files."""
