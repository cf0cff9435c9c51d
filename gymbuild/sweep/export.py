"""`gymbuild export to=mlflow|wandb`: a sweep's series (series.py) where the team already looks.

One tracker run per checkpoint's submission (its gym_job_id): each benchmark's numeric metrics,
`<benchmark>/<metric>` (`<benchmark>/<agent>/<metric>` when a benchmark has several agents), logged
at the training step as the step, and the run tagged with gym_job_id, model, checkpoint (the swept
value), config_digest (of the resolved config the run was submitted with), the sweep's id and its
label. The same tracker charts every checkpoint's run against the step, grouped by the sweep tag.

Re-exporting is safe: the run of a gym_job_id is found again by its tag, and a point already
logged at its step is not logged twice, so a follower's cron line may export after every poll.

The tracker's library is an optional extra (`pip install 'gymbuild[mlflow]'` or `[wandb]`),
imported here only: submitting never needs it. Where it logs and its credentials are the library's
own environment (MLFLOW_TRACKING_URI and MLFLOW_TRACKING_TOKEN; WANDB_API_KEY, WANDB_ENTITY,
WANDB_MODE, WANDB_DIR), so a token stays in the user's environment: it is never printed (a URI is
shown without its user info) and nothing is written to the run directory.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from gymbuild.errors import UserError, printable
from gymbuild.request.verb_args import ExportArgs
from gymbuild.state.records import RESOLVED_CONFIG_NAME
from gymbuild.state.workspace import digest
from gymbuild.sweep import day_two as sweep_day_two
from gymbuild.sweep.batch import cell_session
from gymbuild.sweep.record import cells_of
from gymbuild.sweep.series import Point

if TYPE_CHECKING:
    from gymbuild.results.choose import Choice
    from gymbuild.submit.session import Session
    from gymbuild.sweep.expand import Cell

TRACKERS = {"mlflow": "mlflow", "wandb": "wandb"}  # to= -> the extra that installs its library


@dataclass(frozen=True)
class Checkpoint:
    """What one tracker run holds: a combination's identity, tags and numeric points."""

    gym_job_id: str
    label: str
    step: int | None
    tags: dict[str, str]
    metrics: dict[str, float]  # key -> value, at `step`


def metric_key(row: Point, agents: int) -> str:
    """A key every tracker accepts (letters, digits, `_-./ `): the benchmark, the agent when the
    benchmark has several, the metric."""
    parts = [row.benchmark, *([row.agent] if row.agent and agents > 1 else []), row.metric or ""]
    return "/".join(re.sub(r"[^\w\-. ]", "_", p) for p in parts)


def checkpoints(
    ident: str, rows: Sequence[Point], digests: dict[str, str], choice: Choice | None = None
) -> list[Checkpoint]:
    """The rows grouped by submission, numeric values only (a metric shown as text has no curve);
    with a gate, each checkpoint's tags say its outcome, whether it is non-inferior and chosen."""
    agents: dict[str, set[str | None]] = {}
    for r in rows:
        agents.setdefault(r.benchmark, set()).add(r.agent)
    out: dict[str, Checkpoint] = {}
    for r in rows:
        if r.gym_job_id not in out:
            tags = {
                "gym_job_id": r.gym_job_id,
                "model": r.model or "",
                "checkpoint": " ".join(r.swept.values()),
                "config_digest": digests.get(r.gym_job_id, ""),
                "gymbuild.sweep_id": ident,
                "gymbuild.label": r.label,
                **gate_tags(choice, r.gym_job_id),
            }
            out[r.gym_job_id] = Checkpoint(r.gym_job_id, r.label, r.step, tags, {})
        if r.metric is not None and isinstance(r.value, int | float) and not isinstance(r.value, bool):
            out[r.gym_job_id].metrics[metric_key(r, len(agents[r.benchmark]))] = float(r.value)
    return list(out.values())


def gate_tags(choice: Choice | None, gym_job_id: str) -> dict[str, str]:
    """`gate.outcome` (PASS, DROP, INCONCLUSIVE, BASELINE), `gate.non_inferior`, `gate.chosen` (true
    or false) and `gate.baseline` of a checkpoint, where a gate was asked for."""
    if choice is None:
        return {}
    judged = choice.of(gym_job_id)
    return {
        "gate.outcome": choice.mark(gym_job_id).rstrip("*"),
        "gate.non_inferior": str(bool(judged and judged.non_inferior)).lower(),
        "gate.chosen": str(bool(judged and judged.chosen)).lower(),
        "gate.baseline": choice.baseline_id,
    }


