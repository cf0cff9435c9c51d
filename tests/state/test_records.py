"""The job record: what a user, a collection script or a later command reads back after a submit."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from e2e_helpers import gymbuild as run_gymbuild
from e2e_helpers import user_env
from jsonschema import Draft202012Validator

import gymbuild
from gymbuild.resources import load_schema
from gymbuild.state import provenance, records
from gymbuild.state.records import BenchmarkJob, RecordError, SubmissionRecord

DATA = Path(__file__).parents[1] / "data"
PACKAGE = Path(gymbuild.__file__).resolve().parent
ID_PATTERN = re.compile(r"^gym-job-\d{8}T\d{6}Z-[0-9a-f]{6}$")
FROZEN = datetime(2025, 6, 11, 14, 22, 33, 987654, tzinfo=UTC)

# What NeMo Gym's reader (seed 001: the fields without a default) needs in every record, with the JSON
# types it accepts. Written out here, not derived from gymbuild's code, so a field we drop fails.
NEMO_GYM_REQUIRED = {
    "gym_job_id": str,
    "gym_version": str,
    "submitted_at": str,
    "run_dir": str,
    "cluster": str,
    "executor": str,
    "submitted_by": str,
    "benchmarks": list,
}
NEMO_GYM_REQUIRED_PER_BENCHMARK = {"benchmark": str, "job_dir": str}


def fixture_payload(name: str) -> dict:
    return json.loads((DATA / name).read_text(encoding="utf-8"))


def make_record(**changes) -> SubmissionRecord:
    """A record as gymbuild writes it; a `gym_job_id` given names its run directory too."""
    now = FROZEN
    job_id = changes.pop("gym_job_id", None) or provenance.new_gym_job_id(now)
    run_dir = f"/scratch/alice/runs/{job_id}"
    record = SubmissionRecord(
        gym_job_id=job_id,
        gym_version=gymbuild.__version__,
        gym_commit="0" * 40,
        submitted_at=provenance.utc_timestamp(now),
        run_dir=run_dir,
        cluster="eos",
        executor="slurm",
        hostname="login.example.com",
        submitted_by="alice",
        benchmarks=(
            BenchmarkJob("gpqa", f"{run_dir}/gpqa", "4410237"),
            BenchmarkJob("aime25", f"{run_dir}/aime25", None, "sbatch: error: invalid account"),
        ),
    )
    return dataclasses.replace(record, **changes)


# ---------------------------------------------------------------------------------------------------
# reading records other writers made


def test_a_record_written_by_nemo_gym_0_7_0_loads() -> None:
    record = SubmissionRecord.load(fixture_payload("nemo-gym-0.7.0-gym-job.json"))

    assert record.gym_job_id == "gym-job-20250611T142233Z-3fa9c1"
    assert record.executor == "slurm"
    assert record.hostname == "login-eos.example.com"
    assert record.executor_metadata == {}
    assert [(b.benchmark, b.job_id) for b in record.benchmarks] == [("gpqa", "4410237"), ("aime25", None)]
    assert [b.benchmark for b in record.failed] == ["aime25"]
    assert "Invalid account" in record.failed[0].error
    # NeMo Gym does not write the history; it reads as "never re-queued".
    assert all(b.previous_job_ids == () for b in record.benchmarks)


def test_a_record_from_nemo_gym_kubernetes_executor_loads() -> None:
    """NeMo Gym's main branch writes `executor: kubernetes` with its namespace and context."""
    record = SubmissionRecord.load(fixture_payload("nemo-gym-kubernetes-gym-job.json"))

    assert record.executor == "kubernetes"
    assert record.executor_metadata == {"namespace": "gym-evals", "context": "prod-cluster"}
    assert [(b.benchmark, b.job_id) for b in record.benchmarks] == [("gpqa", "gym-gpqa-x7k2p")]


