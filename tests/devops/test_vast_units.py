"""Client, offers, seeds and the state file lock, each on its own."""

from __future__ import annotations

import multiprocessing
import time
from pathlib import Path

import pytest
from fake_vast import FakeVast, make_offers
from vast_support import API_KEY

from rl_harness.devops.vast.client import (
    RequestPolicy,
    VastAPIError,
    VastClient,
    resolve_base_url,
)
from rl_harness.devops.vast.credentials import MissingAPIKey, forwarded_env, load_api_key
from rl_harness.devops.vast.launch import box_argv, grace_seconds, parse_seeds
from rl_harness.devops.vast.offers import (
    OfferFilters,
    add_to_quarantine,
    offer_score,
    pick_offers,
    rank_offers,
    read_quarantine,
)
from rl_harness.devops.vast.state import InstanceRecord, StateFile


def _client(fake: FakeVast, key: str | None = API_KEY) -> VastClient:
    policy = RequestPolicy(spacing_s={}, backoff_s=0.01)
    return VastClient(key, fake.url, policy=policy)


def test_client_sends_bearer_header_only(fake_vast):
    offers = _client(fake_vast).search_offers({"num_gpus": {"eq": 1}})
    assert len(offers) == 6
    request = fake_vast.requests[-1]
    assert request.headers["Authorization"] == f"Bearer {API_KEY}"
    assert "api_key" not in request.query and API_KEY not in request.path


def test_idempotent_requests_retry_but_create_never_does(fake_vast):
    client = _client(fake_vast)
    fake_vast.transient = [503, 502]
    assert client.list_instances() == []
    assert len(fake_vast.calls("GET", "/api/v1/instances/")) == 3
    fake_vast.transient = [503]
    with pytest.raises(VastAPIError) as err:
        client.create_instance(900, {"image": "x"})
    assert err.value.status == 503
    assert len(fake_vast.creates()) == 1  # one try: a retry could rent a second box
    assert client.create_instance(900, {"image": "x"}) in fake_vast.instances


def test_client_errors_are_clear_and_redacted(fake_vast):
    fake_vast.echo_auth_in_errors = True
    with pytest.raises(VastAPIError) as err:
        _client(fake_vast, API_KEY + "x").list_instances()
    assert err.value.status == 401 and "HTTP 401" in str(err.value)
    assert API_KEY not in str(err.value)
    with pytest.raises(VastAPIError, match="needs a vast.ai API key"):
        _client(fake_vast, None).list_instances()
    one_try = RequestPolicy(gateway_retries=1)
    with pytest.raises(VastAPIError, match="cannot reach"):
        VastClient(API_KEY, "http://127.0.0.1:9", policy=one_try).list_instances()


def test_base_url_comes_from_arg_then_env(monkeypatch):
    monkeypatch.setenv("VAST_URL", "http://127.0.0.1:1234/")
    assert resolve_base_url() == "http://127.0.0.1:1234"
    assert resolve_base_url("https://example.invalid") == "https://example.invalid"
    monkeypatch.delenv("VAST_URL")
    assert resolve_base_url() == "https://console.vast.ai"
    with pytest.raises(ValueError, match="must start with http:// or https://, got 'console"):
        resolve_base_url("console.vast.ai")


def test_api_key_sources(tmp_path):
    key_file = tmp_path / "vast_api_key"
    with pytest.raises(MissingAPIKey):
        load_api_key({}, key_file)
    key_file.write_text("filekey123456\n")
    assert load_api_key({}, key_file) == "filekey123456"
    assert load_api_key({"VAST_API_KEY": "envkey123456"}, key_file) == "envkey123456"


def test_forwarding_only_when_asked():
    b2 = {
        "B2_BUCKET": "runs",
        "B2_ENDPOINT": "s3.us-west-004.backblazeb2.com",
        "B2_APPLICATION_KEY_ID": "kid-0123456",
        "B2_APPLICATION_KEY": "b2secret-123456",
    }
    env = {**b2, "GH_TOKEN": "tok-123456", "VAST_API_KEY": "vk-123456"}
    assert forwarded_env(env, forward_b2=False, forward_git=False) == {}
    assert forwarded_env(env, forward_b2=True, forward_git=False) == {
        **b2,
        "B2_ENDPOINT": "https://s3.us-west-004.backblazeb2.com",
        "AWS_REGION": "us-west-004",
    }
    assert forwarded_env(env, forward_b2=False, forward_git=True) == {"RLH_GIT_TOKEN": "tok-123456"}
    with pytest.raises(ValueError, match="B2 is not configured"):
        forwarded_env({"GH_TOKEN": "x"}, forward_b2=True, forward_git=False)
    with pytest.raises(ValueError, match="none of"):
        forwarded_env({}, forward_b2=False, forward_git=True)


