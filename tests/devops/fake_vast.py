"""A fake vast.ai server on 127.0.0.1 (random port) that speaks the endpoints we use, the
way vast's current OpenAPI files, SDK source and public reports describe them, and records
every request.

- Offer search is `POST /api/v0/bundles/` with the query as JSON body.
- Instances are listed by `GET /api/v1/instances/`, at most 25 a page (`page_size` lower
  to test paging), continued by `after_token=<next_token>`; the old `GET /api/v0/instances/`
  answers 410 `deprecated_endpoint` (`v0_list_gone`). `has_v1=False` plays a server that
  predates v1 (404 there, v0 still served).
- Rate limits are per endpoint and identity, a minimum interval between calls
  (`rate_limits`, seconds, keyed like `PUT /api/v0/asks/{id}/`); a refused call answers 429
  "API requests too frequent: endpoint threshold=X" (JSON `detail` for create, plain text
  elsewhere) and still counts as a call.
- DELETE of an instance that does not exist answers 404 `no_such_instance`; an expired
  session answers 404 "Session expired. Please log in again."; a revoked key 404
  `auth_error`; an unknown key 401.
- Each created instance gets its own scoped key, like vast's CONTAINER_API_KEY (returned as
  `instance_api_key` by create), which may only read or destroy that one instance.
"""

from __future__ import annotations

import json
import re
import secrets
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

DROP = object()  # close the connection without an answer (a lost answer)


@dataclass
class Recorded:
    method: str
    path: str
    query: dict
    headers: dict
    body: object
    raw_body: str
    status: int = 0