def test_runs_lists_a_kubernetes_record_and_day_two_says_in_one_line_it_cannot_ask(tmp_path: Path) -> None:
    env = user_env(tmp_path)
    index = tmp_path / "xdg-cache" / "nemo-gym" / "jobs"
    index.mkdir(parents=True)
    name = "gym-job-20260102T030405Z-a1b2c3"
    (index / f"{name}.json").write_text((DATA / "nemo-gym-kubernetes-gym-job.json").read_text())
    listed = run_gymbuild("runs", cwd=tmp_path, env=env)
    assert listed.rc == 0, listed.stderr
    (row,) = [line for line in listed.stdout.splitlines() if line.startswith(name)]
    assert "kubernetes:k8s" in row and "UNKNOWN" in row
    assert "'kubernetes' executor, which gymbuild cannot ask" in listed.stderr
    for verb in ("status", "logs", "cancel"):
        run = run_gymbuild(verb, f"run={name}", cwd=tmp_path, env=env)
        assert run.rc == 1 and "Traceback" not in run.stderr, (verb, run.stderr)
        (line,) = run.stderr.strip().splitlines()
        assert "'kubernetes' executor (context prod-cluster, namespace gym-evals)" in line, verb
        assert "cannot ask" in line


def test_a_record_with_only_the_required_fields_loads_with_defaults() -> None:
    record = SubmissionRecord.load(fixture_payload("gym-job-required-fields-only.json"))

    assert record.gym_commit is None
    assert record.hostname is None
    assert record.executor_metadata == {}
    assert record.schema_version == 1
    (only,) = record.benchmarks
    assert (only.job_id, only.error, only.previous_job_ids) == (None, None, ())


def test_every_fixture_record_validates_against_the_schema() -> None:
    validator = Draft202012Validator(load_schema("gym-job.v1.schema.json"))
    for path in sorted(DATA.glob("*gym-job*.json")):
        errors = [e.message for e in validator.iter_errors(json.loads(path.read_text(encoding="utf-8")))]
        assert errors == [], path.name


def test_gymbuild_records_carry_every_field_nemo_gym_reader_requires() -> None:
    payload = json.loads(make_record().dumps())

    for name, kind in NEMO_GYM_REQUIRED.items():
        assert isinstance(payload.get(name), kind), name
    assert payload["schema_version"] == 1
    for entry in payload["benchmarks"]:
        for name, kind in NEMO_GYM_REQUIRED_PER_BENCHMARK.items():
            assert isinstance(entry.get(name), kind), name


# ---------------------------------------------------------------------------------------------------
# schema_version: read in one direction only


@pytest.mark.parametrize("version", [2, 17])
def test_a_record_from_a_newer_writer_is_refused_and_the_message_says_upgrade(version: int) -> None:
    payload = json.loads(make_record().dumps()) | {"schema_version": version}

    with pytest.raises(RecordError) as caught:
        SubmissionRecord.load(payload)

    message = str(caught.value)
    assert "newer" in message
    assert f"schema {version}" in message
    assert "reads up to 1" in message
    assert "upgrade" in message


def test_a_record_without_schema_version_is_refused() -> None:
    payload = json.loads(make_record().dumps())
    del payload["schema_version"]

    with pytest.raises(RecordError, match="no schema_version"):
        SubmissionRecord.load(payload)


@pytest.mark.parametrize("version", [True, False, "1", 1.0, None, [1], {"v": 1}])
def test_a_schema_version_that_is_not_an_integer_is_refused(version: object) -> None:
    payload = json.loads(make_record().dumps()) | {"schema_version": version}

    with pytest.raises(RecordError, match="not an integer"):
        SubmissionRecord.load(payload)


def test_unknown_keys_are_ignored_at_the_top_level_and_per_benchmark() -> None:
    record = make_record()
    payload = json.loads(record.dumps())
    payload["added_by_a_later_writer"] = {"anything": [1, 2]}
    payload["failed"] = []  # a computed view some writer might dump; never trusted over job_id
    payload["benchmarks"][0]["queue_position"] = 3

    assert SubmissionRecord.load(payload) == record


@pytest.mark.parametrize(
    ("damage", "where"),
    [
        (lambda p: p.update(cluster=None), "cluster"),
        (lambda p: p.pop("run_dir"), "missing run_dir"),
        (lambda p: p.update(benchmarks={"gpqa": "1"}), "benchmarks"),
        (lambda p: p["benchmarks"][0].update(job_id=4410237), "benchmarks[0].job_id"),
        (lambda p: p["benchmarks"][1].pop("job_dir"), "benchmarks[1]: missing job_dir"),
        (lambda p: p["benchmarks"][0].update(previous_job_ids="123"), "benchmarks[0].previous_job_ids"),
        (lambda p: p.update(executor_metadata={"namespace": 3}), "executor_metadata.namespace"),
        (lambda p: p["benchmarks"].append("gpqa"), "benchmarks[2]"),
    ],
)
def test_a_malformed_record_raises_record_error_naming_the_field(damage, where: str) -> None:
    payload = json.loads(make_record().dumps())
    damage(payload)

    with pytest.raises(RecordError) as caught:
        SubmissionRecord.load(payload)

    assert where in str(caught.value)