def test_score_ranks_reliable_cheap_performance_first():
    raw = make_offers(4)
    raw[3]["dlperf"] = 200.0  # much faster for a little more money
    raw[0]["reliability"] = 0.5  # cheapest but flaky: filtered by min reliability
    ranked = rank_offers(raw, OfferFilters(min_reliability=0.9))
    assert [o.id for o in ranked] == [903, 901, 902]
    assert ranked[0].score == pytest.approx(offer_score(200.0, 0.45, 0.975))
    assert offer_score(10.0, 0.0, 1.0) == 0.0


def test_local_filters_and_one_box_per_machine():
    raw = make_offers(5)
    raw[1]["machine_id"] = raw[0]["machine_id"]  # two offers on one machine
    raw[2]["gpu_ram"] = 12000
    raw[3]["cuda_max_good"] = 11.8
    filters = OfferFilters(min_gpu_ram_gb=20, min_cuda=12.0, max_dph=0.6)
    ranked = rank_offers(raw, filters, quarantined=frozenset({74}))
    assert [o.id for o in ranked] == [900, 901]
    assert [o.id for o in pick_offers(ranked, 2)] == [900]


def test_quarantine_file(tmp_path):
    path = tmp_path / "q.txt"
    assert read_quarantine(path) == frozenset()
    add_to_quarantine(path, 12, "died at boot")
    add_to_quarantine(path, 12)
    add_to_quarantine(path, 40)
    assert read_quarantine(path) == frozenset({12, 40})
    assert path.read_text().count("12") == 1
    path.write_text("oops\n")
    with pytest.raises(ValueError, match="not a machine id"):
        read_quarantine(path)


def test_seeds_and_commands():
    assert parse_seeds("0-3") == [0, 1, 2, 3]
    assert parse_seeds("1,5,7") == [1, 5, 7]
    assert parse_seeds("0-1,9") == [0, 1, 9]
    for bad in ("3-1", "a", "1,1", ""):
        with pytest.raises(ValueError, match=f"(seed list|seeds must be).*'{bad}'"):
            parse_seeds(bad)
    assert box_argv("rl-harness x.y --smoke", 3) == ("rl-harness", "x.y", "--smoke", "--seed", "3")
    assert box_argv("rl-harness x.y --seed={seed}", 2) == ("rl-harness", "x.y", "--seed=2")
    assert box_argv("rl-harness x.y --seed 1", None)[-1] == "1"
    with pytest.raises(ValueError, match="already sets --seed"):
        box_argv("rl-harness x.y --seed 1", 4)
    assert grace_seconds(6.0) == 600 and grace_seconds(0.05) == 18


def _record(i: int) -> InstanceRecord:
    return InstanceRecord(
        instance_id=i,
        launch_id="L",
        label=f"rlh-L-{i}",
        offer_id=i,
        machine_id=i,
        gpu_name="RTX 4090",
        num_gpus=1,
        dph=0.3,
        seed=i,
        command="rl-harness x.y",
        created_at=time.time(),
        deadline_at=time.time() + 3600,
        experiment_commit="e" * 40,
        library_commit="l" * 40,
        results_branch="results",
    )


def _writer(state_dir: str, start: int, count: int) -> None:
    state = StateFile(Path(state_dir))
    for i in range(start, start + count):
        state.add(_record(i))
        state.update(i, note=f"written by {start}")


def test_state_file_lock_keeps_every_concurrent_write(tmp_path):
    ctx = multiprocessing.get_context("fork")  # no threads run in this test
    procs = [ctx.Process(target=_writer, args=(str(tmp_path), 100 * p, 15)) for p in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
        assert p.exitcode == 0
    records = StateFile(tmp_path).records()
    assert len(records) == 60
    assert all(r.note == f"written by {r.instance_id // 100 * 100}" for r in records)


def test_state_file_roundtrip_and_bad_file(tmp_path):
    state = StateFile(tmp_path)
    state.add(_record(1))
    state.mark_ended(1, "destroyed", note="by hand")
    (record,) = state.records()
    assert record.status == "destroyed" and record.ended_at is not None
    assert state.active() == [] and state.update(99, note="x") is None
    state.path.write_text("[]")
    with pytest.raises(ValueError, match="not an rl-harness vast state file"):
        state.records()
