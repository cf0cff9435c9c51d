"""The resolved tree as text, in the one spelling that reads back in as the same config."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import yaml

from gymbuild.config.load import escape_interpolations
from gymbuild.config.model import thaw


def dump_tree(tree: Mapping[str, Any], *, as_json: bool = False) -> str:
    """YAML (interpolation markers escaped, so it resolves to itself) or JSON of a resolved tree."""
    plain = thaw(tree)
    if as_json:
        return json.dumps(plain, indent=2) + "\n"
    return yaml.safe_dump(escape_interpolations(plain), sort_keys=False, allow_unicode=True, width=1000)
