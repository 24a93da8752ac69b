"""devops/vast/instances.py against the fake vast server: the state file reconciled with vast's
listing, the status of each box, what a destroy takes, and the ssh command of a box."""

from __future__ import annotations

import time

import pytest
from fake_vast import FakeVast
from vast_support import API_KEY

from rl_harness.devops.vast.client import RequestPolicy, VastAPIError, VastClient
from rl_harness.devops.vast.instances import (
    OVERDUE_GRACE_S,
    NoSSHAddress,
    destroy_instance,
    destroy_targets,
    is_ours,
    reconcile,
    ssh_argv,
    status_report,
)
from rl_harness.devops.vast.state import InstanceRecord, StateFile

HOUR = 3600.0


def _client(fake: FakeVast) -> VastClient:
    return VastClient(API_KEY, fake.url, policy=RequestPolicy(spacing_s={}, backoff_s=0.01))


def _live(fake: FakeVast, iid: int, label: str, start_date: float | None, **extra) -> None:
    """An instance as vast lists it (the fake's stored shape)."""
    fake.instances[iid] = {
        "id": iid,
        "offer_id": iid,
        "machine_id": iid,
        "gpu_name": "RTX 4090",
        "num_gpus": 1,
        "dph_total": 0.5,
        "label": label,
        "actual_status": "running",
        "start_date": start_date,
        "ssh_host": "ssh5.vast.example",
        "ssh_port": 20001,
        "env": {},
        "scoped_key": "ck-x",
        **extra,
    }


def _record(iid: int, *, created_at: float, max_hours: float = 2.0, dph: float = 0.3):
    return InstanceRecord(
        instance_id=iid,
        launch_id="L",
        label=f"rlh-L-{iid}",
        offer_id=iid,
        machine_id=iid,
        gpu_name="RTX 4090",
        num_gpus=1,
        dph=dph,
        seed=iid,
        command="rl-harness x.y",
        created_at=created_at,
        deadline_at=created_at + max_hours * HOUR,
        experiment_commit="e" * 40,
        library_commit="l" * 40,
        results_branch="results",
        max_hours=max_hours,
    )


@pytest.fixture
def boxes(fake_vast, tmp_path):
    """Tracked: 1 (overdue by vast's start), 2 (healthy), 3 (gone from vast), 4 (ended);
    untracked: 7 (labelled ours), 8 (someone else's)."""
    now = time.time()
    state = StateFile(tmp_path / "state")
    for iid in (1, 2, 3, 4):
        state.add(_record(iid, created_at=now - 3 * HOUR))
    state.mark_ended(4, "destroyed", note="earlier")
    _live(fake_vast, 1, "rlh-L-1", now - 2 * HOUR - OVERDUE_GRACE_S - 60)
    _live(fake_vast, 2, "rlh-L-2", now - HOUR)  # 3 h by our clock, 1 h by vast's: healthy
    _live(fake_vast, 7, "rlh-M-0", now)
    _live(fake_vast, 8, "theirs-0", now)
    return state


def test_reconcile_marks_unlisted_boxes_gone_and_records_vasts_start(fake_vast, boxes):
    listed = reconcile(_client(fake_vast), boxes)
    assert sorted(listed) == [1, 2, 7, 8]
    by_id = {r.instance_id: r for r in boxes.records()}
    assert (by_id[3].status, by_id[3].note) == ("gone", "no longer listed by vast")
    assert by_id[2].started_at == fake_vast.instances[2]["start_date"]
    assert by_id[4].status == "destroyed"  # an ended record is left alone
    assert is_ours(listed[7], "rlh") and not is_ours(listed[8], "rlh")


def test_status_report_reads_deadlines_from_vasts_start_time(fake_vast, boxes):
    report = status_report(_client(fake_vast), boxes, label_prefix="rlh", include_ended=False)
    items = {item["instance_id"]: item for item in report.tracked}
    assert sorted(items) == [1, 2]
    assert items[1]["overdue"] and not items[2]["overdue"]
    assert items[2]["deadline_in_h"] == pytest.approx(1.0, abs=0.01)
    assert items[2]["hours"] == pytest.approx(3.0, abs=0.01)  # billing runs from our create
    assert items[2]["cost_so_far"] == pytest.approx(0.9, abs=0.01)
    assert items[1]["vast_status"] == "running" and items[1]["gpu"] == "1x RTX 4090"
    assert [i["id"] for i in report.untracked] == [7]
    assert report.burn_dph == pytest.approx(0.6) and report.active_count == 2
    everything = status_report(_client(fake_vast), boxes, label_prefix="rlh", include_ended=True)
    assert sorted(item["instance_id"] for item in everything.tracked) == [1, 2, 3, 4]
    assert everything.active_count == 2


def test_destroy_targets_by_name_overdue_and_all(fake_vast, boxes):
    client = _client(fake_vast)
    named = destroy_targets(client, boxes, [2], every=False, overdue=False, label_prefix="rlh")
    assert named.targets == {2: "named"} and named.listing_error is None
    assert fake_vast.calls("GET", "/api/v1/instances/") == []  # no listing for named ids
    late = destroy_targets(client, boxes, [], every=False, overdue=True, label_prefix="rlh")
    assert late.targets == {1: "rlh-L-1"}
    every = destroy_targets(client, boxes, [], every=True, overdue=False, label_prefix="rlh")
    assert every.targets == {1: "rlh-L-1", 2: "rlh-L-2", 7: "rlh-M-0"}  # never someone else's


def test_destroy_targets_fall_back_to_the_state_file_when_listing_fails(fake_vast, boxes):
    fake_vast.has_v1 = False  # the listing answers 410 (v0) / 404 (v1): no listing at all
    chosen = destroy_targets(
        _client(fake_vast), boxes, [], every=True, overdue=False, label_prefix="rlh"
    )
    assert isinstance(chosen.listing_error, VastAPIError)
    assert chosen.targets == {1: "rlh-L-1", 2: "rlh-L-2", 3: "rlh-L-3"}  # tracked ones only


def test_destroy_instance_records_destroyed_then_gone(fake_vast, boxes):
    client = _client(fake_vast)
    assert destroy_instance(client, boxes, 2) is True
    assert 2 not in fake_vast.instances and (2, "main") in fake_vast.deleted
    (record,) = boxes.records(lambda r: r.instance_id == 2)
    assert (record.status, record.note) == ("destroyed", "destroyed by user")
    assert destroy_instance(client, boxes, 2) is False
    assert boxes.records(lambda r: r.instance_id == 2)[0].status == "gone"


def test_ssh_argv_needs_an_address(fake_vast, boxes):
    client = _client(fake_vast)
    argv = ssh_argv(client, 2)
    assert argv[:5] == ["ssh", "-p", "20001", "root@ssh5.vast.example", "-t"]
    assert argv[5].startswith("tmux -L rlh attach -t rlh")
    with pytest.raises(NoSSHAddress, match="instance 99 not found"):
        ssh_argv(client, 99)
    fake_vast.instances[7].update(ssh_host=None, actual_status="loading")
    with pytest.raises(NoSSHAddress, match=r"no ssh address yet \(status loading\)"):
        ssh_argv(client, 7)
