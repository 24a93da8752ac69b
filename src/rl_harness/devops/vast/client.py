"""The one small client for the vast.ai REST API (Bearer key, configurable base URL).

Only the endpoints the CLI needs, all under `/api/v0`. The API key travels in the
`Authorization` header and nowhere else (never in a query string or a body), and every
error message built here is redacted of it.
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from rl_harness.harness.redaction import redact

DEFAULT_BASE_URL = "https://console.vast.ai"
API_PREFIX = "/api/v0"
# Transient statuses worth a retry on idempotent requests (rate limit, gateway trouble).
_RETRYABLE_STATUS = frozenset({429, 502, 503, 504})


class VastAPIError(RuntimeError):
    """A failed vast.ai request; `status` is the HTTP status (None for a transport failure)."""

    def __init__(self, message: str, status: int | None = None, body: Any = None):
        super().__init__(message)
        self.status = status
        self.body = body

    @property
    def offer_gone(self) -> bool:
        """True when a create failed because someone else took the offer (nothing was rented)."""
        text = json.dumps(self.body) if self.body is not None else ""
        return self.status in (404, 410) or "no_such_ask" in text


def resolve_base_url(base_url: str | None = None) -> str:
    """The explicit URL, else $VAST_URL, else the public console; no trailing slash."""
    url = base_url or os.environ.get("VAST_URL") or DEFAULT_BASE_URL
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"vast base URL must start with http:// or https://, got {url!r}")
    return url.rstrip("/")


class VastClient:
    """Thin JSON-over-HTTP wrapper; one method per endpoint the tooling uses."""

    def __init__(
        self,
        api_key: str | None,
        base_url: str | None = None,
        *,
        timeout_s: float = 30.0,
        retries: int = 3,
        retry_sleep_s: float = 0.5,
    ):
        # None only for the public offer search; every other endpoint needs the key.
        self._api_key = api_key or None
        self.base_url = resolve_base_url(base_url)
        self.timeout_s = timeout_s
        self.retries = max(1, retries)
        self.retry_sleep_s = retry_sleep_s

    # -- transport -------------------------------------------------------------------------

    def _url(self, path: str, query: dict[str, str] | None = None) -> str:
        url = self.base_url + API_PREFIX + path
        if query:
            url += "?" + urllib.parse.urlencode(query)
        return url

    def _request(
        self,
        method: str,
        path: str,
        *,
        body: dict | None = None,
        query: dict[str, str] | None = None,
        idempotent: bool = True,
    ) -> Any:
        """Send one request; retry transient failures only when repeating it is harmless."""
        data = None if body is None else json.dumps(body).encode("utf-8")
        headers = {"Accept": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        elif path != "/bundles/":
            raise VastAPIError(f"{method} {path} needs a vast.ai API key (set $VAST_API_KEY)")
        if data is not None:
            headers["Content-Type"] = "application/json"
        attempts = self.retries if idempotent else 1
        last: VastAPIError | None = None
        for attempt in range(attempts):
            request = urllib.request.Request(
                self._url(path, query), data=data, headers=headers, method=method
            )
            try:
                with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                    raw = response.read().decode("utf-8", errors="replace")
                return json.loads(raw) if raw.strip() else {}
            except urllib.error.HTTPError as err:
                raw = err.read().decode("utf-8", errors="replace")
                try:
                    parsed: Any = json.loads(raw)
                except json.JSONDecodeError:
                    parsed = raw
                last = self._error(method, path, err.code, parsed)
                if err.code not in _RETRYABLE_STATUS:
                    raise last from None
            except (urllib.error.URLError, TimeoutError, ConnectionError) as err:
                reason = getattr(err, "reason", err)
                last = VastAPIError(
                    self._redact(f"{method} {path}: cannot reach {self.base_url}: {reason}")
                )
            if attempt + 1 < attempts:
                time.sleep(self.retry_sleep_s * (2**attempt))
        assert last is not None
        raise last

    def _error(self, method: str, path: str, status: int, body: Any) -> VastAPIError:
        detail = body
        if isinstance(body, dict):
            detail = body.get("msg") or body.get("error") or body.get("detail") or body
        text = self._redact(f"{method} {path} failed with HTTP {status}: {detail}")
        return VastAPIError(text, status=status, body=body)

    def _redact(self, text: str) -> str:
        return redact(text, [self._api_key] if self._api_key else [])

    # -- endpoints -------------------------------------------------------------------------

    def search_offers(self, query: dict) -> list[dict]:
        """GET /bundles/?q=<json>: offers matching the filter object (field: {op: value})."""
        out = self._request("GET", "/bundles/", query={"q": json.dumps(query)})
        return list(out.get("offers", []))

    def create_instance(self, offer_id: int, body: dict) -> int:
        """PUT /asks/{offer_id}/: rent the offer; returns the new instance id.

        Never retried: a lost response to a successful create would rent a second box.
        """
        out = self._request("PUT", f"/asks/{int(offer_id)}/", body=body, idempotent=False)
        if not out.get("success") or "new_contract" not in out:
            raise VastAPIError(
                self._redact(f"create from offer {offer_id} returned no instance id: {out}"),
                status=200,
                body=out,
            )
        return int(out["new_contract"])

    def list_instances(self) -> list[dict]:
        """GET /instances/: the account's instances."""
        out = self._request("GET", "/instances/", query={"owner": "me"})
        return list(out.get("instances", []))

    def show_instance(self, instance_id: int) -> dict | None:
        """GET /instances/{id}/: one instance, or None when it no longer exists."""
        try:
            out = self._request("GET", f"/instances/{int(instance_id)}/", query={"owner": "me"})
        except VastAPIError as err:
            if err.status == 404:
                return None
            raise
        return out.get("instances") or None

    def label_instance(self, instance_id: int, label: str) -> None:
        """PUT /instances/{id}/ with a label."""
        self._request("PUT", f"/instances/{int(instance_id)}/", body={"label": label})

    def destroy_instance(self, instance_id: int) -> bool:
        """DELETE /instances/{id}/ (destroy, never stop). False when it was already gone."""
        try:
            self._request("DELETE", f"/instances/{int(instance_id)}/", body={})
        except VastAPIError as err:
            if err.status == 404:
                return False
            raise
        return True

    def attach_ssh_key(self, instance_id: int, public_key: str) -> None:
        """POST /instances/{id}/ssh/ with a public key."""
        key = public_key.strip()
        if not key.startswith(("ssh-", "ecdsa-", "sk-")):
            raise ValueError("that does not look like an OpenSSH public key")
        self._request("POST", f"/instances/{int(instance_id)}/ssh/", body={"ssh_key": key})

    def request_logs(self, instance_id: int, tail: int = 200, *, wait_s: float = 10.0) -> str:
        """PUT /instances/request_logs/{id}/, then fetch the returned result_url.

        The log URL is a pre-signed object-store link: it is fetched without our key.
        """
        out = self._request(
            "PUT", f"/instances/request_logs/{int(instance_id)}/", body={"tail": str(int(tail))}
        )
        url = out.get("result_url")
        if not url:
            raise VastAPIError(self._redact(f"no log URL for instance {instance_id}: {out}"))
        deadline = time.monotonic() + wait_s
        while True:
            try:
                with urllib.request.urlopen(url, timeout=self.timeout_s) as response:
                    return response.read().decode("utf-8", errors="replace")
            except urllib.error.HTTPError as err:
                # The log file appears a moment after the request; 403/404 until then.
                if err.code not in (403, 404) or time.monotonic() > deadline:
                    raise VastAPIError(
                        self._redact(f"fetching logs of {instance_id}: HTTP {err.code}"),
                        status=err.code,
                    ) from None
            time.sleep(0.3)