@dataclass
class FakeVast:
    api_key: str
    offers: list[dict]
    apply_filters: bool = True  # False: return every offer (checks our local filtering)
    fail_creates: set[int] = field(default_factory=set)  # 1-based create calls that fail 500
    drop_creates: set[int] = field(default_factory=set)  # create calls whose answer is lost
    no_contract_creates: set[int] = field(default_factory=set)  # 200 without new_contract
    gone_offers: set[int] = field(default_factory=set)  # offers answering 410 no_such_ask
    echo_auth_in_errors: bool = False  # a hostile server echoing the key back in errors
    # Next answers, before any routing: a status, or (status, JSON or text, headers).
    transient: list = field(default_factory=list)
    v0_list_gone: bool = True
    has_v1: bool = True
    page_size: int = 25
    rate_limits: dict[str, float] = field(default_factory=dict)
    session_expired: bool = False
    revoked_keys: set[str] = field(default_factory=set)
    requests: list[Recorded] = field(default_factory=list)
    instances: dict[int, dict] = field(default_factory=dict)
    deleted: list[tuple[int, str]] = field(default_factory=list)  # (id, "main" | "scoped")
    ssh_keys: dict[int, list[str]] = field(default_factory=dict)
    logs: dict[int, str] = field(default_factory=dict)
    create_calls: int = 0
    _next_id: int = 5001

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._last_call: dict[tuple[str, str], float] = {}
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:  # keep pytest output clean
                pass

            def _handle(self) -> None:
                fake._dispatch(self)

            do_GET = do_PUT = do_POST = do_DELETE = _handle

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    # -- helpers for tests ---------------------------------------------------------------------

    def calls(self, method: str, prefix: str) -> list[Recorded]:
        return [r for r in self.requests if r.method == method and r.path.startswith(prefix)]

    def creates(self) -> list[Recorded]:
        return self.calls("PUT", "/api/v0/asks/")

    def rate_limited(self) -> list[Recorded]:
        return [r for r in self.requests if r.status == 429]

    def start(self, instance_id: int, at: float) -> None:
        """Set vast's `start_date` of an instance (epoch seconds)."""
        self.instances[instance_id]["start_date"] = at

    # -- server side ---------------------------------------------------------------------------

    def _dispatch(self, h: BaseHTTPRequestHandler) -> None:
        parsed = urllib.parse.urlsplit(h.path)
        length = int(h.headers.get("Content-Length") or 0)
        raw = h.rfile.read(length).decode("utf-8") if length else ""
        try:
            body = json.loads(raw) if raw else None
        except json.JSONDecodeError:
            body = raw
        query = {k: v[0] for k, v in urllib.parse.parse_qs(parsed.query).items()}
        record = Recorded(h.command, parsed.path, query, dict(h.headers.items()), body, raw)
        with self._lock:
            self.requests.append(record)
            answer = self._route(h.command, parsed.path, query, body, h.headers)
        if answer is DROP:
            h.close_connection = True
            return
        status, payload, text, headers = (*answer, {}) if len(answer) == 3 else answer
        record.status = status
        data = (text if text is not None else json.dumps(payload)).encode("utf-8")
        h.send_response(status)
        h.send_header("Content-Type", "text/plain" if text is not None else "application/json")
        h.send_header("Content-Length", str(len(data)))
        for name, value in headers.items():
            h.send_header(name, value)
        h.end_headers()
        h.wfile.write(data)

    def _who(self, headers) -> str | None:
        auth = headers.get("Authorization", "")
        token = auth.removeprefix("Bearer ").strip() if auth.startswith("Bearer ") else ""
        if token and token in self.revoked_keys:
            return "revoked"
        if token == self.api_key:
            return "main"
        for iid, inst in self.instances.items():
            if token and token == inst["scoped_key"]:
                return f"scoped:{iid}"
        return None

    def _limited(self, method: str, path: str, who: str) -> tuple | None:
        key = f"{method} {re.sub(r'/\d+(?=/|$)', '/{id}', path)}"
        threshold = self.rate_limits.get(key)
        if threshold is None:
            return None
        now = time.monotonic()
        last = self._last_call.get((key, who))
        self._last_call[(key, who)] = now  # a refused call counts too
        if last is None or now - last >= threshold:
            return None
        message = f"API requests too frequent endpoint threshold={threshold}"
        if key.startswith("PUT /api/v0/asks/"):
            return 429, {"detail": message}, None
        return 429, None, f"API requests too frequent: endpoint threshold={threshold}"

    def _route(self, method: str, path: str, query: dict, body, headers):
        if self.transient:
            nxt = self.transient.pop(0)
            if isinstance(nxt, int):
                return nxt, {"success": False, "error": "busy"}, None
            status, content, extra = nxt
            if isinstance(content, str):
                return status, None, content, extra
            return status, content, None, extra
        if method == "GET" and path.startswith("/logs/"):
            iid = int(path.removeprefix("/logs/").removesuffix(".log"))
            return 200, None, self.logs.get(iid, f"log of {iid}\n")
        if path == "/api/v0/bundles/":
            if method != "POST":
                return 404, {"success": False, "error": "not_found", "msg": "use POST"}, None
            return 200, {"offers": self._search(body or {})}, None
        who = self._who(headers)
        if who is None:
            msg = "Invalid user key"
            if self.echo_auth_in_errors:
                msg += f": got {headers.get('Authorization')}"
            return 401, {"success": False, "error": "auth_error", "msg": msg}, None
        if who == "revoked":
            return 404, {"success": False, "error": "auth_error", "msg": "Invalid user key"}, None
        if who == "main" and self.session_expired:
            return 404, {"success": False, "msg": "Session expired. Please log in again."}, None
        limited = self._limited(method, path, who)
        if limited is not None:
            return limited
        parts = [p for p in path.split("/") if p]  # api vN ...
        if who.startswith("scoped:"):
            own = int(who.split(":")[1])
            allowed = parts[:3] == ["api", "v0", "instances"] and parts[3:] == [str(own)]
            if not (allowed and method in ("GET", "DELETE")):
                return 403, {"success": False, "error": "scope", "msg": "not your instance"}, None
        if method == "PUT" and parts[:3] == ["api", "v0", "asks"]:
            return self._create(int(parts[3]), body)
        if method == "GET" and parts == ["api", "v1", "instances"] and self.has_v1:
            return self._list_v1(query)
        if parts[:3] == ["api", "v0", "instances"]:
            rest = parts[3:]
            if method == "GET" and not rest:
                if self.v0_list_gone:
                    msg = (
                        "Endpoint deprecated: /api/v0/instances/ is deprecated. "
                        "Use /api/v1/instances/ instead."
                    )
                    return 410, {"success": False, "error": "deprecated_endpoint", "msg": msg}, None
                return 200, {"instances": [self._view(i) for i in self.instances.values()]}, None
            if rest[:1] == ["request_logs"] and method == "PUT":
                iid = int(rest[1])
                url = f"{self.url}/logs/{iid}.log"
                return 200, {"success": True, "result_url": url}, None
            iid = int(rest[0])
            inst = self.instances.get(iid)
            if inst is None:
                if method == "GET":
                    return 200, {"instances": None}, None
                msg = f"Instance {iid} not found."
                return 404, {"success": False, "error": "no_such_instance", "msg": msg}, None
            if rest[1:] == ["ssh"] and method == "POST":
                self.ssh_keys.setdefault(iid, []).append(body["ssh_key"])
                return 200, {"success": True}, None
            if method == "GET":
                return 200, {"instances": self._view(inst)}, None
            if method == "PUT":
                inst["label"] = body.get("label", inst["label"])
                return 200, {"success": True}, None
            if method == "DELETE":
                del self.instances[iid]
                self.deleted.append((iid, "main" if who == "main" else "scoped"))
                return 200, {"success": True}, None
        return 404, {"success": False, "error": "not_found", "msg": path}, None

    def _list_v1(self, query: dict):
        limit = min(int(json.loads(query.get("limit", "25"))), self.page_size, 25)
        after = query.get("after_token")
        rows = sorted(self.instances.values(), key=lambda i: i["id"])
        if after:
            last = int(after.removeprefix("page-after-"))
            rows = [i for i in rows if i["id"] > last]
        page = rows[:limit]
        out: dict = {
            "success": True,
            "instances": [self._view(i) for i in page],
            "total_instances": len(self.instances),
        }
        if len(rows) > limit:
            out["next_token"] = f"page-after-{page[-1]['id']}"
        return 200, out, None

    def _search(self, q: dict) -> list[dict]:
        rented = {i["offer_id"] for i in self.instances.values()}
        out = [o for o in self.offers if o["id"] not in rented]
        if not self.apply_filters:
            return out
        exclude = set(q.get("machine_id", {}).get("notin", []))
        want = q.get("num_gpus", {}).get("eq")
        return [o for o in out if o["machine_id"] not in exclude and want in (None, o["num_gpus"])]

    def _create(self, offer_id: int, body: dict):
        self.create_calls += 1
        if self.create_calls in self.fail_creates:
            msg = "internal error"
            return 500, {"success": False, "error": "server_error", "msg": msg}, None
        offer = next((o for o in self.offers if o["id"] == offer_id), None)
        taken = {i["offer_id"] for i in self.instances.values()}
        if offer is None or offer_id in self.gone_offers or offer_id in taken:
            msg = f"error 410/3907: no_such_ask Instance type {offer_id} is no longer available."
            return 410, {"success": False, "error": "no_such_ask", "msg": msg}, None
        iid = self._next_id
        self._next_id += 1
        scoped = "ck-" + secrets.token_hex(16)
        self.instances[iid] = {
            "id": iid,
            "offer_id": offer_id,
            "machine_id": offer["machine_id"],
            "gpu_name": offer["gpu_name"],
            "num_gpus": offer["num_gpus"],
            "dph_total": offer["dph_total"],
            "label": body.get("label"),
            "actual_status": "running",
            "start_date": time.time(),
            "ssh_host": "ssh5.vast.example",
            "ssh_port": 20000 + iid % 1000,
            "jupyter_token": "jt-" + secrets.token_hex(12),
            "env": dict(body.get("env") or {}),
            "scoped_key": scoped,
        }
        if self.create_calls in self.drop_creates:
            return DROP
        if self.create_calls in self.no_contract_creates:
            return 200, {"success": True, "instance_api_key": scoped}, None
        return 200, {"success": True, "new_contract": iid, "instance_api_key": scoped}, None

    @staticmethod
    def _view(inst: dict) -> dict:
        # Like vast: extra_env holds the env we sent (so B2 values live in the API's answer).
        view = {k: v for k, v in inst.items() if k not in ("env", "scoped_key")}
        view["extra_env"] = [[k, v] for k, v in inst["env"].items()]
        return view


def make_offers(n: int = 6) -> list[dict]:
    """Offers with distinct machines and a known ranking by reliability * dlperf / dph."""
    offers = []
    for i in range(n):
        offers.append(
            {
                "id": 900 + i,
                "machine_id": 70 + i,
                "gpu_name": "RTX 4090",
                "num_gpus": 1,
                "gpu_ram": 24564,
                "dph_total": round(0.30 + 0.05 * i, 3),
                "reliability": 0.99 - 0.005 * i,
                "dlperf": 60.0,
                "cuda_max_good": 12.4,
                "disk_space": 200.0,
                "min_bid": 0.2,
            }
        )
    return offers
