"""The one small client for the vast.ai REST API (Bearer key, configurable base URL).

Only the endpoints the CLI needs. The API key travels in the `Authorization` header and
nowhere else (never in a query string or a body). Every answer is scrubbed of key-like
fields before it is kept or quoted, and every error message built here is redacted.

One request policy covers every call (`RequestPolicy`): vast limits each endpoint per
identity as a minimum interval between calls, so consecutive calls to a limited endpoint
are spaced by that interval; a 429 is retried after the server's `threshold=` (or
`Retry-After`) plus jitter, for create too (a 429 create rented nothing); 502/503/504 and
transport failures are retried only where repeating is harmless, never for create (a lost
answer may have rented a box); the total wait per call is bounded, then one clear error.
"""

from __future__ import annotations

import http.client
import json
import os
import random
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from typing import Any

from rl_harness.harness.redaction import redact

from .credentials import scrub, scrubbed_values

DEFAULT_BASE_URL = "https://console.vast.ai"
V0 = "/api/v0"
V1 = "/api/v1"
V1_PAGE_LIMIT = 25  # vast answers at most 25 instances per v1 page
_GATEWAY_STATUS = frozenset({502, 503, 504})
_THRESHOLD = re.compile(r"threshold=\s*([0-9]*\.?[0-9]+(?:\s*\*\s*[0-9]*\.?[0-9]+)*)")
_NUMERIC_SEGMENT = re.compile(r"/\d+(?=/|$)")

CREATE = "PUT /api/v0/asks/{id}/"
DESTROY = "DELETE /api/v0/instances/{id}/"
SHOW = "GET /api/v0/instances/{id}/"


class VastAPIError(RuntimeError):
    """A failed vast.ai request; `status` is the HTTP status (None for a transport failure).

    `body` is the answer with every key-like field scrubbed.
    """

    def __init__(self, message: str, status: int | None = None, body: Any = None):
        super().__init__(message)
        self.status = status
        self.body = body

    @property
    def offer_gone(self) -> bool:
        """True when a create failed because the offer is no longer available (nothing was
        rented): vast answers 404 `no_such_ask` (error `invalid_args`) or 410 `no_such_ask`."""
        return self.status in (404, 410) and "no_such_ask" in json.dumps(self.body)


def resolve_base_url(base_url: str | None = None) -> str:
    """The explicit URL, else $VAST_URL, else the public console; no trailing slash."""
    url = base_url or os.environ.get("VAST_URL") or DEFAULT_BASE_URL
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"vast base URL must start with http:// or https://, got {url!r}")
    return url.rstrip("/")


def endpoint_key(method: str, path: str) -> str:
    """`PUT /api/v0/asks/{id}/`: the unit vast rate-limits (per endpoint and identity)."""
    return f"{method} {_NUMERIC_SEGMENT.sub('/{id}', path)}"


def threshold_seconds(body: Any) -> float | None:
    """The interval in a 429's `API requests too frequent: endpoint threshold=4.5` message
    (plain text or JSON `detail`/`msg`); `threshold=4.5*1.0` multiplies out."""
    text = body if isinstance(body, str) else json.dumps(body)
    match = _THRESHOLD.search(text)
    if match is None:
        return None
    value = 1.0
    for factor in match.group(1).split("*"):
        value *= float(factor)
    return value


