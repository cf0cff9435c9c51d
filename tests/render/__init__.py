"""Tests of gymbuild/render/: the rendered job scripts, their goldens, and real runs of them."""
