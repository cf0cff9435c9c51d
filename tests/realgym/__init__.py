"""The offline stage for e2e jobs whose driver is the real `gym eval run` (README.md beside this)."""
