"""The client and CLI against a fake vast that behaves like today's API: v1 listing with
pages, 410 on the v0 listing, per-endpoint rate limits, POST bundles, 404s that are not
"no such instance"."""

from __future__ import annotations

import json

import pytest
from fake_vast import FakeVast
from vast_support import API_KEY, up_args

from rl_harness.cli.vast import main
from rl_harness.devops.vast.bootstrap import ONSTART, ONSTART_LIMIT
from rl_harness.devops.vast.client import (
    CREATE,
    DESTROY,
    RequestPolicy,
    VastAPIError,
    VastClient,
    endpoint_key,
    threshold_seconds,
)
from rl_harness.devops.vast.credentials import Redactor, url_has_credentials
from rl_harness.devops.vast.state import StateFile
from rl_harness.harness.redaction import REDACTED

BODY = {"image": "x", "label": "rlh-test-0"}


class FakeClock:
    """Time that moves only when the client sleeps; records every sleep."""

    def __init__(self) -> None:
        self.t = 1000.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(round(seconds, 6))
        self.t += seconds


def _client(
    fake: FakeVast, clock: FakeClock | None = None, notify=None, **policy: object
) -> VastClient:
    clock = clock or FakeClock()
    return VastClient(
        API_KEY,
        fake.url,
        policy=RequestPolicy(**policy),
        clock=clock,
        sleep=clock.sleep,
        jitter=lambda seconds: 0.25,
        notify=notify,
    )


# -- listing ----------------------------------------------------------------------------------


def test_listing_follows_v1_pages_and_never_touches_v0(fake_vast):
    fake_vast.page_size = 2
    client = _client(fake_vast, spacing_s={})
    ids = [client.create_instance(900 + i, BODY) for i in range(5)]
    assert [int(i["id"]) for i in client.list_instances()] == ids
    pages = fake_vast.calls("GET", "/api/v1/instances/")
    assert [p.query.get("after_token") for p in pages] == [
        None,
        f"page-after-{ids[1]}",
        f"page-after-{ids[3]}",
    ]
    assert {p.query["limit"] for p in pages} == {"25"}  # vast's page cap, asked for as is
    assert json.loads(pages[0].query["order_by"]) == [{"col": "id", "dir": "asc"}]
    assert fake_vast.calls("GET", "/api/v0/instances/") == []


def test_listing_falls_back_to_v0_only_where_v1_is_absent(fake_vast):
    client = _client(fake_vast, spacing_s={})
    iid = client.create_instance(900, BODY)
    fake_vast.has_v1, fake_vast.v0_list_gone = False, False
    assert [i["id"] for i in client.list_instances()] == [iid]
    assert [r.status for r in fake_vast.requests[-2:]] == [404, 200]
    assert fake_vast.requests[-1].path == "/api/v0/instances/"
    fake_vast.v0_list_gone = True  # neither: one clear error naming the deprecation
    with pytest.raises(VastAPIError, match="HTTP 410: Endpoint deprecated") as err:
        client.list_instances()
    assert err.value.status == 410


def test_listing_with_an_expired_session_is_an_error_not_a_fallback(fake_vast):
    fake_vast.session_expired = True
    with pytest.raises(VastAPIError, match="Session expired"):
        _client(fake_vast, spacing_s={}).list_instances()
    assert fake_vast.calls("GET", "/api/v0/instances/") == []


# -- request policy ---------------------------------------------------------------------------


def test_threshold_and_endpoint_parsing():
    assert threshold_seconds({"detail": "API requests too frequent endpoint threshold=4.5"}) == 4.5
    assert threshold_seconds("API requests too frequent: endpoint threshold=4.5*2.0") == 9.0
    assert threshold_seconds("API requests too frequent") is None
    assert endpoint_key("PUT", "/api/v0/asks/123/") == CREATE
    assert endpoint_key("DELETE", "/api/v0/instances/77/") == DESTROY