def _library(to: str) -> ModuleType:
    try:
        return importlib.import_module(to)
    except ImportError:
        raise UserError(
            f"error: to={to} needs the {to} library, which is not installed here\n"
            f"    fix: pip install 'gymbuild[{TRACKERS[to]}]' (submitting never needs it)"
        ) from None


def shown_uri(uri: str) -> str:
    """A tracking URI without its user info (`https://user:token@host` is `https://host`)."""
    return re.sub(r"//[^/@]*@", "//", uri)


def mlflow_uri() -> str:
    """MLFLOW_TRACKING_URI, required: without it MLflow would quietly make an mlflow.db in whatever
    directory export runs from, and the team would look for the runs elsewhere."""
    uri = os.environ.get("MLFLOW_TRACKING_URI", "")
    if not uri.strip():
        raise UserError(
            "error: to=mlflow logs to the tracking server MLFLOW_TRACKING_URI names, and it is not set\n"
            "    fix: export MLFLOW_TRACKING_URI=http://HOST:5000 (your server), or "
            "sqlite:////ABS/PATH/mlflow.db for a store of your own"
        )
    return uri


def refused_by_tracker(to: str, where: str, err: Exception) -> UserError:
    """The tracker's refusal as one message: its first sentence and the fix (MLflow's file store
    wants its opt-in; anything else is where, or with what, the environment points it)."""
    said = printable(str(err).strip().split("\n")[0].split(". ")[0].rstrip("."), lines=False)
    if "MLFLOW_ALLOW_FILE_STORE" in str(err):
        fix = (
            "export MLFLOW_ALLOW_FILE_STORE=true to keep that file store, or point MLFLOW_TRACKING_URI "
            "at a server or at sqlite:////ABS/PATH/mlflow.db"
        )
    elif to == "mlflow":
        fix = "check MLFLOW_TRACKING_URI (and MLFLOW_TRACKING_TOKEN, or your server's own credentials)"
    else:
        fix = "check WANDB_API_KEY and WANDB_ENTITY (or WANDB_MODE=offline to log to WANDB_DIR only)"
    return UserError(f"error: to={to}: {where} refused: {said}\n    fix: {fix}")


def to_mlflow(experiment: str, found: Sequence[Checkpoint]) -> tuple[int, int, int]:
    """Log to the MLflow tracking server of the environment: (runs created, runs found again,
    points logged). What the server refuses (a file store without its opt-in, a wrong URI, a bad
    token) is one message, never MLflow's traceback."""
    _library("mlflow")
    from mlflow.exceptions import MlflowException

    uri = mlflow_uri()
    try:
        return _log_mlflow(experiment, found)
    except MlflowException as err:
        raise refused_by_tracker(
            "mlflow", f"MLflow at {printable(shown_uri(uri), lines=False)}", err
        ) from None


def _log_mlflow(experiment: str, found: Sequence[Checkpoint]) -> tuple[int, int, int]:
    from mlflow.entities import Metric
    from mlflow.tracking import MlflowClient

    client = MlflowClient()
    known = client.get_experiment_by_name(experiment)
    exp_id = known.experiment_id if known else client.create_experiment(experiment)
    created = again = logged = 0
    for ckpt in found:
        runs = client.search_runs(
            [exp_id], filter_string=f"tags.gym_job_id = '{ckpt.gym_job_id}'", max_results=1
        )
        if runs:
            run_id, again = runs[0].info.run_id, again + 1
        else:
            run_id = client.create_run(exp_id, run_name=ckpt.label, tags=ckpt.tags).info.run_id
            created += 1
        step = ckpt.step or 0
        now = int(time.time() * 1000)
        points = [
            Metric(key, value, now, step)
            for key, value in ckpt.metrics.items()
            if step not in {m.step for m in client.get_metric_history(run_id, key)}
        ]
        for key, value in ckpt.tags.items():
            client.set_tag(run_id, key, value)
        if points:
            client.log_batch(run_id, metrics=points)
            logged += len(points)
        if not runs:
            client.set_terminated(run_id)
    return created, again, logged


def wandb_run_id(gym_job_id: str) -> str:
    """The W&B run id of a submission: its gym_job_id in the characters W&B allows, so the same
    checkpoint is always the same run."""
    return re.sub(r"[^a-z0-9_-]", "-", gym_job_id.lower())[:64]


