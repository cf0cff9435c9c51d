"""`python -m gymbuild.cli VERB ...`, the same as the `gymbuild` command."""

import sys

from gymbuild.cli.main import main

sys.exit(main())
