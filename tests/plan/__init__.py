"""Tests of gymbuild/plan/: the pure planner (placement, overrides, canonical JSON)."""
