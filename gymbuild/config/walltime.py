"""Slurm's time grammar (`--time`): the one definition the config rules check and the planner reads.

Forms: `MM`, `MM:SS`, `HH:MM:SS`, `D-HH`, `D-HH:MM`, `D-HH:MM:SS`. The first field without a day
count may have up to eight digits (`90` minutes, `100:00:00` hours: Slurm reads each field as a C
int, and a longer one is no time at all); every later field has one or two.
A job's `--time` may also be `UNLIMITED` or `INFINITE` (any case), which Slurm's parse_time.c
reads as no limit (the partition's own limit then applies); a chain's max_walltime may not, since
NeMo Gym refuses it there.
"""

from __future__ import annotations

import re

from gymbuild.errors import UserError

FORMS = "MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS"
_WALLTIME = re.compile(r"(?:(\d{1,8})-(\d{1,2})|(\d{1,8}))(?::(\d{1,2}))?(?::(\d{1,2}))?", re.ASCII)


_UNLIMITED = ("unlimited", "infinite")


def is_unlimited(text: str) -> bool:
    return text.lower() in _UNLIMITED


def is_walltime(text: str, *, unlimited: bool = False) -> bool:
    return _WALLTIME.fullmatch(text) is not None or (unlimited and is_unlimited(text))


def job_walltime_seconds(text: str) -> int | None:
    """A job's --time in seconds, or None for Slurm's no-limit words."""
    return None if is_unlimited(text) else walltime_seconds(text)


def walltime_seconds(text: str) -> int:
    """A Slurm time in seconds. The rules refuse a malformed one first, with the config path."""
    m = _WALLTIME.fullmatch(text)
    if not m:
        raise UserError(f"walltime {text!r} is not a Slurm time ({FORMS})")
    days, day_hours, first, b, c = m.groups()
    if days is not None:  # D-HH, D-HH:MM, D-HH:MM:SS
        mi, s = int(b or 0), int(c or 0)
        return int(days) * 86400 + int(day_hours) * 3600 + mi * 60 + s
    nums = [int(x) for x in (first, b, c) if x is not None]
    if len(nums) == 1:
        return nums[0] * 60
    if len(nums) == 2:
        return nums[0] * 60 + nums[1]
    return nums[0] * 3600 + nums[1] * 60 + nums[2]
