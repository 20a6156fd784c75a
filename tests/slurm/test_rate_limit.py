"""slurmctld's per-user RPC rate limit: a throttled answer is retried by the
gateway with a bounded back-off, never shown as an error nor read as an empty queue; after the bound
it is a :class:`SlurmRateLimited` naming the limited user and what the admin can change.

What Slurm 24.11 really does (recorded by cluster/record_rate_limit.py into
tests/fixtures/slurm/24.11/rate_limit/): its client library sleeps and resends by itself while
slurmctld says back off, and the command exits 0 with the whole document, only later; with ``-v`` it
says so on stderr. A refusal that reaches the portal (a client that does not back off, or a JSON
``errors`` entry) carries Slurm's text for SLURMCTLD_COMMUNICATIONS_BACKOFF, "Rate limit exceeded,
please retry momentarily" (slurm_strerror in 24.11's libslurmfull), in the form 24.11's squeue prints
a load error (``squeue_controller_down.stderr.txt``)."""

import json
import logging

import pytest

from slurm import SlurmError, SlurmGateway, SlurmRateLimited
from slurm import gateway as gateway_module
from slurm.accounting import CONFIG_HEADER, SHOW_CONFIG, read_config
from slurm.errors import client_backoffs, rate_limited
from slurm.snapshot import snapshot_take
from tests.conftest import FIXTURES
from tests.fakes import FakeTransport
from tests.slurm.recorded import poll_transport, recording

RECORDED = FIXTURES / "slurm" / "24.11" / "rate_limit"
#: slurm_strerror(SLURMCTLD_COMMUNICATIONS_BACKOFF), as a squeue that did not back off would print it
REFUSED_STDERR = "slurm_load_jobs error: Rate limit exceeded, please retry momentarily\n"
SQUEUE = ["squeue", "--json"]


class Recorder:
    def __init__(self):
        self.sleeps: list[float] = []
        self.events: list[tuple[str, str, str, int]] = []
        self.commands: list[tuple[str, str, bool]] = []  # what command_observers saw: cluster, command, ok

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)

    def observe(self, cluster, command, event, n) -> None:
        self.events.append((cluster, command, event, n))

    def command(self, cluster, command, seconds, ok) -> None:
        self.commands.append((cluster, command, ok))


@pytest.fixture
def rec(monkeypatch):
    r = Recorder()
    monkeypatch.setattr(gateway_module, "rate_limit_observers", [r.observe])
    monkeypatch.setattr(gateway_module, "command_observers", [r.command])
    return r


def gateway(fake, rec, cluster="cluster2") -> SlurmGateway:
    gw = SlurmGateway(fake, cluster=cluster)
    gw.sleep = rec.sleep
    return gw


def queue_doc() -> dict:
    return recording("24.11").doc("squeue_all")


def test_the_recorded_burst_backed_off_in_the_client_and_every_answer_had_the_queue():
    """What 24.11 did when the portal's user ran 60 squeue --json in a row with rl_enable (bucket 30,
    2 a second) and one held job queued: every call exited 0 with the whole queue (the held job in
    each answer: none empty, none an error), no refusal reached stderr; slurmctld logged the back-offs
    it told the client to take, and with -v the client said it slept."""
    burst = json.loads((RECORDED / "burst.json").read_text())
    assert any("rl_enable" in p for p in burst["slurmctld_parameters"])
    plain = burst["plain"]["calls"]
    assert len(plain) == 60
    assert {c["returncode"] for c in plain} == {0}
    assert all(burst["held_job"] in c["jobs"] for c in plain)
    assert not any(c["stderr"].strip() for c in plain)
    verbose = burst["verbose"]["calls"]
    assert {c["returncode"] for c in verbose} == {0}
    assert not any(rate_limited(c["stderr"]) for c in plain + verbose)  # no refusal ever reached the caller
    assert sum(client_backoffs(c["stderr"]) for c in verbose) > 0
    assert any("RPC rate limit exceeded by uid" in line for line in burst["slurmctld_log"])


def test_a_recorded_client_backoff_is_counted_and_nothing_resent(rec):
    """The -v call that slept: exit 0, counted as throttled (the client's own back-off), not resent."""
    stderr = (RECORDED / "squeue_backoff_verbose.stderr.txt").read_text()
    stdout = (RECORDED / "squeue_backoff_verbose.stdout.txt").read_text()
    n = client_backoffs(stderr)
    assert n >= 1
    argv = ["squeue", "--json", "-v"]
    fake = FakeTransport().expect(argv, stdout=stdout, stderr=stderr)
    assert gateway(fake, rec).run(argv).out == stdout
    assert rec.events == [("cluster2", "squeue", "throttled", n)]
    assert rec.sleeps == [] and len(fake.calls) == 1


