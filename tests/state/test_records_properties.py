"""Properties of the job record over many generated records and payloads, not a handful of examples."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from gymbuild.resources import load_schema
from gymbuild.state import provenance
from gymbuild.state.ids import is_plain_name
from gymbuild.state.records import BenchmarkJob, RecordError, SubmissionRecord

VALIDATOR = Draft202012Validator(load_schema("gym-job.v1.schema.json"))
PLACES = ("gym_job_id: ", "run_dir: ", "benchmarks[")

text = st.text(max_size=30)
maybe_text = st.none() | text
# Clear of datetime's year-1 and year-9999 edges, where a zone offset cannot be converted to UTC.
moments = st.datetimes(
    min_value=datetime(2, 1, 1), max_value=datetime(9998, 12, 31), timezones=st.timezones()
)

# A benchmark's name, and a directory's: what a path component can be (ids.is_plain_name).
names = st.text(min_size=1, max_size=30).filter(is_plain_name)
# A scheduler's job id: Slurm's, a pid, a kubernetes name (never an option or a path).
job_ids = st.from_regex(r"\A[A-Za-z0-9][A-Za-z0-9._+:@-]{0,20}\Z")


def benchmark_jobs(run_dir: str) -> st.SearchStrategy[BenchmarkJob]:
    """Entries whose directory is a plain name in the run directory, as every writer makes them."""
    return st.builds(
        BenchmarkJob,
        benchmark=names,
        job_dir=names.map(lambda name: f"{run_dir}/{name}"),
        job_id=st.none() | job_ids,
        error=maybe_text,
        previous_job_ids=st.lists(job_ids, max_size=3).map(tuple),
    )


@st.composite
def records(draw: st.DrawFn) -> SubmissionRecord:
    """Records as gymbuild's writers build them: id and time from one clock reading, the run directory
    named after the id under any absolute path, its benchmarks' directories in it; the rest free."""
    now = draw(moments)
    gym_job_id = provenance.new_gym_job_id(now)
    parents = draw(st.lists(names.filter(lambda n: n != ".."), max_size=3))
    run_dir = "/" + "/".join([*parents, gym_job_id])
    return SubmissionRecord(
        gym_job_id=gym_job_id,
        gym_version=draw(text),
        gym_commit=draw(maybe_text),
        submitted_at=provenance.utc_timestamp(now),
        run_dir=run_dir,
        cluster=draw(text),
        executor=draw(st.sampled_from(["slurm", "local"]) | text),
        hostname=draw(maybe_text),
        submitted_by=draw(text),
        benchmarks=draw(st.lists(benchmark_jobs(run_dir), max_size=4)),
        executor_metadata=draw(st.dictionaries(text, text, max_size=3)),
    )


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | text,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(text, children, max_size=4),
    max_leaves=20,
)


@st.composite
def damaged_payloads(draw: st.DrawFn) -> Any:
    """A real record with one field replaced by arbitrary JSON or removed: reaches past the version gate."""
    payload = json.loads(draw(records()).dumps())
    target = payload
    if payload["benchmarks"] and draw(st.booleans()):
        target = draw(st.sampled_from(payload["benchmarks"]))
    key = draw(st.sampled_from(sorted(target)))
    if draw(st.booleans()):
        del target[key]
    else:
        target[key] = draw(json_values)
    return payload


@given(records())
def test_a_dumped_record_loads_back_equal(record: SubmissionRecord) -> None:
    assert SubmissionRecord.load(json.loads(record.dumps())) == record


@given(records())
def test_every_record_gymbuild_writes_validates_against_the_schema(record: SubmissionRecord) -> None:
    payload = json.loads(record.dumps())
    assert [e.message for e in VALIDATOR.iter_errors(payload)] == []


@given(records())
def test_dumps_is_a_fixed_point_of_load(record: SubmissionRecord) -> None:
    text = record.dumps()
    assert SubmissionRecord.load(json.loads(text)).dumps() == text


@given(records())
def test_gymbuild_ids_and_timestamps_have_the_documented_shape(record: SubmissionRecord) -> None:
    stamp = record.submitted_at
    assert len(stamp) == 20 and stamp.endswith("Z")
    compact = stamp.replace("-", "").replace(":", "")
    assert record.gym_job_id.startswith(f"gym-job-{compact}-")
    assert len(record.gym_job_id.rsplit("-", 1)[1]) == 6


@given(json_values | st.dictionaries(text, json_values) | damaged_payloads())
def test_load_of_any_json_returns_a_record_or_raises_record_error(payload: Any) -> None:
    try:
        record = SubmissionRecord.load(payload)
    except RecordError as error:
        assert str(error)
    else:
        assert isinstance(record, SubmissionRecord)
        # Whatever loaded must be something gymbuild could write again, and it must still validate.
        assert VALIDATOR.is_valid(json.loads(record.dumps()))


@given(damaged_payloads())
def test_load_accepts_exactly_the_payloads_the_schema_accepts(payload: dict) -> None:
    # load checks shape with its own fast table; the published schema must agree with it both ways.
    if type(payload.get("schema_version")) is not int:
        return  # 1.0 is an integer to JSON Schema but not a version to load: test_records.py
    # Beyond the shape, load checks where the record points (the id's format, the run directory
    # named after it, the benchmarks' directories in it: records._check_places), which a schema cannot
    # say across fields; such a refusal names the field it is about.
    try:
        SubmissionRecord.load(payload)
    except RecordError as error:
        assert not VALIDATOR.is_valid(payload) or str(error).startswith(PLACES)
    else:
        assert VALIDATOR.is_valid(payload)
