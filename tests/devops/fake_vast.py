"""A fake vast.ai server on 127.0.0.1 (random port) that speaks the endpoints we use and
records every request. Each created instance gets its own scoped key, like vast's
CONTAINER_API_KEY, which may only read or destroy that one instance."""

from __future__ import annotations

import json
import secrets
import threading
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Recorded:
    method: str
    path: str
    query: dict
    headers: dict
    body: object
    raw_body: str


@dataclass
class FakeVast:
    api_key: str
    offers: list[dict]
    apply_filters: bool = True  # False: return every offer (checks our local filtering)
    fail_creates: set[int] = field(default_factory=set)  # 1-based create calls that fail 500
    gone_offers: set[int] = field(default_factory=set)  # offers answering 410 no_such_ask
    echo_auth_in_errors: bool = False  # a hostile server echoing the key back in errors
    transient: list[int] = field(default_factory=list)  # statuses for the next requests
    requests: list[Recorded] = field(default_factory=list)
    instances: dict[int, dict] = field(default_factory=dict)
    deleted: list[tuple[int, str]] = field(default_factory=list)  # (id, "main" | "scoped")
    ssh_keys: dict[int, list[str]] = field(default_factory=dict)
    logs: dict[int, str] = field(default_factory=dict)
    create_calls: int = 0
    _next_id: int = 5001

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
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
        with self._lock:
            self.requests.append(
                Recorded(h.command, parsed.path, query, dict(h.headers.items()), body, raw)
            )
            status, payload, text = self._route(h.command, parsed.path, query, body, h.headers)
        data = (text if text is not None else json.dumps(payload)).encode("utf-8")
        h.send_response(status)
        h.send_header("Content-Type", "text/plain" if text is not None else "application/json")
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)

    def _who(self, headers) -> str | None:
        auth = headers.get("Authorization", "")
        token = auth.removeprefix("Bearer ").strip() if auth.startswith("Bearer ") else ""
        if token == self.api_key:
            return "main"
        for iid, inst in self.instances.items():
            if token and token == inst["scoped_key"]:
                return f"scoped:{iid}"
        return None

    def _route(self, method: str, path: str, query: dict, body, headers):
        if self.transient:
            return self.transient.pop(0), {"success": False, "error": "busy"}, None
        if method == "GET" and path.startswith("/logs/"):
            iid = int(path.removeprefix("/logs/").removesuffix(".log"))
            return 200, None, self.logs.get(iid, f"log of {iid}\n")
        if method == "GET" and path == "/api/v0/bundles/":
            return 200, {"offers": self._search(json.loads(query.get("q", "{}")))}, None
        who = self._who(headers)
        if who is None:
            msg = "invalid api key"
            if self.echo_auth_in_errors:
                msg += f": got {headers.get('Authorization')}"
            return 401, {"success": False, "error": "auth", "msg": msg}, None
        parts = [p for p in path.split("/") if p]  # api v0 ...
        if who.startswith("scoped:"):
            own = int(who.split(":")[1])
            allowed = parts[:3] == ["api", "v0", "instances"] and parts[3:] == [str(own)]
            if not (allowed and method in ("GET", "DELETE")):
                return 403, {"success": False, "error": "scope", "msg": "not your instance"}, None
        if method == "PUT" and parts[:3] == ["api", "v0", "asks"]:
            return self._create(int(parts[3]), body)
        if parts[:3] == ["api", "v0", "instances"]:
            rest = parts[3:]
            if method == "GET" and not rest:
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
                return 404, {"success": False, "error": "no_such_instance"}, None
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
            msg = f"no_such_ask Instance type {offer_id} is no longer available."
            return 410, {"success": False, "error": "no_such_ask", "msg": msg}, None
        iid = self._next_id
        self._next_id += 1
        self.instances[iid] = {
            "id": iid,
            "offer_id": offer_id,
            "machine_id": offer["machine_id"],
            "gpu_name": offer["gpu_name"],
            "num_gpus": offer["num_gpus"],
            "dph_total": offer["dph_total"],
            "label": body.get("label"),
            "actual_status": "running",
            "ssh_host": "ssh5.vast.example",
            "ssh_port": 20000 + iid % 1000,
            "env": dict(body.get("env") or {}),
            "scoped_key": "ck-" + secrets.token_hex(16),
        }
        return 200, {"success": True, "new_contract": iid}, None

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
