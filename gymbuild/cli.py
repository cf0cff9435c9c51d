"""The `gymbuild` console script: the project's doit tasks, runnable from any directory.

doit reads DOIT_CONFIG when it loads the tasks, so the workspace named on the command line is found
here first and the namespace handed to doit carries a DOIT_CONFIG made for it.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path


def _connect_ahead(args: Sequence[str]) -> None:
    """Start the SSH handshake before importing doit, so the two overlap, when the host is known:
    for status, logs and cancel of the config's current submission, the workspace says which; for
    the first submit of a config (or new=1), the config file does, if plainly (config.load.host_hint).
    A later submit may have nothing to queue, and a no-op must open nothing: it connects when needed.
    """
    from gymbuild.invocation import Invocation, command_variables, command_verbs

    verbs = set(command_verbs(args))
    day_two = bool(verbs) and verbs <= {"status", "logs", "cancel"}
    if not day_two and verbs != {"submit"}:
        return  # and nothing imported: the other verbs open their connection later, if at all
    from gymbuild.errors import UserError
    from gymbuild.executors.connection import connect_ahead
    from gymbuild.workspace import Workspace

    inv = Invocation.from_vars(command_variables(args))
    if inv.run:
        return
    try:
        submission = Workspace(inv.workspace, inv.config).submission()
    except UserError:  # a damaged workspace: the verb itself says so
        return
    if day_two and submission is not None:
        connect_ahead(submission.hostname)
    elif not day_two and (submission is None or inv.new):
        from gymbuild.config.load import host_hint

        connect_ahead(host_hint(inv.config, inv.overrides))


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    _connect_ahead(args)

    from doit.cmd_base import ModuleTaskLoader
    from doit.doit_cmd import DoitMain

    from gymbuild import tasks
    from gymbuild.errors import UserError
    from gymbuild.invocation import DEFAULT_WORKSPACE

    workspace = next(
        (Path(a.split("=", 1)[1]) for a in args if a.startswith("workspace=")), Path(DEFAULT_WORKSPACE)
    )
    namespace = dict(vars(tasks))
    try:
        namespace["DOIT_CONFIG"] = tasks.doit_config(workspace, args)
    except UserError as err:  # the workspace is held by another run: its message, not a traceback
        print(err, file=sys.stderr)
        return 1
    return DoitMain(ModuleTaskLoader(namespace), extra_config={"GLOBAL": {}}).run(args)


if __name__ == "__main__":
    sys.exit(main())
