"""`doit VERB` in the project root runs gymbuild's tasks (the `gymbuild` command runs the same ones)."""

import sys

from gymbuild.errors import UserError
from gymbuild.tasks import namespace

try:
    globals().update(namespace(sys.argv[1:]))
except UserError as _err:  # the workspace is held by another run: its message and exit 1, no traceback
    raise SystemExit(str(_err)) from None
