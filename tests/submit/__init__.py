"""Tests of gymbuild/submit/: the queue step in this process and the staged scripts' digest."""
