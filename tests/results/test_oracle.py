"""The fixtures of `gymbuild results` are what NeMo Gym 0.7.0 writes: made again by its own
aggregation (tests/oracle/scripts/aggregate_metrics.py, in the oracle's venv), they still match the
copies in tests/data that the other results tests read, and gymbuild reads both alike."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from gymbuild.results import table as tables

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "data" / "nemo-gym-0.7.0-aggregate"
SCRIPT = ROOT / "tests" / "oracle" / "scripts" / "aggregate_metrics.py"


def _shape(path: Path) -> dict[str, dict[str, object]]:
    """Agent -> (entry keys, key metrics): what results reads, and the entry's own layout."""
    entries = json.loads(path.read_text())
    return {e["agent_ref"]["name"]: {"keys": sorted(e), "key_metrics": e["key_metrics"]} for e in entries}


def test_nemo_gym_makes_the_committed_aggregates_again(nemo_gym, tmp_path: Path) -> None:
    done = subprocess.run(
        [str(nemo_gym.python), str(SCRIPT), str(tmp_path)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    for bench in ("run-a/mcqa", "run-a/weather", "run-b/weather"):
        made = tmp_path / bench / "artifacts" / tables.AGGREGATE_FILE
        kept = FIXTURES / bench / "artifacts" / tables.AGGREGATE_FILE
        assert _shape(made) == _shape(kept), bench
        # The rows the aggregation read are the committed ones too.
        assert (tmp_path / bench / "artifacts" / "rollouts.jsonl").read_text() == (
            FIXTURES / bench / "artifacts" / "rollouts.jsonl"
        ).read_text()
        assert tables.parse_aggregate(made.read_text()) == tables.parse_aggregate(kept.read_text())
    weather = tables.parse_aggregate(
        (tmp_path / "run-a" / "weather" / "artifacts" / tables.AGGREGATE_FILE).read_text()
    )
    assert [a.agent for a in weather] == ["weather_agent_large", "weather_agent_small"]
