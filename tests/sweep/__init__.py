"""Tests of gymbuild/sweep/: sweeps, their names, following, series, report and export."""