@pytest.mark.parametrize(
    ("damage", "where"),
    [
        (lambda p: p.update(gym_job_id="../../victim-dir"), "gym_job_id: '../../victim-dir'"),
        (lambda p: p.update(gym_job_id=p["gym_job_id"] + "\n"), "gym_job_id: 'gym-job-"),
        (
            lambda p: p.update(run_dir="/scratch/alice/runs/elsewhere"),
            "run_dir: '/scratch/alice/runs/elsewhere'",
        ),
        (lambda p: p.update(run_dir=p["run_dir"].removeprefix("/")), "run_dir: "),
        (lambda p: p["benchmarks"][0].update(benchmark="../gpqa"), "benchmarks[0].benchmark: '../gpqa'"),
        (lambda p: p["benchmarks"][0].update(job_dir="/home/alice"), "benchmarks[0].job_dir: '/home/alice'"),
        (lambda p: p["benchmarks"][1].update(job_dir=p["run_dir"] + "/.."), "benchmarks[1].job_dir: "),
        (lambda p: p["benchmarks"][0].update(job_id="--user=alice"), "benchmarks[0]: '--user=alice'"),
        (lambda p: p["benchmarks"][0].update(previous_job_ids=["1 2"]), "benchmarks[0]: '1 2'"),
    ],
)
def test_a_record_pointing_outside_its_run_directory_is_refused_naming_the_field(damage, where: str) -> None:
    # Issue 45: the id, the run directory and the job ids become paths and command words.
    payload = json.loads(make_record().dumps())
    damage(payload)

    with pytest.raises(RecordError) as caught:
        SubmissionRecord.load(payload)

    assert where in str(caught.value)


@pytest.mark.parametrize("payload", [None, [], "gym-job.json", 1, True])
def test_a_payload_that_is_not_an_object_raises_record_error(payload: object) -> None:
    with pytest.raises(RecordError, match="JSON object"):
        SubmissionRecord.load(payload)  # type: ignore[arg-type]


def test_record_error_is_a_user_error_so_it_prints_without_a_traceback() -> None:
    assert issubclass(RecordError, gymbuild.errors.UserError)


# ---------------------------------------------------------------------------------------------------
# the record as a value


def test_failed_lists_exactly_the_benchmarks_without_a_job_id() -> None:
    record = make_record()
    assert [b.benchmark for b in record.failed] == ["aime25"]
    assert make_record(benchmarks=record.benchmarks[:1]).failed == ()


def test_dumps_is_one_spelling_whatever_the_construction() -> None:
    record = make_record()
    rebuilt = SubmissionRecord(
        **{f.name: getattr(record, f.name) for f in reversed(dataclasses.fields(record))}
        | {"benchmarks": list(record.benchmarks), "executor_metadata": {}}
    )
    text = record.dumps()

    assert rebuilt.dumps() == text
    assert SubmissionRecord.load(json.loads(text)).dumps() == text
    assert text.endswith("}\n")
    assert text.isascii()
    assert text == json.dumps(json.loads(text), indent=2, sort_keys=True) + "\n"


def test_non_ascii_values_survive_the_round_trip() -> None:
    record = make_record(submitted_by="zoë", executor_metadata={"note": "日本"})
    assert SubmissionRecord.load(json.loads(record.dumps())) == record


def test_a_record_cannot_be_changed_through_the_dict_it_was_built_from() -> None:
    metadata = {"namespace": "team-a"}
    record = make_record(executor_metadata=metadata)
    metadata["namespace"] = "team-b"

    assert record.executor_metadata == {"namespace": "team-a"}
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.cluster = "other"  # type: ignore[misc]
    assert hash(record) == hash(dataclasses.replace(record, executor_metadata={"namespace": "team-a"}))


