"""A tiny service and benchmark for the local example (examples/local.yaml): standard library only,
so the README's first command shows a whole job (service start, health check, driver, stop) in a few
seconds on any machine with Python, no GPU, model or container needed."""
