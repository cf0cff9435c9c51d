"""The face: the command line, the help, and doit's graph and plug-in.

- `main`: `gymbuild VERB ...` (entry point), the one place a user mistake becomes an exit status
- `argv`: NeMo Gym's flags (`-c`, `--dry-run`, `--json`) turned into gymbuild's words
- `graph`: the doit task graph of one invocation; `task_kinds` the shapes of its tasks
- `doit_plugin`: every verb as a doit command (`doit submit config=F`)
- `reporter`, `doit_backend`: doit's console reporter and its database saved through a rename

Everything else is below it; nothing imports from here.
"""
