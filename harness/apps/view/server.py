"""The viewer's HTTP server: the standard library's ``ThreadingHTTPServer``, GET and HEAD only, read-only.

Routes (a node id is one path segment, percent-encoded)::

    /                                   the cycles
    /cycle/<cycle>                      a cycle's items, failed first
    /cycle/<cycle>/item/<nodeid>        an item: its inputs and reference answer, every attempt, the diffs
    /cycle/<cycle>/traces               the cycle's execution trace, when there is one
    /plots, /plots/<name>.png           the plots ``harness plot`` wrote to tracking/plots

Anything else is a 404 page. Every page passes the redaction filter, as every report does, and goes out with a
Content-Security-Policy that allows no script at all, styles only inline and images only from the viewer itself.
"""

from __future__ import annotations

import socket
import sys
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

from harness.apps.view.pages import Pages
from harness.base.redaction import redact

# No script from anywhere (none inline either), styles inline, images from the viewer (and the empty data: icon);
# nothing may frame it.
CSP = ("default-src 'none'; img-src 'self' data:; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'; "
       "frame-ancestors 'none'")
HEADERS = {"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer",
           "Cache-Control": "no-store", "X-Frame-Options": "DENY"}


class ViewServer(ThreadingHTTPServer):
    """A viewer of one work folder's records; ``serve_forever()`` serves it until ``shutdown()``."""

    daemon_threads = True

    def __init__(self, pages: Pages, host: str = "127.0.0.1", port: int = 8765):
        self.pages = pages
        self.address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
        super().__init__((host, port), ViewHandler)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://[{host}]:{port}/" if ":" in str(host) else f"http://{host}:{port}/"


def make_server(work_dir: Path, *, host: str = "127.0.0.1", port: int = 8765,
                tracking_dir: Path = Path("tracking")) -> ViewServer:
    """A viewer bound to ``host:port`` (port 0: any free one; :attr:`ViewServer.url` says which)."""
    return ViewServer(Pages(work_dir, tracking_dir), host, port)


class ViewHandler(BaseHTTPRequestHandler):
    server: ViewServer
    server_version = "harness-view"
    sys_version = ""

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        self._answer(body=True)

    def do_HEAD(self) -> None:  # noqa: N802
        self._answer(body=False)

    def _answer(self, *, body: bool) -> None:
        try:
            status, content_type, data = self._route(urlsplit(self.path).path)
        except Exception as exc:  # a record that cannot be read: one line on the page and on stderr
            message = f"could not read the records: {type(exc).__name__}: {exc}"
            print(redact(f"harness view: {self.path}: {message}"), file=sys.stderr)
            status, content_type = HTTPStatus.INTERNAL_SERVER_ERROR, "text/html; charset=utf-8"
            data = self._html(self.server.pages.error(message))
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        for name, value in HEADERS.items():
            self.send_header(name, value)
        self.end_headers()
        if body:
            self.wfile.write(data)

    def _route(self, path: str) -> tuple[HTTPStatus, str, bytes]:
        pages = self.server.pages
        parts = [unquote(part) for part in path.strip("/").split("/")] if path.strip("/") else []
        page: str | None = None
        match parts:
            case []:
                page = pages.cycles()
            case ["cycle", cycle]:
                page = pages.cycle(cycle)
            case ["cycle", cycle, "item", nodeid]:
                page = pages.item(cycle, nodeid)
            case ["cycle", cycle, "traces"]:
                page = pages.traces(cycle)
            case ["plots"]:
                page = pages.plots()
            case ["plots", name]:
                plot = pages.plot_file(name)
                if plot is not None:
                    return HTTPStatus.OK, "image/png", plot.read_bytes()
        if page is None:
            return HTTPStatus.NOT_FOUND, "text/html; charset=utf-8", self._html(pages.not_found(unquote(path)))
        return HTTPStatus.OK, "text/html; charset=utf-8", self._html(page)

    @staticmethod
    def _html(page: str) -> bytes:
        return redact(page).encode("utf-8")

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (http.server's name)
        """Quiet: a local viewer prints no line per request."""
