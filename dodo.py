"""`doit VERB` in the project root runs gymbuild's tasks (the `gymbuild` command runs the same ones)."""

from gymbuild.tasks import *  # noqa: F403
from gymbuild.tasks import doit_config

DOIT_CONFIG = doit_config()