def retry_after_seconds(value: str | None, now: float | None = None) -> float | None:
    """A `Retry-After` header (seconds or an HTTP date) in seconds; None when absent/bad."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError):
        return None
    return max(0.0, when - (time.time() if now is None else now))


def _message_of(body: Any) -> str:
    if isinstance(body, dict):
        return str(
            body.get("msg") or body.get("message") or body.get("detail") or body.get("error") or ""
        )
    return str(body or "")


def is_no_such_instance(body: Any) -> bool:
    """vast's documented answer for an instance that does not exist (404 on DELETE):
    `{"success": false, "error": "no_such_instance", "msg": "Instance 123 not found."}`."""
    return isinstance(body, dict) and body.get("error") == "no_such_instance"


def is_auth_failure(status: int | None, body: Any) -> bool:
    """A rejected key or an expired session. vast answers these with 401/403, but also
    with 404 (`auth_error`, or "Session expired. Please log in again.")."""
    if status in (401, 403):
        return True
    if status != 404:
        return False
    error = body.get("error") if isinstance(body, dict) else None
    text = _message_of(body).lower()
    return error == "auth_error" or any(
        marker in text for marker in ("session expired", "log in again", "user key", "api key")
    )


def _default_jitter(seconds: float) -> float:
    # Up to 20% on top (never below the server's interval), so parallel clients spread out.
    return random.uniform(0.0, 0.2 * seconds + 0.05)


# Minimum interval between calls of one endpoint, in seconds, from vast's OpenAPI files
# (`x-rateLimit`) and the documented 429 of create ("endpoint threshold=4.5"). A 429 that
# names a threshold replaces the entry for the rest of the client's life.
DOCUMENTED_SPACING_S: dict[str, float] = {CREATE: 4.5, DESTROY: 3.0, SHOW: 2.0}


@dataclass(frozen=True)
class RequestPolicy:
    spacing_s: dict[str, float] = field(default_factory=lambda: dict(DOCUMENTED_SPACING_S))
    max_wait_s: float = 120.0  # total retry sleep per call, then one clear error
    gateway_retries: int = 3  # tries for 502/503/504/transport failures (idempotent calls)
    backoff_s: float = 1.0  # first backoff when the server names no interval


DEFAULT_POLICY = RequestPolicy()


class VastClient:
    """Thin JSON-over-HTTP wrapper; one method per endpoint the tooling uses.

    `clock`, `sleep` and `jitter` are injectable so tests can drive the real policy
    without waiting; `notify` receives one line per wait (the CLI prints it).
    """

    def __init__(
        self,
        api_key: str | None,
        base_url: str | None = None,
        *,
        timeout_s: float = 30.0,
        policy: RequestPolicy | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        jitter: Callable[[float], float] = _default_jitter,
        notify: Callable[[str], None] | None = None,
    ):
        # None only for the public offer search; every other endpoint needs the key.
        self._api_key = api_key or None
        self._secrets: list[str] = [self._api_key] if self._api_key else []
        self.base_url = resolve_base_url(base_url)
        self.timeout_s = timeout_s
        self.policy = policy if policy is not None else DEFAULT_POLICY
        self._spacing = dict(self.policy.spacing_s)
        self._last_sent: dict[str, float] = {}
        self._clock, self._sleep, self._jitter = clock, sleep, jitter
        self._notify = notify or (lambda line: None)

    # -- transport -------------------------------------------------------------------------

    def _url(self, path: str, query: dict[str, Any] | None = None) -> str:
        url = self.base_url + path
        if query:
            # Like the SDK: strings as they are, everything else as JSON.
            url += "?" + urllib.parse.urlencode(
                {k: v if isinstance(v, str) else json.dumps(v) for k, v in query.items()}
            )
        return url

    def _space(self, key: str) -> None:
        """Wait until the endpoint's interval since our last call to it has passed."""
        interval = self._spacing.get(key, 0.0)
        last = self._last_sent.get(key)
        if interval <= 0 or last is None:
            return
        wait = last + interval - self._clock()
        if wait > 0:
            if wait >= 1.0:
                self._notify(f"spacing {key} by vast's {interval:g} s limit: waiting {wait:.1f} s")
            self._sleep(wait)

    def _request(
        self,
        method: str,
        path: str,
        *,
        body: dict[str, Any] | None = None,
        query: dict[str, Any] | None = None,
        idempotent: bool = True,
        public: bool = False,
    ) -> Any:
        """Send one request under the request policy (see the module docstring)."""
        data = None if body is None else json.dumps(body).encode("utf-8")
        headers = {"Accept": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        elif not public:
            raise VastAPIError(f"{method} {path} needs a vast.ai API key (set $VAST_API_KEY)")
        if data is not None:
            headers["Content-Type"] = "application/json"
        key = endpoint_key(method, path)
        waited, tries, backoff = 0.0, 0, self.policy.backoff_s
        while True:
            self._space(key)
            tries += 1
            request = urllib.request.Request(
                self._url(path, query), data=data, headers=headers, method=method
            )
            try:
                try:
                    with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                        raw = response.read().decode("utf-8", errors="replace")
                finally:
                    # vast counts the call when it arrives, somewhere before its answer
                    # reaches us: measuring from the answer keeps the spacing on the safe side.
                    self._last_sent[key] = self._clock()
                return self._scrub(json.loads(raw)) if raw.strip() else {}
            except urllib.error.HTTPError as err:
                raw = err.read().decode("utf-8", errors="replace")
                try:
                    parsed: Any = self._scrub(json.loads(raw))
                except json.JSONDecodeError:
                    parsed = raw
                error = self._error(method, path, err.code, parsed)
                if err.code == 429:
                    # Nothing happened on vast's side: safe to repeat, create included.
                    interval = threshold_seconds(parsed)
                    if interval is not None:
                        self._spacing[key] = interval
                    hinted = retry_after_seconds(err.headers.get("Retry-After"))
                    wait = hinted if hinted is not None else interval
                    if wait is None:
                        wait, backoff = backoff, min(backoff * 2, 30.0)
                elif err.code in _GATEWAY_STATUS and idempotent and tries < self.retries:
                    wait, backoff = backoff, min(backoff * 2, 30.0)
                else:
                    raise error from None
            except (urllib.error.URLError, http.client.HTTPException, OSError) as err:
                reason = getattr(err, "reason", err) or type(err).__name__
                text = f"{method} {path}: cannot reach {self.base_url}: {reason}"
                if not idempotent:
                    text += (
                        " (the answer was lost, so an instance may have been rented: check "
                        "`rl-harness vast status` and destroy any UNTRACKED one)"
                    )
                error = VastAPIError(self._redact(text))
                if not idempotent or tries >= self.retries:
                    raise error from None
                wait, backoff = backoff, min(backoff * 2, 30.0)
            wait += self._jitter(wait)
            if waited + wait > self.policy.max_wait_s:
                raise VastAPIError(
                    self._redact(
                        f"{error} (gave up after {tries} tries and {waited:.1f} s of waiting; "
                        f"vast still refuses {key})"
                    ),
                    status=error.status,
                    body=error.body,
                ) from None
            self._notify(
                f"vast answered {error.status or 'no answer'} to {key}: "
                f"waiting {wait:.1f} s before try {tries + 1}"
            )
            self._sleep(wait)
            waited += wait

    @property
    def retries(self) -> int:
        return max(1, self.policy.gateway_retries)

    def _scrub(self, value: Any) -> Any:
        """The answer with key-like fields replaced; their values join the redaction list."""
        self._secrets.extend(scrubbed_values(value))
        return scrub(value)

    def _error(self, method: str, path: str, status: int, body: Any) -> VastAPIError:
        detail = _message_of(body) or body
        text = self._redact(f"{method} {path} failed with HTTP {status}: {detail}")
        return VastAPIError(text, status=status, body=body)

    def _redact(self, text: str) -> str:
        return redact(text, self._secrets)

    # -- endpoints -------------------------------------------------------------------------

    def search_offers(self, query: dict[str, Any]) -> list[dict[str, Any]]:
        """POST /bundles/ with the filter object (field: {op: value}) as the JSON body."""
        out = self._request("POST", f"{V0}/bundles/", body=query, public=True)
        return list(out.get("offers", []))

    def create_instance(self, offer_id: int, body: dict[str, Any]) -> int:
        """PUT /asks/{offer_id}/: rent the offer; returns the new instance id.

        A 429 is retried (nothing was rented); any other failure, a lost answer included,
        is not (a second try could rent a second box).
        """
        out = self._request("PUT", f"{V0}/asks/{int(offer_id)}/", body=body, idempotent=False)
        if not isinstance(out, dict) or not out.get("success") or "new_contract" not in out:
            raise VastAPIError(
                self._redact(f"create from offer {offer_id} returned no instance id: {out}"),
                status=200,
                body=out,
            )
        return int(out["new_contract"])

    def list_instances(self) -> list[dict[str, Any]]:
        """Every instance of the account: GET /api/v1/instances/, 25 a page, following
        `next_token` with `after_token`. Only where v1 does not exist (a 404 that is not an
        auth failure) does it fall back to the old GET /api/v0/instances/."""
        query: dict[str, Any] = {
            "select_filters": {},
            "order_by": [{"col": "id", "dir": "asc"}],
            "limit": V1_PAGE_LIMIT,
        }
        rows: list[dict[str, Any]] = []
        seen_tokens: set[str] = set()
        while True:
            try:
                out = self._request("GET", f"{V1}/instances/", query=query)
            except VastAPIError as err:
                if err.status == 404 and not rows and not is_auth_failure(404, err.body):
                    out = self._request("GET", f"{V0}/instances/", query={"owner": "me"})
                    return list(out.get("instances") or [])
                raise
            rows.extend(out.get("instances") or [])
            token = out.get("next_token")
            if not token:
                return rows
            if token in seen_tokens:
                raise VastAPIError(f"GET {V1}/instances/: vast repeated page token {token!r}")
            seen_tokens.add(token)
            query["after_token"] = token

    def show_instance(self, instance_id: int) -> dict[str, Any] | None:
        """GET /instances/{id}/: one instance, or None when vast says it does not exist."""
        try:
            out = self._request("GET", f"{V0}/instances/{int(instance_id)}/", query={"owner": "me"})
        except VastAPIError as err:
            if err.status == 404 and is_no_such_instance(err.body):
                return None
            raise self._unclear_404(err) from None
        return out.get("instances") or None

    def destroy_instance(self, instance_id: int) -> bool:
        """DELETE /instances/{id}/ (destroy, never stop). False only when vast says the
        instance does not exist (`no_such_instance`); any other 404 (an expired session,
        a revoked key) is an error, so a billing box is never taken for gone."""
        try:
            self._request("DELETE", f"{V0}/instances/{int(instance_id)}/", body={})
        except VastAPIError as err:
            if err.status == 404 and is_no_such_instance(err.body):
                return False
            raise self._unclear_404(err) from None
        return True

    def _unclear_404(self, err: VastAPIError) -> VastAPIError:
        if err.status != 404:
            return err
        return VastAPIError(
            f"{err} (a 404 without `no_such_instance` is how vast answers an expired session "
            "or a revoked key: check the API key; nothing was marked gone)",
            status=err.status,
            body=err.body,
        )

    def attach_ssh_key(self, instance_id: int, public_key: str) -> None:
        """POST /instances/{id}/ssh/ with a public key."""
        key = public_key.strip()
        if not key.startswith(("ssh-", "ecdsa-", "sk-")):
            raise ValueError("that does not look like an OpenSSH public key")
        self._request("POST", f"{V0}/instances/{int(instance_id)}/ssh/", body={"ssh_key": key})

    def request_logs(self, instance_id: int, tail: int = 200, *, wait_s: float = 10.0) -> str:
        """PUT /instances/request_logs/{id}/, then fetch the returned result_url.

        The log URL is a pre-signed object-store link: it is fetched without our key.
        """
        out = self._request(
            "PUT",
            f"{V0}/instances/request_logs/{int(instance_id)}/",
            body={"tail": str(int(tail))},
        )
        url = out.get("result_url")
        if not url:
            raise VastAPIError(self._redact(f"no log URL for instance {instance_id}: {out}"))
        deadline = time.monotonic() + wait_s
        while True:
            try:
                with urllib.request.urlopen(url, timeout=self.timeout_s) as response:
                    text: str = response.read().decode("utf-8", errors="replace")
                    return text
            except urllib.error.HTTPError as err:
                # The log file appears a moment after the request; 403/404 until then.
                if err.code not in (403, 404) or time.monotonic() > deadline:
                    raise VastAPIError(
                        self._redact(f"fetching logs of {instance_id}: HTTP {err.code}"),
                        status=err.code,
                    ) from None
            time.sleep(0.3)
