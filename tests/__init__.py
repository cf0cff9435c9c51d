"""gymbuild's tests, in folders that mirror the package's: tests/config/ tests gymbuild/config/.

The files at this level test the package root's modules and the checkout (docs, dodo.py, the
layers); reliability/, e2e/ and parity/ cut across. Helper modules stay at this level and are
imported by name from any folder (pyproject's pytest `pythonpath`).
"""
