"""gate_text.py, pure: whatever a run or a policy file names, the markdown keeps one row per verdict
with its columns, and no output carries a control character to the terminal or the CI log."""

from __future__ import annotations

from dataclasses import replace

from compare_helpers import agent_diff, comparison_of
from hypothesis import given
from hypothesis import strategies as st

from gymbuild.results import gate_text, policy

odd = st.text(st.sampled_from("ab|`*_\x1b\n\r\u202e-/ "), min_size=1, max_size=10)


@given(odd, odd)
def test_a_name_with_pipes_or_controls_never_adds_a_column_nor_reaches_the_terminal(
    metric: str, source: str
) -> None:
    a = agent_diff("quiz", 0.6, -0.2, 0.01, metric=f"mean/{metric}")
    c = comparison_of(a, replace(agent_diff("math", 0.5, 0.0, 0.01), agent="x"))
    d = policy.decide(c, replace(policy.Policy.of_max_drop(0.02), source=source))
    md = gate_text.markdown(c, d)
    rows = [line for line in md.splitlines() if line.startswith("| ")]
    assert len(rows) == 3  # the head and a row per verdict
    for row in rows:
        cells = row.replace("\\|", "").strip("|").split("|")
        assert len(cells) == 8, row
    for out in (md, gate_text.compact(c, d), "\n".join(gate_text.table_lines(c, d))):
        assert not any(ch in out for ch in "\x1b\r\u202e")
    assert gate_text.compact(c, d).splitlines()[0].startswith("gate DROP (exit 1), policy ")
