"""Benchmarks of the offline real-driver e2e (tests/realgym/README.md): a root named by NEMO_GYM_EXTRA_ROOTS.

A regular package, so that `benchmarks.realgym_echo.prepare` (the import `gym eval prepare` makes of a
prepare_script) resolves here, in front of NeMo Gym's built-in `benchmarks` package.
"""