def test_a_429_create_is_retried_after_the_threshold_and_later_creates_are_spaced(fake_vast):
    clock, waits = FakeClock(), []
    client = _client(fake_vast, clock, waits.append, spacing_s={})
    too_frequent = {"detail": "API requests too frequent endpoint threshold=4.5"}
    fake_vast.transient = [(429, too_frequent, {})]
    first = client.create_instance(900, BODY)
    second = client.create_instance(901, BODY)
    assert clock.sleeps == [4.75, 4.5]  # threshold + jitter; then the learnt interval
    assert set(fake_vast.instances) == {first, second}  # the 429 rented nothing
    assert [r.status for r in fake_vast.creates()] == [429, 200, 200]
    assert waits == [
        f"vast answered 429 to {CREATE}: waiting 4.8 s before try 2",
        f"spacing {CREATE} by vast's 4.5 s limit: waiting 4.5 s",
    ]


def test_retry_after_then_backoff_when_vast_names_no_interval(fake_vast):
    clock = FakeClock()
    client = _client(fake_vast, clock, spacing_s={}, backoff_s=1.0)
    fake_vast.transient = [
        (429, "API requests too frequent", {"Retry-After": "2"}),
        (429, "API requests too frequent", {}),
        (429, "API requests too frequent", {}),
    ]
    assert client.list_instances() == []
    assert clock.sleeps == [2.25, 1.25, 2.25]  # Retry-After, then 1 s doubling, + jitter


def test_documented_intervals_space_consecutive_creates_and_destroys(fake_vast):
    clock = FakeClock()
    client = _client(fake_vast, clock)  # the real defaults: create 4.5 s, destroy 3 s
    ids = [client.create_instance(900 + i, BODY) for i in range(3)]
    assert clock.sleeps == [4.5, 4.5]
    for iid in ids:
        assert client.destroy_instance(iid) is True
    assert clock.sleeps == [4.5, 4.5, 3.0, 3.0]
    assert fake_vast.instances == {}


def test_rate_limit_waits_are_bounded_then_one_clear_error(fake_vast):
    fake_vast.rate_limits = {CREATE: 30.0}  # vast keeps refusing (real seconds: never passes)
    clock = FakeClock()
    client = _client(fake_vast, clock, spacing_s={}, max_wait_s=100.0)
    first = client.create_instance(900, BODY)
    with pytest.raises(VastAPIError, match=r"HTTP 429.*gave up after 4 tries and 90.8 s") as err:
        client.create_instance(901, BODY)
    assert err.value.status == 429
    assert clock.sleeps == [30.25, 30.25, 30.25]
    assert set(fake_vast.instances) == {first}
    assert len(fake_vast.creates()) == 5


def test_a_create_whose_answer_was_lost_is_never_retried(fake_vast):
    fake_vast.drop_creates = {1}
    client = _client(fake_vast, spacing_s={})
    with pytest.raises(VastAPIError, match="answer was lost, so an instance may have been rented"):
        client.create_instance(900, BODY)
    assert len(fake_vast.creates()) == 1
    assert len(fake_vast.instances) == 1  # it was rented: a retry would have rented twice
    for status in (502, 504):
        fake_vast.transient = [status]
        with pytest.raises(VastAPIError, match=f"HTTP {status}"):
            client.create_instance(901, BODY)
    assert len(fake_vast.creates()) == 3


# -- 404s -------------------------------------------------------------------------------------


def test_only_no_such_instance_means_gone(fake_vast):
    client = _client(fake_vast, spacing_s={})
    iid = client.create_instance(900, BODY)
    assert client.destroy_instance(424242) is False  # 404 no_such_instance
    fake_vast.session_expired = True
    with pytest.raises(VastAPIError, match="expired session or a revoked key") as err:
        client.destroy_instance(iid)
    assert err.value.status == 404
    with pytest.raises(VastAPIError, match="nothing was marked gone"):
        client.show_instance(iid)
    fake_vast.session_expired = False
    fake_vast.revoked_keys = {API_KEY}
    with pytest.raises(VastAPIError, match="Invalid user key"):
        client.destroy_instance(iid)
    assert iid in fake_vast.instances


def test_an_expired_session_never_marks_a_billing_box_gone(vast_env, fake_vast, repos, capsys):
    assert main(up_args(repos)) == 0
    (iid,) = fake_vast.instances
    fake_vast.session_expired = True
    assert main(["status"]) == 1
    assert main(["destroy", str(iid)]) == 1
    assert main(["destroy", "--all"]) == 1
    err = capsys.readouterr().err
    assert "Session expired" in err and "nothing was marked gone" in err
    assert [r.status for r in StateFile(vast_env).records()] == ["active"]
    fake_vast.session_expired = False
    assert main(["destroy", "--all"]) == 0
    assert fake_vast.instances == {} and StateFile(vast_env).active() == []


