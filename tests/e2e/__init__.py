"""Cross-cutting: whole submits on the test cluster, and jobs whose driver is NeMo Gym 0.7.0's own."""