def test_requeued_keeps_the_replaced_job_id_in_the_history() -> None:
    first = BenchmarkJob("gpqa", "/run/gpqa", "100")

    second = first.requeued("200")
    third = second.requeued(None, "sbatch: error: QOSMaxSubmitJobPerUserLimit")
    fourth = third.requeued("300")

    assert (second.job_id, second.previous_job_ids) == ("200", ("100",))
    assert (third.job_id, third.error, third.previous_job_ids) == (
        None,
        "sbatch: error: QOSMaxSubmitJobPerUserLimit",
        ("100", "200"),
    )
    # The failed attempt had no id, so it adds nothing; the error of the failed attempt is gone.
    assert (fourth.job_id, fourth.error, fourth.previous_job_ids) == ("300", None, ("100", "200"))
    assert (fourth.benchmark, fourth.job_dir) == ("gpqa", "/run/gpqa")


def test_with_jobs_replaces_entries_by_name_and_keeps_the_order() -> None:
    record = make_record()
    retried = record.failed[0].requeued("4410300")
    extra = BenchmarkJob("mmlu", "/run/mmlu", "4410301")

    updated = record.with_jobs(retried, extra)

    assert [(b.benchmark, b.job_id) for b in updated.benchmarks] == [
        ("gpqa", "4410237"),
        ("aime25", "4410300"),
        ("mmlu", "4410301"),
    ]
    assert updated.failed == ()
    assert record.failed[0].job_id is None  # the original is untouched


# ---------------------------------------------------------------------------------------------------
# the local index


def test_local_index_dir_follows_xdg_cache_home_and_falls_back_to_home(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert records.local_index_dir() == tmp_path / "xdg" / "nemo-gym" / "jobs"

    monkeypatch.delenv("XDG_CACHE_HOME")
    assert records.local_index_dir() == tmp_path / "home" / ".cache" / "nemo-gym" / "jobs"

    # The XDG spec says to ignore a relative value; it would scatter the index over working dirs.
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/cache")
    assert records.local_index_dir() == tmp_path / "home" / ".cache" / "nemo-gym" / "jobs"


def test_write_local_index_writes_the_manifest_bytes_and_nothing_else(monkeypatch, tmp_path, capsys) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    record = make_record()

    path = record.write_local_index()

    assert path == tmp_path / "nemo-gym" / "jobs" / f"{record.gym_job_id}.json"
    assert path.read_text(encoding="utf-8") == record.dumps()
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]  # no temporary file left
    assert capsys.readouterr() == ("", "")


def test_rewriting_the_local_index_replaces_the_entry(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    record = make_record()
    record.write_local_index()

    retried = record.with_jobs(record.failed[0].requeued("4410300"))
    path = retried.write_local_index()

    assert SubmissionRecord.load(json.loads(path.read_text(encoding="utf-8"))) == retried
    assert len(list(path.parent.iterdir())) == 1


def test_an_unwritable_local_index_warns_once_and_carries_on(monkeypatch, tmp_path, capsys) -> None:
    # Tests run as root, which chmod does not stop; a directory under a regular file fails for anyone.
    (tmp_path / "file").write_text("not a directory")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "file" / "sub"))

    assert make_record().write_local_index() is None

    out, err = capsys.readouterr()
    assert out == ""
    assert len(err.splitlines()) == 1
    assert err.startswith("warning: could not write the local index")
    assert "Not a directory" in err


def test_an_id_that_is_not_a_file_name_is_not_written_outside_the_index(
    monkeypatch, tmp_path, capsys
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))

    assert make_record(gym_job_id="../../escaped").write_local_index() is None

    assert not any(p.suffix == ".json" for p in tmp_path.rglob("*"))
    assert capsys.readouterr().err.startswith("warning: could not write the local index")


def test_iter_local_index_lists_newest_first_and_skips_what_it_cannot_read(
    monkeypatch, tmp_path, capsys
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    older = make_record(gym_job_id="gym-job-20250101T000000Z-aaaaaa")
    newer = make_record(gym_job_id="gym-job-20250301T000000Z-bbbbbb")
    older.write_local_index()
    newer.write_local_index()
    index = records.local_index_dir()
    (index / "gym-job-20250201T000000Z-cccccc.json").write_text("{truncated", encoding="utf-8")
    from_the_future = json.loads(newer.dumps()) | {"schema_version": 2}
    (index / "gym-job-20250401T000000Z-dddddd.json").write_text(json.dumps(from_the_future), encoding="utf-8")

    listed = list(records.iter_local_index())

    assert [r.gym_job_id for r in listed] == [newer.gym_job_id, older.gym_job_id]
    warnings = capsys.readouterr().err.splitlines()
    assert len(warnings) == 2
    assert all(w.startswith("warning: skipping ") for w in warnings)
    assert any("cccccc" in w for w in warnings)
    assert any("dddddd" in w and "newer" in w for w in warnings)


def test_iter_local_index_of_a_machine_that_never_submitted_is_empty(monkeypatch, tmp_path, capsys) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "nothing-here"))
    assert list(records.iter_local_index()) == []
    assert capsys.readouterr().err == ""


