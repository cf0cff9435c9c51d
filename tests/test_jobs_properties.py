"""Properties of the job record over many generated records and payloads, not a handful of examples."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from gymbuild import jobs
from gymbuild.jobs import BenchmarkJob, RecordError, SubmissionRecord
from gymbuild.resources import load_schema

VALIDATOR = Draft202012Validator(load_schema("gym-job.v1.schema.json"))

text = st.text(max_size=30)
maybe_text = st.none() | text
# Clear of datetime's year-1 and year-9999 edges, where a zone offset cannot be converted to UTC.
moments = st.datetimes(
    min_value=datetime(2, 1, 1), max_value=datetime(9998, 12, 31), timezones=st.timezones()
)

benchmark_jobs = st.builds(
    BenchmarkJob,
    benchmark=text,
    job_dir=text,
    job_id=maybe_text,
    error=maybe_text,
    previous_job_ids=st.lists(text, max_size=3).map(tuple),
)


@st.composite
def records(draw: st.DrawFn) -> SubmissionRecord:
    """Records as gymbuild's writers build them: id and time from one clock reading, anything else free."""
    now = draw(moments)
    return SubmissionRecord(
        gym_job_id=jobs.new_gym_job_id(now),
        gym_version=draw(text),
        gym_commit=draw(maybe_text),
        submitted_at=jobs.utc_timestamp(now),
        run_dir=draw(text),
        cluster=draw(text),
        executor=draw(st.sampled_from(["slurm", "local"]) | text),
        hostname=draw(maybe_text),
        submitted_by=draw(text),
        benchmarks=draw(st.lists(benchmark_jobs, max_size=4)),
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
        return  # 1.0 is an integer to JSON Schema but not a version to load: tested in test_jobs.py
    try:
        SubmissionRecord.load(payload)
    except RecordError:
        assert not VALIDATOR.is_valid(payload)
    else:
        assert VALIDATOR.is_valid(payload)
