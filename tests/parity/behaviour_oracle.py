"""The oracle's half of the behaviour suite, run by NeMo Gym 0.7.0's own interpreter (never imported
by gymbuild or by pytest's Python).

One process does the whole suite's asking, reading one JSON request on stdin:
- {"scripts": [{"id", "config", "run_dir"}...]}: for each config, what `gym eval submit --dry-run`
  prints, by the same code path: compose with Hydra, resolve, drop scratch keys, validate with
  SubmitConfig, check otel as the executor does, then build_sbatch_script and render_collector_config
  per benchmark, for the run dir given (so both tools' scripts name the same paths);
- {"overrides": [[token...]...]}: each list of `gym eval` overrides as Hydra's override parser reads
  them: key, kind (+, ++ or plain) and the value with its type.
The answer is one JSON document on stdout; {"stream_scripts": [...]} answers as "scripts" does, one
JSON line per config as soon as it is composed ({"id", "benches"} or {"id", "error"}).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any


def scripts(cases: list[dict[str, str]], stream: bool = False) -> dict[str, Any]:
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from nemo_gym.orchestration.api import SubmitConfig
    from nemo_gym.orchestration.executors.otel import (
        otel_active,
        render_collector_config,
        resolve_token,
        validate_destination,
        validate_gym_telemetry,
    )
    from nemo_gym.orchestration.executors.slurm import _validate_benchmark_names
    from nemo_gym.orchestration.executors.slurm_script import build_sbatch_script
    from omegaconf import OmegaConf

    out: dict[str, Any] = {}
    for case in cases:
        path = Path(case["config"]).resolve()
        try:
            GlobalHydra.instance().clear()
            with initialize_config_dir(config_dir=str(path.parent), version_base=None):
                composed = compose(config_name=path.stem, overrides=[])
            resolved = OmegaConf.to_container(composed, resolve=True)
            config = SubmitConfig.model_validate({k: v for k, v in resolved.items() if not k.startswith("_")})
            _validate_benchmark_names(list(config.driver.benchmarks))
            if otel_active(config):
                validate_destination(config)
                validate_gym_telemetry(config)
                resolve_token(config)
            compute = next(iter(config.compute.values()))
            benches = {}
            for name, bench in config.driver.benchmarks.items():
                bench_dir = Path(case["run_dir"]) / name
                files = {"job.sh": build_sbatch_script(config, name, bench, compute, bench_dir)}
                if otel_active(config):
                    files["otel/collector.yaml"] = render_collector_config(config, name, bench_dir)
                benches[name] = files
            out[case["id"]] = {"benches": benches}
        except Exception as err:  # a refusal: the answer is NeMo Gym's message
            out[case["id"]] = {"error": f"{type(err).__name__}: {err}"}
        if stream:  # each case's answer as soon as it is known, one JSON line: its runs can start
            print(json.dumps({"id": case["id"], **out.pop(case["id"])}), flush=True)
    return out


def typed(value: Any) -> Any:
    """A parsed override value with its type kept: JSON alone would merge 1, 1.0, True and "1"."""
    if isinstance(value, dict):
        return {"dict": {str(k): typed(v) for k, v in value.items()}}
    if isinstance(value, list):
        return {"list": [typed(v) for v in value]}
    if value is None or isinstance(value, bool | int | float | str):
        return {type(value).__name__: value if not isinstance(value, float) else repr(value)}
    return {type(value).__name__: str(value)}  # a sweep or an interval: its text names its parts


def overrides(lists: list[list[str]]) -> list[Any]:
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parser = OverridesParser.create()
    out: list[Any] = []
    for tokens in lists:
        try:
            parsed = parser.parse_overrides(tokens)
        except Exception as err:
            out.append({"error": f"{type(err).__name__}: {err}"})
            continue
        out.append(
            [
                {
                    "key": o.key_or_group,
                    "kind": o.type.name,
                    "value": typed(o.value()) if o.value_type else None,
                }
                for o in parsed
            ]
        )
    return out


def main() -> None:
    request = json.load(sys.stdin)
    os.environ.update(request.get("environ", {}))
    answer: dict[str, Any] = {}
    if "stream_scripts" in request:
        scripts(request["stream_scripts"], stream=True)
        return
    if "scripts" in request:
        answer["scripts"] = scripts(request["scripts"])
    if "overrides" in request:
        answer["overrides"] = overrides(request["overrides"])
    json.dump(answer, sys.stdout)


if __name__ == "__main__":
    main()
