"""A sharded benchmark's ONE record entry, from its shards' outcomes (submit/shards.py), searched over
any K and any mix of queued, refused and waiting shards: the entry names shard 0's job exactly when
every shard has one, and the metadata the record carries reads back as every shard's id in order."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from gymbuild.executors.states import waits_for_room
from gymbuild.state.shards import shard_ids
from gymbuild.state.workspace import Outcome
from gymbuild.submit.shards import entry, metadata

WAIT = "waiting for room: MaxSubmitJobs=2 of association gym/root"
shard_outcome = st.one_of(
    st.none(),  # never reached (a killed submit)
    st.builds(lambda i: (i, None), st.from_regex(r"[1-9][0-9]{0,6}", fullmatch=True)),
    st.sampled_from([(None, "sbatch: error: Invalid qos"), (None, WAIT)]),
)


def _outcomes(bench: str, found: list) -> dict[str, Outcome]:
    return {
        f"{bench}+shard{k}": Outcome(f"{bench}+shard{k}", job_id, error, "d", "t")
        for k, one in enumerate(found)
        if one is not None
        for job_id, error in [one]
    }


@given(st.lists(shard_outcome, min_size=2, max_size=10))
def test_the_entry_has_shard_0s_job_only_when_every_shard_has_one(found: list) -> None:
    outcomes = _outcomes("big", found)
    shards = [outcomes.get(f"big+shard{k}") for k in range(len(found))]
    job_id, error = entry(shards)
    unqueued = [k for k, one in enumerate(found) if one is None or one[0] is None]
    if not unqueued:
        assert (job_id, error) == (found[0][0], None)
        return
    assert job_id is None and error  # not all queued: no job id, as NeMo Gym records a failed sbatch
    k = unqueued[0]
    said = found[k][1] if found[k] is not None else None
    if said == WAIT:
        assert error == WAIT and waits_for_room(error)  # status shows WAITING, not failed
    else:
        assert error.startswith(f"shard {k}: ") and not waits_for_room(error)


@given(st.lists(shard_outcome, min_size=2, max_size=10))
def test_the_records_metadata_reads_back_as_every_shards_id(found: list) -> None:
    if found[-1] is None:  # the last shard's outcome says how many there are
        found[-1] = (None, WAIT)
    meta = metadata(_outcomes("big", found))
    assert list(meta) == ["shards.big"]
    assert shard_ids(meta, "big") == tuple(one[0] if one else None for one in found)