def test_a_refused_command_is_retried_with_back_off_and_answers(rec):
    doc = queue_doc()
    fake = (
        FakeTransport()
        .expect(SQUEUE, stderr=REFUSED_STDERR, returncode=1)
        .expect(SQUEUE, stderr=REFUSED_STDERR, returncode=1)
        .expect(SQUEUE, stdout=json.dumps(doc))
    )
    assert gateway(fake, rec).run_json(SQUEUE) == doc
    assert len(fake.calls) == 3
    assert [round(s) for s in rec.sleeps] == [1, 2]  # 1 s, 2 s (+ up to 0.5 s jitter)
    assert all(0 <= s - b <= gateway_module.RATE_LIMIT_JITTER for s, b in zip(rec.sleeps, [1, 2], strict=True))
    assert rec.events == [
        ("cluster2", "squeue", "throttled", 1),
        ("cluster2", "squeue", "retried", 1),
        ("cluster2", "squeue", "throttled", 1),
        ("cluster2", "squeue", "retried", 1),
    ]


def test_a_throttled_errors_entry_with_an_empty_queue_is_never_read_as_no_jobs(rec):
    empty = {
        **queue_doc(),
        "jobs": [],
        "errors": [{"description": "Rate limit exceeded, please retry momentarily", "error_number": 1000}],
    }
    doc = queue_doc()
    assert doc["jobs"]
    fake = FakeTransport().expect(SQUEUE, stdout=json.dumps(empty)).expect(SQUEUE, stdout=json.dumps(doc))
    assert gateway(fake, rec).run_json(SQUEUE)["jobs"] == doc["jobs"]
    assert len(rec.sleeps) == 1


def test_after_the_bound_a_clear_error_names_the_user_and_the_fix(rec):
    fake = FakeTransport()
    for _ in range(gateway_module.RATE_LIMIT_RETRIES + 1):
        fake.expect(["sudo", "-n", "-u", "alice", "--", "scancel", "42"], stderr=REFUSED_STDERR, returncode=1)
    with pytest.raises(SlurmRateLimited) as info:
        gateway(fake, rec).run(["scancel", "42"], as_user="alice")
    message = str(info.value)
    assert "cluster2's slurmctld is rate-limiting user 'alice'" in message
    assert "rl_enable" in message and "rl_refill_rate" in message and "rl_bucket_size" in message
    assert "Rate limit exceeded" in message
    assert len(fake.calls) == gateway_module.RATE_LIMIT_RETRIES + 1
    assert [round(s) for s in rec.sleeps] == [1, 2, 4, 8]
    assert sum(rec.sleeps) <= 15 + 4 * gateway_module.RATE_LIMIT_JITTER  # the documented bound: 17 s
    assert isinstance(info.value, SlurmError) and info.value.returncode == 1


def test_the_service_user_is_named_when_it_is_the_one_limited(rec):
    fake = FakeTransport()
    fake.user = "portal"
    for _ in range(gateway_module.RATE_LIMIT_RETRIES + 1):
        fake.expect(
            SQUEUE,
            stdout=json.dumps(
                {**queue_doc(), "jobs": [], "errors": [{"description": "Rate limit exceeded, please retry momentarily"}]}
            ),
        )
    with pytest.raises(SlurmRateLimited, match="rate-limiting the portal's service user 'portal'"):
        gateway(fake, rec).run_json(SQUEUE)


def test_a_poll_rides_out_a_throttled_queue_and_never_stores_an_empty_one(rec):
    """The poller's squeue refused twice: the snapshot still has the recorded queue."""
    fake = poll_transport("24.11")
    adapter = recording("24.11").adapter
    at = next(i for i, step in enumerate(fake.script) if step.argv == list(adapter.SQUEUE))
    for _ in range(2):
        fake.script.insert(at, type(fake.script[at])(list(adapter.SQUEUE), b"", REFUSED_STDERR.encode(), 1))
    snap = snapshot_take(gateway(fake, rec), now=1000.0, cluster="cluster2")
    assert len(snap.jobs) == len(recording("24.11").doc("squeue_all")["jobs"]) > 0
    assert len(rec.sleeps) == 2


def test_a_poll_throttled_past_the_bound_raises_instead_of_an_empty_queue(rec):
    fake = poll_transport("24.11", partitions=False)
    adapter = recording("24.11").adapter
    at = next(i for i, step in enumerate(fake.script) if step.argv == list(adapter.SQUEUE))
    del fake.script[at:]
    for _ in range(gateway_module.RATE_LIMIT_RETRIES + 1):
        fake.expect(list(adapter.SQUEUE), stderr=REFUSED_STDERR, returncode=1)
    with pytest.raises(SlurmRateLimited):
        snapshot_take(gateway(fake, rec), now=1000.0, cluster="cluster2")


