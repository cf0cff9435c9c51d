"""Fuzzing what tests/config/test_fuzz.py does not: Hydra overrides, and raw bytes in the config file.

A user types overrides on the command line (`k=v`, `+k=v`, `++k=v`, `~k`) and can hand gymbuild any
file; whatever they hold, the loader answers with a UserError (one message, exit 1), never another
exception. The raw-bytes generator also carries YAML's dangerous corners: `!!python/...` tags that
would run code under an unsafe loader (each runs `touch <canary>`; the canary must never appear),
unknown tags, small alias bombs, non-UTF-8 bytes, BOMs and NULs.
"""

from __future__ import annotations

import tempfile
import uuid
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gymbuild.config import load_config
from gymbuild.errors import UserError

ROOT = Path(__file__).resolve().parents[2]
MINIMAL = ROOT / "examples" / "minimal.yaml"
ENV = {"OTEL_TOKEN": "t", "HF_TOKEN": "h", "WANDB_API_KEY": "w"}
CANARY = Path(f"/tmp/gym-canary-{uuid.uuid4()}")

KEYS = [
    "services", "services.policy", "services.policy.port", "services.policy.env.X", "services.policy.model",
    "services.policy.mounts", "services.policy.type", "compute", "compute.cluster.walltime",
    "compute.cluster.extra_args.comment", "compute.cluster.node_pools.gpu.nodes", "driver",
    "driver.benchmarks.gpqa.run.k", "driver.benchmarks.gpqa.run", "driver.benchmarks.new.run.x",
    "driver.env.A", "driver.policy_model", "job.output_path", "otel.enabled", "hydra", "defaults",
    "a..b", ".a", "a.", "", "0", "a[0]", "services.policy.mounts[0]",
]  # fmt: skip
ODD = [
    "'", '"', "\\", "${", "}", "${oc.env:HOME}", "${a.b}", "$(touch x)", "`x`", "[", "]", "{", "}",
    ",", ":", "=", "==", "~", "+", "*", "?", "\n", "\t", " ", "\x00", "é", "🚀", "\u200b", "null",
    "true", "1e999", "-1", "0x10", "[1,2", "{a:", "'a'b'", "\\'", "interval(1,2)", "choice(a,b)",
    "range(0,3)", "sort([3,1])", "glob(*)", "shuffle(x)", "tag(a,b)", "str(1)", "int('x')",
]  # fmt: skip

odd_text = st.lists(st.one_of(st.sampled_from(ODD), st.text(max_size=6)), max_size=6).map("".join)
overrides = st.builds(
    lambda prefix, key, eq, value: f"{prefix}{key}{eq}{value}",
    st.sampled_from(["", "+", "++", "~"]),
    st.one_of(st.sampled_from(KEYS), odd_text),
    st.sampled_from(["=", "=", ""]),
    odd_text,
)


def _only_user_errors(path: Path, args: list[str]) -> None:
    try:
        load_config(path, args, environ=ENV)
    except UserError as err:
        assert str(err).strip()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(overrides, min_size=1, max_size=4))
def test_any_overrides_end_in_a_user_error_or_a_config(args: list[str]) -> None:
    _only_user_errors(MINIMAL, args)


def test_the_override_generator_reaches_valid_configs_and_errors() -> None:
    """The fuzz is not vacuous: the same calls both load configs and refuse them."""
    load_config(
        MINIMAL, ["++compute.cluster.walltime=01:00:00", "+driver.benchmarks.gpqa.run.k='a b'"], environ=ENV
    )
    for bad in (
        ["services.policy.port='x'"],
        ["+a..b=1"],
        ["~nothing"],
        ["k=${oc.env:NOPE_XYZ}"],
        ["=1"],
        ["+="],
        ["++="],
    ):
        try:
            load_config(MINIMAL, bad, environ=ENV)
        except UserError:
            continue
        raise AssertionError(f"{bad} was accepted")


# --- raw bytes -------------------------------------------------------------------------------------------

VALID = MINIMAL.read_bytes()
TAGS = [
    f'!!python/object/apply:os.system ["touch {CANARY}-system"]',
    f'!!python/object/apply:subprocess.check_call [["touch", "{CANARY}-call"]]',
    "!!python/name:os.system",
    "!!python/object:gymbuild.errors.UserError {}",
    "!!python/module:os",
    "!!binary aGVsbG8=",
    "!!set {a, b}",
    "!!omap [a: 1]",
    "!custom value",
    "!<tag:example.com,2000:app/foo> x",
    "!!timestamp 2001-12-14",
    "!!float .nan",
    "!!int 0x1f",
]


def _alias_bomb(depth: int, width: int) -> bytes:
    """A small billion-laughs: each level refers `width` times to the one before."""
    lines = ["a0: &a0 [lol]"]
    for i in range(1, depth + 1):
        refs = ", ".join([f"*a{i - 1}"] * width)
        lines.append(f"a{i}: &a{i} [{refs}]")
    return ("\n".join(lines) + "\n").encode()


def _splice(data: bytes, at: int, piece: bytes) -> bytes:
    at = min(at, len(data))
    return data[:at] + piece + data[at:]


raw_pieces = st.one_of(
    st.binary(max_size=40),
    st.sampled_from([b"\xff\xfe", b"\xef\xbb\xbf", b"\x00", b"\xc3\x28", b"\xed\xa0\x80", b"\x80", b"\r"]),
    st.sampled_from(TAGS).map(lambda t: f"\nservices: {t}\n".encode()),
    st.sampled_from(TAGS).map(lambda t: f"\n  x: {t}\n".encode()),
    st.builds(_alias_bomb, st.integers(1, 6), st.integers(1, 6)),
    st.sampled_from([b"&a", b"*a", b"*missing", b"<<: *a", b"%YAML 1.1\n---\n", b"--- !!map\n", b"...\n"]),
)
raw_files = st.one_of(
    st.binary(max_size=300),
    st.builds(_splice, st.just(VALID), st.integers(0, len(VALID)), raw_pieces),
    st.lists(raw_pieces, max_size=5).map(b"".join),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw_files)
def test_any_bytes_in_the_config_file_end_in_a_user_error_or_a_config(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "submit.yaml"
        path.write_bytes(data)
        _only_user_errors(path, [])
    assert not list(CANARY.parent.glob(CANARY.name + "*"))


def test_python_tags_are_refused_not_run(tmp_path: Path) -> None:
    for index, tag in enumerate(TAGS[:5]):
        path = tmp_path / f"t{index}.yaml"
        path.write_bytes(VALID + f"\nextra: {tag}\n".encode())
        try:
            load_config(path, [], environ=ENV)
        except UserError as err:
            assert str(path) in str(err)
        else:
            raise AssertionError(f"{tag} was accepted")
    assert not list(CANARY.parent.glob(CANARY.name + "*"))