# ---------------------------------------------------------------------------------------------------
# identity


def test_two_ids_made_in_the_same_frozen_second_differ(monkeypatch) -> None:
    monkeypatch.setattr(provenance, "utc_now", lambda: FROZEN)
    ids = [provenance.new_gym_job_id(provenance.utc_now()) for _ in range(3)]

    assert len(set(ids)) == 3
    assert all(i.startswith("gym-job-20250611T142233Z-") for i in ids)
    assert all(ID_PATTERN.match(i) for i in ids)


def test_timestamps_are_utc_seconds_with_a_z_whatever_the_zone() -> None:
    assert provenance.utc_timestamp(FROZEN) == "2025-06-11T14:22:33Z"
    berlin_summer = FROZEN.astimezone(timezone(timedelta(hours=2)))
    assert provenance.utc_timestamp(berlin_summer) == "2025-06-11T14:22:33Z"
    assert provenance.new_gym_job_id(berlin_summer).startswith("gym-job-20250611T142233Z-")


def test_a_naive_datetime_is_refused_rather_than_guessed() -> None:
    with pytest.raises(ValueError, match="naive"):
        provenance.utc_timestamp(datetime(2025, 6, 11, 14, 22, 33))
    with pytest.raises(ValueError, match="naive"):
        provenance.new_gym_job_id(datetime(2025, 6, 11, 14, 22, 33))


def test_utc_now_is_aware_utc() -> None:
    now = provenance.utc_now()
    assert now.utcoffset() == timedelta(0)
    assert abs(now - datetime.now(UTC)) < timedelta(seconds=5)


# ---------------------------------------------------------------------------------------------------
# gym_commit


