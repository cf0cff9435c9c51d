"""`doit VERB` in the project root runs gymbuild's tasks (the `gymbuild` command runs the same ones)."""

from gymbuild.errors import UserError
from gymbuild.tasks import *  # noqa: F403
from gymbuild.tasks import doit_config

try:
    DOIT_CONFIG = doit_config()
except UserError as _err:  # the workspace is held by another run: its message and exit 1, no traceback
    raise SystemExit(str(_err)) from None
