"""Tests of gymbuild/config/: YAML to a validated Config, and every way a config is refused."""