def test_other_failures_are_not_retried(rec):
    fake = FakeTransport().expect(
        SQUEUE, stderr="slurm_load_jobs error: Unable to contact slurm controller (connect failure)\n", returncode=1
    )
    with pytest.raises(SlurmError) as info:
        gateway(fake, rec).run_json(SQUEUE)
    assert not isinstance(info.value, SlurmRateLimited)
    assert len(fake.calls) == 1 and rec.sleeps == [] and rec.events == []


def test_eagain_is_not_read_as_the_rate_limit():
    # slurmctld's answer at MaxJobCount; sbatch already retries it itself
    assert not rate_limited("sbatch: error: Batch job submission failed: Resource temporarily unavailable")
    assert rate_limited(REFUSED_STDERR)


def test_a_config_whose_ping_was_refused_is_read(rec, caplog):
    """Recorded: ``scontrol show config`` as ``portal`` with one token left in its bucket printed the
    whole configuration, then "Slurmctld(primary) at vm is DOWN" (its ping told to back off, which the
    client's ping does not do), and exited 1.
    The configuration is slurmctld's answer: read, not an error (the usage refresh failed on it)."""
    recorded = json.loads((RECORDED / "show_config_ping_refused.json").read_text())
    text = (RECORDED / "show_config_ping_refused.stdout.txt").read_text()
    refused = next(c for c in recorded["calls"] if c["returncode"] != 0)
    assert text.startswith(CONFIG_HEADER) and text.rstrip().endswith("is DOWN") and refused["stderr"] == ""
    fake = FakeTransport().expect(SHOW_CONFIG, stdout=text, returncode=refused["returncode"])
    with caplog.at_level(logging.INFO, logger="slurm.accounting"):
        config = read_config(gateway(fake, rec))
    assert config.tracked and config.calc_period_s == 60  # PriorityCalcPeriod, near the configuration's end
    assert caplog.messages == [
        "cluster2: scontrol show config read; its closing ping got no answer: Slurmctld(primary) at vm is DOWN"
    ]
    assert not fake.script and rec.sleeps == []  # read at once, nothing resent
    assert rec.commands == [("cluster2", "scontrol", True)]  # /metrics counts it as answered, not failed


def test_a_config_that_never_came_is_an_error(rec):
    """slurmctld unreachable: scontrol prints no configuration (its load error, in the form 24.11's
    squeue prints one, ``squeue_controller_down.stderr.txt``) and exits 1: an error, as before."""
    stderr = "slurm_load_ctl_conf error: Unable to contact slurm controller (connect failure)\n"
    fake = FakeTransport().expect(SHOW_CONFIG, stderr=stderr, returncode=1)
    with pytest.raises(SlurmError, match="Unable to contact slurm controller") as raised:
        read_config(gateway(fake, rec))
    assert raised.value.returncode == 1 and raised.value.argv == SHOW_CONFIG
    assert rec.commands == [("cluster2", "scontrol", False)]


@pytest.mark.parametrize(
    ("returncode", "cut"),
    [
        (-1, 0.5),  # an SSH session that closed without an exit status, half the answer through
        (1, 0.5),  # exit 1, the configuration cut short: no ping lines after it
        (2, 1.0),  # another exit code, whatever came before it
    ],
)
def test_a_config_cut_short_or_failing_otherwise_is_an_error(rec, returncode, cut):
    """Only exit 1 with the whole configuration and nothing but "is DOWN" lines after it is read;
    a partial configuration would read its missing settings as defaults (a wrong period, billing)."""
    text = (RECORDED / "show_config_ping_refused.stdout.txt").read_text()
    fake = FakeTransport().expect(SHOW_CONFIG, stdout=text[: int(len(text) * cut)], returncode=returncode)
    with pytest.raises(SlurmError) as raised:
        read_config(gateway(fake, rec))
    assert raised.value.returncode == returncode
    assert rec.commands == [("cluster2", "scontrol", False)]  # a failed scontrol on /metrics


def test_an_accepted_answer_that_was_refused_is_not_ok_when_its_resend_fails(rec):
    """An answer the caller would accept, but which was a rate-limit refusal, is resent; when the resend
    cannot run, the command counts as failed on /metrics, not as the accepted answer."""
    fake = FakeTransport().expect(SQUEUE, stderr=REFUSED_STDERR, returncode=1)
    fake.expect(SQUEUE, raises=SlurmError(SQUEUE, None, message="the SSH channel closed"))
    with pytest.raises(SlurmError, match="the SSH channel closed"):
        gateway(fake, rec).run(SQUEUE, accepted=lambda result: True)
    assert rec.commands == [("cluster2", "squeue", False)] and rec.sleeps != []
