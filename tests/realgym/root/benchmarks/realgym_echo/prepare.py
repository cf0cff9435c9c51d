"""Write the realgym_echo benchmark's data, offline (the built-in benchmarks download theirs).

`gym eval prepare` imports this module and calls `prepare()`, which must return the dataset's
`jsonl_fpath`. Each row is a Responses API request for NeMo Gym's string_match verifier. The model
double answers by echoing the prompt, so the rows whose prompt holds the expected `\\boxed{...}` are
answered right and the others wrong: the aggregate metrics are real, and not all ones.
"""

import json
from pathlib import Path

BENCHMARK_DIR = Path(__file__).parent
OUTPUT_FPATH = BENCHMARK_DIR / "data" / "realgym_echo_benchmark.jsonl"

# (question, expected answer, the answer the prompt itself shows)
ROWS = [
    ("What is the capital of France?", "Paris", "Paris"),
    ("What is 6 times 7?", "42", "42"),
    ("Which planet is called the red planet?", "Mars", "Mars"),
    ("What is the largest ocean on Earth?", "Pacific", "Atlantic"),
    ("How many legs does a spider have?", "8", "6"),
]


def prepare(limit: int | None = None) -> Path:
    OUTPUT_FPATH.parent.mkdir(parents=True, exist_ok=True)
    with OUTPUT_FPATH.open("w") as out:
        for question, expected, shown in ROWS[:limit]:
            text = f"{question} Reply with \\boxed{{{shown}}}."
            row = {
                "responses_create_params": {
                    "input": [
                        {"role": "user", "type": "message", "content": [{"type": "input_text", "text": text}]}
                    ]
                },
                "expected_answer": expected,
                "extraction_mode": "boxed",
                "case_sensitive": False,
            }
            out.write(json.dumps(row) + "\n")
    return OUTPUT_FPATH


if __name__ == "__main__":
    print(prepare())
