"""A JSON-over-HTTP server on 127.0.0.1 for the provider stand-ins (one route, POST only).

The stand-ins (`OpenAIStub`, `AnthropicStub`) hold the provider's rules; this holds the socket: a
threaded server whose handler decodes the body, passes it to the owner's `handle`, and
writes the JSON answer back with HTTP/1.1 keep-alive, as the provider SDKs expect.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["JsonRoute"]

Handle = "Callable[[dict[str, Any]], tuple[int, dict[str, Any]]]"


class JsonRoute:
    """Serve `handle` at `path` from a daemon thread until `close`.

    Args:
        path: The one route answered (for example ``/v1/messages``); others get 404.
        handle: Decoded body in, HTTP status and JSON body out.
        bad_json: The error body for a request that is not JSON.
        name: The serving thread's name.
    """

    def __init__(
        self,
        path: str,
        handle: Callable[[dict[str, Any]], tuple[int, dict[str, Any]]],
        *,
        bad_json: Callable[[str], dict[str, Any]],
        name: str,
    ) -> None:
        """Open the port (any free one) and start serving."""
        self.path = path.rstrip("/")
        self.handle = handle
        self.bad_json = bad_json
        self._server = _Server(self)
        self._thread = threading.Thread(target=self._server.serve_forever, name=name, daemon=True)
        self._thread.start()

    @property
    def origin(self) -> str:
        """``http://127.0.0.1:PORT``."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def close(self) -> None:
        """Stop serving and release the port."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, route: JsonRoute) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)  # port 0: any free port
        self.route = route


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body go out in two writes: without TCP_NODELAY, Nagle's algorithm holds
    # the body until the client's delayed ACK (~40 ms on Linux), on every request.
    disable_nagle_algorithm = True

    def do_POST(self) -> None:
        route = cast("_Server", self.server).route
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path.split("?")[0].rstrip("/") != route.path:
            self._send(404, {"error": {"message": f"No route {self.path}"}})
            return
        try:
            body = json.loads(raw)
        except json.JSONDecodeError as exc:
            self._send(400, route.bad_json(f"Invalid JSON body: {exc}"))
            return
        self._send(*route.handle(body))

    def _send(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload, ensure_ascii=False).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - base API
        """Keep quiet: the stubs' records say what happened."""
