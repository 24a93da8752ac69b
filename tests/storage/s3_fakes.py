"""Test doubles at the network edge: fake credentials and a fault-injecting HTTP proxy."""

from __future__ import annotations

import http.client
import re
import signal
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler

KEY_ID = "AKIDRLHARNESSTEST0001"
APP_KEY = "k0Secret/ApplicationKey+Value42"
_HOP_HEADERS = {"connection", "keep-alive", "transfer-encoding", "te", "upgrade"}


@dataclass
class Fault:
    """Answer matching requests with an S3 error instead of forwarding them."""

    method: str
    path_contains: str
    times: int | None = None  # None: every time
    status: int = 503
    code: str = "ServiceUnavailable"
    echo_credential: bool = False  # put the access key id in the message, like some servers do
    delay_s: float = 0.0  # with status 0: forward after this delay instead of failing
    # Ctrl-C when the request arrives, received by the test's main thread ("main") or by the
    # proxy thread serving it ("proxy"): the kernel may hand a process's SIGINT to any thread.
    interrupt: str | None = None
    hits: int = 0


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]


@dataclass
class FaultProxy:
    upstream: tuple[str, int]
    faults: list[Fault] = field(default_factory=list)
    seen: list[Seen] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    port: int = 0

    def take_fault(self, method: str, path: str) -> Fault | None:
        with self.lock:
            for fault in self.faults:
                if fault.method == method and fault.path_contains in path:
                    if fault.times is None or fault.hits < fault.times:
                        fault.hits += 1
                        return fault
        return None

    def requests(self, method: str, path_contains: str = "") -> list[Seen]:
        with self.lock:
            return [s for s in self.seen if s.method == method and path_contains in s.path]


def proxy_handler(proxy: FaultProxy):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:
            pass

        def _handle(self) -> None:
            if "Transfer-Encoding" in self.headers:
                self.send_error(400, "chunked bodies are not expected")
                return
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            with proxy.lock:
                proxy.seen.append(Seen(self.command, self.path, dict(self.headers.items())))
            fault = proxy.take_fault(self.command, self.path)
            if fault is not None and fault.interrupt is not None:
                receiver = {"main": threading.main_thread().ident, "proxy": threading.get_ident()}
                signal.pthread_kill(receiver[fault.interrupt], signal.SIGINT)
            if fault is not None and fault.status == 0:
                time.sleep(fault.delay_s)
                self._forward(body)
            elif fault is not None:
                self._send_fault(fault)
            else:
                self._forward(body)

        def _send_fault(self, fault: Fault) -> None:
            message = "injected fault"
            if fault.echo_credential:
                match = re.search(r"Credential=([^/]+)/", self.headers.get("Authorization", ""))
                message = f"The key {match.group(1) if match else '?'} is not valid"
            data = (
                f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>{fault.code}</Code>'
                f"<Message>{message}</Message><RequestId>fault</RequestId></Error>"
            ).encode()
            self.send_response(fault.status)
            self.send_header("Content-Type", "application/xml")
            self.send_header("Content-Length", "0" if self.command == "HEAD" else str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)

        def _forward(self, body: bytes) -> None:
            conn = http.client.HTTPConnection(*proxy.upstream, timeout=60)
            headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_HEADERS}
            conn.request(self.command, self.path, body=body, headers=headers)
            response = conn.getresponse()
            data = response.read()
            conn.close()
            self.send_response_only(response.status)
            for name, value in response.getheaders():
                if name.lower() not in _HOP_HEADERS | {"content-length"}:
                    self.send_header(name, value)
            length = response.getheader("Content-Length") if self.command == "HEAD" else None
            self.send_header("Content-Length", length or str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)

        do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _handle

    return Handler
