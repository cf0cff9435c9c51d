"""Run by the oracle's interpreter (never imported by pytest): NeMo Gym 0.7.0's verdict on configs.

Reads a JSON request on stdin and writes one JSON answer on stdout, so a whole corpus costs one
process (NeMo Gym's imports take most of a second):

- {"files": [path, ...]}: each file as `gym eval submit -c FILE --dry-run` reads it, through the
  CLI's own function: what `--resolve-only` does (Hydra composition, OmegaConf interpolation,
  SubmitConfig), then the executor's checks and the rendering of every batch script. Per file:
  {"resolve": verdict, "dry_run": verdict, or null when resolving failed}, a verdict being
  {"ok", "error", "traceback"} (traceback: the real CLI would print one).
- {"trees": [{"tree": {...}, "path": [...]}, ...]}: each tree through SubmitConfig.model_validate
  and, when valid, the dry run's checks and rendering (`submit(config, dry_run=True)`); per tree
  {"ok", "error", "value"} where value is the validated model's dump at `path`.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
import traceback
import warnings


def _verdict(call) -> dict:
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            call()
    except SystemExit as exc:  # the CLI's clean exit on a ConfigError
        return {"ok": exc.code in (0, None), "error": out.getvalue().strip(), "traceback": False}
    except Exception as exc:  # what the real CLI would print as a traceback
        last = traceback.format_exception_only(type(exc), exc)[-1].strip()
        return {"ok": False, "error": last, "traceback": True}
    return {"ok": True, "error": "", "traceback": False}


def files(paths: list[str]) -> list[dict]:
    """Each file through the CLI's own `_eval_submit` with `--dry-run`, once. The executor's entry
    point is wrapped to note that loading and validation (all `--resolve-only` does) had passed."""
    from nemo_gym.cli import main
    from nemo_gym.orchestration import submit as submit_module

    real_submit = submit_module.submit
    answers = []
    for path in paths:
        reached: list[bool] = []

        def noting_submit(*args, _reached=reached, **kwargs):
            _reached.append(True)
            return real_submit(*args, **kwargs)

        submit_module.submit = noting_submit
        args = argparse.Namespace(config=path, json=False, resolve_only=False, dry_run=True)
        verdict = _verdict(lambda args=args: main._eval_submit(args, []))
        submit_module.submit = real_submit
        if reached:
            resolve = {"ok": True, "error": "", "traceback": False}
            answers.append({"file": path, "resolve": resolve, "dry_run": verdict})
        else:
            answers.append({"file": path, "resolve": verdict, "dry_run": None})
    return answers


def _at(dump, path):
    for part in path:
        if isinstance(dump, dict) and part in dump:
            dump = dump[part]
        else:
            return None
    return dump


def trees(requests: list[dict]) -> list[dict]:
    from nemo_gym.orchestration.api import SubmitConfig
    from nemo_gym.orchestration.submit import submit
    from pydantic import ValidationError

    answers = []
    for request in requests:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                model = SubmitConfig.model_validate(request["tree"])
        except (ValidationError, ValueError) as exc:
            answers.append({"ok": False, "error": str(exc).splitlines()[0:3], "value": None})
            continue
        except Exception as exc:  # e.g. StopIteration from an empty `compute`: a traceback in the CLI
            answers.append({"ok": False, "error": [f"{type(exc).__name__}: {exc}"], "value": None})
            continue
        value = _at(model.model_dump(mode="json"), request["path"])
        dry_run = _verdict(lambda model=model: submit(model, dry_run=True))
        answers.append({"ok": dry_run["ok"], "error": dry_run["error"], "value": value})
    return answers


if __name__ == "__main__":
    request = json.load(sys.stdin)
    answer = files(request["files"]) if "files" in request else trees(request["trees"])
    json.dump(answer, sys.stdout)