def to_wandb(project: str, found: Sequence[Checkpoint]) -> tuple[int, int, int]:
    """Log to W&B (its own environment: WANDB_API_KEY, WANDB_ENTITY, WANDB_MODE, WANDB_DIR): a run
    per checkpoint with a fixed id. A run already there is left alone: offline, its directory
    under WANDB_DIR; online, the run on the server with its step logged."""
    wandb = _library("wandb")
    try:
        return _log_wandb(wandb, project, found)
    except wandb.errors.Error as err:
        mode = os.environ.get("WANDB_MODE") or "online"
        raise refused_by_tracker("wandb", f"W&B ({printable(mode, lines=False)})", err) from None


def _log_wandb(wandb: ModuleType, project: str, found: Sequence[Checkpoint]) -> tuple[int, int, int]:
    offline = os.environ.get("WANDB_MODE", "").lower() in ("offline", "dryrun")
    runs_dir = Path(os.environ.get("WANDB_DIR") or ".") / "wandb"
    created = again = logged = 0
    for ckpt in found:
        run_id = wandb_run_id(ckpt.gym_job_id)
        if offline and any(runs_dir.glob(f"offline-run-*-{run_id}")):
            again += 1
            continue
        if not offline and _wandb_has(wandb, project, run_id, ckpt.step or 0):
            again += 1
            continue
        settings = wandb.Settings(console="off", x_disable_stats=True, silent=True)
        run = wandb.init(
            project=project,
            id=run_id,
            name=ckpt.label,
            config=ckpt.tags,
            tags=[ckpt.tags["gymbuild.sweep_id"]],
            resume="allow",
            reinit="create_new",
            settings=settings,
        )
        try:
            if ckpt.metrics:
                run.log(dict(ckpt.metrics), step=ckpt.step or 0)
                logged += len(ckpt.metrics)
            run.summary.update({k: v for k, v in ckpt.tags.items() if k.startswith("gate.")})
        finally:
            run.finish()
        created += 1
    return created, again, logged


def _wandb_has(wandb: ModuleType, project: str, run_id: str, step: int) -> bool:
    """Whether the W&B server has the run with a point at `step` (a run it does not know: no)."""
    try:
        api = wandb.Api()
        run = api.run(f"{api.default_entity}/{project}/{run_id}")
    except Exception:  # wandb's CommError and ValueError both mean "no such run" here
        return False
    return any(row.get("_step") == step for row in run.scan_history(keys=["_step"]))


def export(s: Session, args: ExportArgs) -> None:
    """The verb: the sweep's series, read as `results series=1` reads it, sent to the tracker."""
    to = args.to or ""
    if to not in TRACKERS:
        raise UserError(
            f"error: to={to or '(none)'} is not a tracker gymbuild exports to\n"
            f"    fix: to={' or to='.join(TRACKERS)}"
        )
    if not args.is_sweep:
        raise UserError(
            "error: export sends a sweep's series (a run per checkpoint, its step as the step)\n"
            "    fix: add multirun=1 (the config's latest sweep) or sweep=ID"
        )
    _library(to)  # before any round trip: a missing extra, or where to log, is said at once
    if to == "mlflow":
        mlflow_uri()
    record, rows, choice = sweep_day_two.gated_series(s, args)
    digests = _digests(s, cells_of(record))
    experiment = args.experiment or f"gymbuild-{args.config.stem}"
    found = checkpoints(record["sweep_id"], rows, digests, choice)
    if to == "mlflow":
        created, again, logged = to_mlflow(experiment, found)
        where = f"MLflow at {printable(shown_uri(mlflow_uri()), lines=False)}, experiment"
    else:
        mode = os.environ.get("WANDB_MODE") or "online"
        created, again, logged = to_wandb(experiment, found)
        where = f"W&B ({mode}), project"
    said = (
        f"exported sweep {record['sweep_id']} to {where} {experiment}: "
        f"{created} run(s) created, {again} found again, {logged} point(s) logged"
    )
    if args.json:  # one JSON document on stdout, as every verb's json=1
        doc = {
            "sweep_id": record["sweep_id"],
            "to": to,
            "experiment": experiment,
            "created": created,
            "found_again": again,
            "logged": logged,
            "message": said,
        }
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    else:
        print(said)
    if not logged and not created:
        print("(nothing new: every point was there already)", file=sys.stderr)


def _digests(s: Session, cells: Sequence[Cell]) -> dict[str, str]:
    """gym_job_id -> digest of the resolved config each combination was submitted with (its staged
    copy in the workspace: nothing remote is read)."""
    out = {}
    for cell in cells:
        cs = cell_session(s, cell)
        try:
            current = cs.workspace.submission()
            text = (cs.workspace.stage / RESOLVED_CONFIG_NAME).read_text()
        except OSError:
            continue
        finally:
            cs.close()
        if current is not None:
            out[current.gym_job_id] = digest(text)[:16]
    return out
