"""The status script's reading of a resume chain file (`.gym_job_chain`), in real bash: it hands squeue
and sacct the file's ids only when every word is a Slurm job id (a number, or an array task's
`<id>_<index>`), as state/ids.py's `is_slurm_job_id` says; anything else would make both tools refuse
the whole list, and every benchmark of the run would show UNKNOWN."""

from __future__ import annotations

import subprocess

from hypothesis import given, settings
from hypothesis import strategies as st

from gymbuild.executors.slurm import CHAIN_IDS, CHAIN_IDS_RE
from gymbuild.state.ids import is_slurm_job_id

# Every file's contents, NUL-separated on stdin; a line per file: the ids it added ("-" for none).
_SCRIPT = f"""{CHAIN_IDS_RE}
while IFS= read -r -d '' c; do
  ids=; {CHAIN_IDS}; printf '%s\\n' "${{ids:--}}"
done
"""


def _added(contents: list[str]) -> list[str]:
    done = subprocess.run(
        ["bash", "-c", _SCRIPT],
        input="".join(f"{c}\0" for c in contents),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout.splitlines()


_WORD = st.from_regex(r"[0-9]{1,6}(_[0-9]{1,4})?", fullmatch=True)
_JUNK = st.text(alphabet="0123456789_ \n*-x.[]%", max_size=12)
_CHAIN = st.lists(_WORD, max_size=4).map(lambda ws: "".join(f"{w}\n" for w in ws))


@settings(max_examples=40, deadline=None)
@given(st.lists(_CHAIN | _JUNK | st.builds(lambda a, b: a + b, _CHAIN, _JUNK), min_size=1, max_size=25))
def test_a_chain_adds_its_ids_only_when_every_word_is_a_slurm_job_id(contents: list[str]) -> None:
    added = _added(contents)
    for content, got in zip(contents, added, strict=True):
        words = content.split()
        if all(is_slurm_job_id(w) for w in words):
            assert [w for w in got.split(",") if w] == words, (content, got)
        else:
            assert got == "-", (content, got)


def test_an_array_task_then_its_own_number_then_a_plain_successor_are_all_added() -> None:
    assert _added(["12_3\n15\n16\n", "12_\n", "*\n", "12_3_4\n"]) == [",12_3,15,16,", "-", "-", "-"]
