"""The demo benchmark: send prompts to the echo service, check every answer, write a result file.

    python3 -m gymbuild.demo.echo_client --url http://localhost:8765 --out artifacts/result.json

Beside the result it writes `metrics.json` ({name: number}), the file a `command` benchmark reports
its score in: `gymbuild results` shows it. It exits 1 when the service is unreachable or an answer is
wrong, so the job fails as a benchmark that could not run would.
"""

from __future__ import annotations

import argparse
import json
import sys
import urllib.error
import urllib.request
from pathlib import Path

PROMPTS = ("What is 2 + 2?", "Name a prime number.", "Say hello.")


def ask(url: str, payload: object) -> object:
    request = urllib.request.Request(
        f"{url.rstrip('/')}/echo",
        data=json.dumps(payload).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.load(response)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True, help="the echo service, e.g. http://localhost:8765")
    parser.add_argument("--out", required=True, type=Path, help="where to write result.json")
    args = parser.parse_args(argv)
    results = []
    for prompt in PROMPTS:
        try:
            answer = ask(args.url, {"prompt": prompt})
        except (urllib.error.URLError, OSError, ValueError) as err:
            print(f"echo_client: {args.url} did not answer: {err}", file=sys.stderr)
            return 1
        results.append(
            {"prompt": prompt, "answer": answer, "correct": answer == {"echo": {"prompt": prompt}}}
        )
    correct = sum(1 for r in results if r["correct"])
    summary = {"service": args.url, "total": len(results), "correct": correct, "results": results}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(summary, indent=2) + "\n")
    metrics = {"accuracy": correct / len(results), "answered": len(results)}
    (args.out.parent / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n")
    print(f"echo_client: {correct}/{len(results)} answers correct; wrote {args.out}")
    return 0 if correct == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
