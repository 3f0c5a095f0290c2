"""An HTTP server that only records: where hostile PR code tries to send tunebot's push.

It answers every request with 401 and a Basic challenge, so a git client holding a
credential would hand it over; the test then asserts that nothing arrived here.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]


class Trap:
    def __init__(self) -> None:
        self.seen: list[Seen] = []
        trap = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def _serve(self) -> None:
                trap.seen.append(Seen(self.command, self.path, dict(self.headers.items())))
                self.send_response(401)
                self.send_header("WWW-Authenticate", 'Basic realm="trap"')
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
