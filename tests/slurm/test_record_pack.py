"""The stored queue (slurm/record_pack.py): one row per job under the field names once; read back
equal, and what a release before the rows or with other fields packed is read by name."""

import msgspec
import pytest
from msgspec.structs import asdict, replace

from slurm import SlurmGateway
from slurm.record_pack import JOB_FIELDS, jobs_pack, jobs_unpack
from slurm.records import QueueJob
from slurm.snapshot import ClusterSnapshot, snapshot_load, snapshot_store, snapshot_take
from tests.fakes import cluster_transport as scripted


def job(i: int, **kw) -> QueueJob:
    base = dict(
        job_id=i, array_job_id=0, array_task_id=None, array_task_string="", name=f"n{i}", user="alice",
        account="vision", partition="train", state="PENDING", reason="Priority", priority=100 - i,
        submit_time=1000 + i, start_time=0, end_time=0, time_limit=60, gpus={"a100": 2}, comment=f"portal:{i}",
        nodes="",
    )  # fmt: skip
    return QueueJob(**{**base, **kw})


def test_rows_round_trip_every_field(slurm_json):
    recorded = snapshot_take(SlurmGateway(scripted(slurm_json)), now=1000.0).jobs
    odd = [job(1), job(2, exit_code=1, signal=9, memory_per_cpu=2048, het_job_offset=0, array_max_tasks=5, gpus={})]
    for jobs in (recorded, odd, []):
        back = jobs_unpack(jobs_pack(jobs))
        assert back == jobs
        assert [asdict(b) for b in back] == [asdict(j) for j in jobs]  # every field, with its type
        assert all(type(b) is QueueJob for b in back)


def test_field_names_are_packed_once():
    jobs = [job(i) for i in range(1000)]
    per_map = len(msgspec.msgpack.encode([asdict(j) for j in jobs]))
    packed = jobs_pack(jobs)
    assert msgspec.msgpack.decode(packed)["fields"] == list(JOB_FIELDS)
    assert len(packed) < per_map / 2


def test_a_queue_packed_before_the_rows_is_read():
    jobs = [job(1), job(2, state="RUNNING", nodes="gpu01")]
    assert jobs_unpack(msgspec.msgpack.encode([asdict(j) for j in jobs])) == jobs
    # one map per job with a field this release does not know and without one it added since
    maps = [{k: v for k, v in asdict(j).items() if k != "cwd"} | {"gone": 1} for j in jobs]
    assert jobs_unpack(msgspec.msgpack.encode(maps)) == jobs  # cwd's default is ""


def test_rows_of_another_releases_fields_are_read_by_name():
    jobs = [job(1, cwd="/home/alice"), job(2)]
    names = [n for n in JOB_FIELDS if n != "cwd"] + ["gone"]
    rows = [[asdict(j)[n] for n in names[:-1]] + ["x"] for j in jobs]
    got = jobs_unpack(msgspec.msgpack.encode({"fields": names, "rows": rows}))
    assert got == [replace(jobs[0], cwd=""), jobs[1]]
    # the same count of columns under other names: still by name
    swapped = list(JOB_FIELDS)
    i, j = swapped.index("stdout"), swapped.index("stderr")
    swapped[i], swapped[j] = swapped[j], swapped[i]
    rows = [[asdict(x)[n] for n in swapped] for x in [job(3, stdout="o", stderr="e")]]
    assert jobs_unpack(msgspec.msgpack.encode({"fields": swapped, "rows": rows})) == [job(3, stdout="o", stderr="e")]


@pytest.mark.parametrize("change", ["a release before the last column", "a release with one more column"])
def test_rows_with_fewer_or_more_columns_are_read_by_name(change):
    """Rows of a release whose queue had one column less at the end (its jobs take the field's
    default) or one more (the unknown value is left out): never a failed read of the stored queue."""
    jobs = [job(1, array_max_tasks=5, cwd="/home/alice"), job(2)]
    if change == "a release before the last column":
        names = list(JOB_FIELDS[:-1])
        want = [replace(j, array_max_tasks=None) for j in jobs]
    else:
        names = [*JOB_FIELDS, "added_later"]
        want = jobs
    rows = [[asdict(j).get(n, "x") for n in names] for j in jobs]
    assert jobs_unpack(msgspec.msgpack.encode({"fields": names, "rows": rows})) == want


def test_a_row_that_lacks_a_required_field_is_an_error():
    names = [name for name in QueueJob.__struct_fields__ if name != "job_id"]
    with pytest.raises(TypeError):
        jobs_unpack(msgspec.msgpack.encode({"fields": names, "rows": [[asdict(job(1))[n] for n in names]]}))


@pytest.mark.django_db
def test_the_snapshot_with_its_queue_round_trips_through_redis(slurm_json, clean_cache):
    snap = snapshot_take(SlurmGateway(scripted(slurm_json)), now=1000.0)
    snapshot_store(snap)
    assert snapshot_load(cluster=snap.cluster) == snap
    assert isinstance(snapshot_load(cluster=snap.cluster), ClusterSnapshot)