# -- redaction --------------------------------------------------------------------------------


def test_key_like_fields_of_answers_never_reach_errors_or_state(vast_env, fake_vast, repos, capsys):
    fake_vast.no_contract_creates = {1}
    assert main(up_args(repos)) == 1
    printed = capsys.readouterr()
    (instance,) = fake_vast.instances.values()
    scoped = instance["scoped_key"]
    assert "returned no instance id" in printed.err and REDACTED in printed.err
    assert scoped not in printed.out + printed.err
    state_text = (vast_env / "instances.json").read_text() if vast_env.exists() else ""
    assert scoped not in state_text

    client = _client(fake_vast, spacing_s={})
    fake_vast.instances[instance["id"]]["env"]["B2_APPLICATION_KEY"] = "b2-secret-value-1"
    (row,) = client.list_instances()
    assert row["jupyter_token"] == REDACTED
    assert ["B2_APPLICATION_KEY", REDACTED] in row["extra_env"]
    fake_vast.transient = [(500, f"boom {instance['jupyter_token']} b2-secret-value-1", {})]
    with pytest.raises(VastAPIError) as err:
        client.list_instances()
    assert str(err.value).count(REDACTED) == 2 and "b2-secret" not in str(err.value)


def test_credentials_in_urls_are_redacted_and_refused(vast_env, fake_vast, repos, capsys):
    # One redaction for the whole library (harness.redaction): userinfo is dropped, a bare
    # ssh user name stays readable.
    text = "cloning https://x-access-token:ghp_abc123def@github.com/o/r.git from ssh://git@h/r"
    assert Redactor()(text) == "cloning https://github.com/o/r.git from ssh://git@h/r"
    assert Redactor()("https://tok123456@github.com/o/r") == "https://github.com/o/r"
    assert url_has_credentials("https://h/r.git?access_token=abc123def")
    assert not url_has_credentials("ssh://git@h/r")
    url = "https://x-access-token:ghp_abc123def@github.com/o/exp.git"
    args = up_args(repos, "--experiment-url", url, "--experiment-commit", repos.exp_commit)
    assert main(args) == 1
    printed = capsys.readouterr()
    assert "carries credentials" in printed.err
    assert "ghp_abc123def" not in printed.out + printed.err
    assert fake_vast.creates() == []


# -- the whole cycle against the realistic fake -----------------------------------------------


def test_full_cycle_with_rate_limits_paging_and_v0_gone(vast_env, fake_vast, repos, capsys):
    fake_vast.page_size = 2
    fake_vast.rate_limits = {CREATE: 0.3, DESTROY: 0.3}
    assert main(up_args(repos, "--seeds", "0-3")) == 0
    up = capsys.readouterr()
    assert up.out.count("rented instance") == 4 and len(fake_vast.instances) == 4
    create_429s = [r for r in fake_vast.rate_limited() if r.method == "PUT"]
    assert len(fake_vast.creates()) == 4 + len(create_429s)  # each 429 rented nothing
    assert len(create_429s) <= 1  # after one, creates are spaced by vast's threshold
    assert up.err.count("waiting") == len(create_429s)

    assert main(["status", "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert sorted(s["seed"] for s in status) == [0, 1, 2, 3]
    assert {s["vast_status"] for s in status} == {"running"}  # found on v1's pages

    assert main(["destroy", "--all"]) == 0
    assert fake_vast.instances == {}
    assert len([r for r in fake_vast.rate_limited() if r.method == "DELETE"]) <= 1
    assert StateFile(vast_env).active() == []
    assert main(["status"]) == 0
    assert "no active instances" in capsys.readouterr().out
    assert fake_vast.calls("GET", "/api/v0/instances/") == []
    assert fake_vast.calls("GET", "/api/v0/bundles/") == []
    assert fake_vast.calls("POST", "/api/v0/bundles/")[0].body["type"] == "on-demand"


def test_onstart_fits_the_strictest_documented_limit():
    # vast's docs: 4096 characters (OpenAPI validation), 4048 (its overview), 16 KB (CLI guide).
    assert ONSTART_LIMIT == 4048 and len(ONSTART) <= ONSTART_LIMIT