def test_gym_commit_in_this_checkout_is_its_head() -> None:
    head = subprocess.run(
        ["git", "-C", str(PACKAGE), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert re.fullmatch(r"[0-9a-f]{40}(-dirty)?", provenance.gym_commit())
    assert provenance.gym_commit().removesuffix("-dirty") == head


def _commit_seen_by(package_parent: Path) -> str:
    """gym_commit() as a fresh process sees it, importing gymbuild from `package_parent`."""
    result = subprocess.run(
        [sys.executable, "-c", "import gymbuild.state.provenance as p; print(p.gym_commit())"],
        capture_output=True,
        text=True,
        check=True,
        cwd=package_parent,
        env={**os.environ, "PYTHONPATH": str(package_parent)},
    )
    return result.stdout.strip()


def _copy_package(to: Path) -> None:
    shutil.copytree(PACKAGE, to / "gymbuild", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(PACKAGE.parent / "schemas", to / "schemas")


def _git(where: Path, *args: str) -> str:
    command = ["git", "-C", str(where), "-c", "user.name=t", "-c", "user.email=t@example.com", *args]
    return subprocess.run(command, capture_output=True, text=True, check=True).stdout.strip()


def test_gym_commit_of_a_copy_outside_any_repository_is_unknown(tmp_path) -> None:
    _copy_package(tmp_path)
    assert _commit_seen_by(tmp_path) == "None"


def test_gym_commit_ignores_a_repository_that_does_not_track_the_package(tmp_path) -> None:
    # gymbuild installed into a .venv inside someone's project: that project's HEAD is not our commit.
    _git(tmp_path, "init", "-q")
    (tmp_path / "README").write_text("project")
    _git(tmp_path, "add", "README")
    _git(tmp_path, "commit", "-qm", "project")
    _copy_package(tmp_path)
    assert _commit_seen_by(tmp_path) == "None"


def test_gym_commit_marks_uncommitted_changes_as_dirty(tmp_path) -> None:
    _git(tmp_path, "init", "-q")
    _copy_package(tmp_path)
    _git(tmp_path, "add", "gymbuild", "schemas")
    _git(tmp_path, "commit", "-qm", "gymbuild")
    head = _git(tmp_path, "rev-parse", "HEAD")
    (tmp_path / "untracked.txt").write_text("does not change what runs")
    assert _commit_seen_by(tmp_path) == head

    with (tmp_path / "gymbuild" / "errors.py").open("a") as stream:
        stream.write("\n# local edit\n")
    assert _commit_seen_by(tmp_path) == f"{head}-dirty"


@pytest.mark.parametrize(
    ("direct_url", "expected"),
    [
        (
            {"url": "https://example.com/gymbuild.git", "vcs_info": {"vcs": "git", "commit_id": "ab" * 20}},
            "ab" * 20,
        ),
        ({"url": "file:///src/gymbuild", "dir_info": {}}, "None"),
    ],
)
def test_gym_commit_of_an_install_comes_from_its_direct_url(tmp_path, direct_url, expected) -> None:
    _copy_package(tmp_path)
    dist_info = tmp_path / "gymbuild-0.1.0.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: gymbuild\nVersion: 0.1.0\n")
    (dist_info / "direct_url.json").write_text(json.dumps(direct_url))
    assert _commit_seen_by(tmp_path) == expected


# ---------------------------------------------------------------------------------------------------
# executor-agnostic, by rule


def test_importing_the_record_module_loads_no_executor_or_pipeline_module() -> None:
    code = (
        "import gymbuild.state.records, sys; "
        "print([m for m in sys.modules if m.startswith(('gymbuild.executors', 'gymbuild.config', "
        "'gymbuild.render', 'gymbuild.cli.graph'))])"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(PACKAGE.parent)},
    )
    assert result.stdout.strip() == "[]"


def test_no_record_field_is_named_after_one_executor() -> None:
    schema = load_schema("gym-job.v1.schema.json")
    names = [f.name for cls in (SubmissionRecord, BenchmarkJob) for f in dataclasses.fields(cls)]
    names += list(schema["properties"]) + list(schema["$defs"]["BenchmarkJob"]["properties"])
    vocabulary = ("slurm", "sbatch", "squeue", "sacct", "ssh", "k8s", "pod")
    assert [n for n in names if any(word in n.lower() for word in vocabulary)] == []


# ---------------------------------------------------------------------------------------------------
# the schema documents the dataclasses, field for field


def test_the_schema_is_a_valid_2020_12_schema() -> None:
    Draft202012Validator.check_schema(load_schema("gym-job.v1.schema.json"))


@pytest.mark.parametrize(
    ("cls", "pointer"), [(SubmissionRecord, ()), (BenchmarkJob, ("$defs", "BenchmarkJob"))]
)
def test_the_schema_lists_every_field_and_requires_exactly_those_without_defaults(cls, pointer) -> None:
    node = load_schema("gym-job.v1.schema.json")
    for key in pointer:
        node = node[key]
    without_default = {
        f.name
        for f in dataclasses.fields(cls)
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    }

    assert set(node["properties"]) == {f.name for f in dataclasses.fields(cls)}
    # schema_version has a Python default for writers but every reader needs it in the payload.
    assert set(node["required"]) - {"schema_version"} == without_default


@pytest.mark.parametrize(
    ("cls", "shape"), [(SubmissionRecord, records._RECORD_SHAPE), (BenchmarkJob, records._BENCHMARK_SHAPE)]
)
def test_load_type_checks_every_field_it_reads(cls, shape) -> None:
    # A field load reads but does not check would let a wrong type through into the record.
    assert set(shape) == {f.name for f in dataclasses.fields(cls)}


def test_every_schema_field_has_a_description() -> None:
    undocumented = []

    def walk(node: dict, where: str) -> None:
        if "description" not in node:
            undocumented.append(where or "(root)")
        for name, child in node.get("properties", {}).items():
            walk(child, f"{where}.{name}")
        for name, child in node.get("$defs", {}).items():
            walk(child, f"$defs.{name}")
        for key in ("items", "additionalProperties"):
            if isinstance(node.get(key), dict) and "$ref" not in node[key]:
                walk(node[key], f"{where}.{key}")

    walk(load_schema("gym-job.v1.schema.json"), "")
    assert undocumented == []
