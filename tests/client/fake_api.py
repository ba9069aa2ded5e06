"""A local HTTP server that answers as the portal's API contract says, from canned replies:
for the client's behaviour over time (a run still evaluating), which a live portal with a
synchronous queue never shows."""

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

# (method, path, query) -> (HTTP status, content type, body)
Answer = Callable[[str, str, dict[str, str]], tuple[int, str, bytes]]


def json_reply(data, code=200) -> tuple[int, str, bytes]:
    return code, "application/json", json.dumps(data).encode()


NOT_FOUND = json_reply({"detail": "Not found."}, 404)


class FakeApi:
    """Serves `answer` on 127.0.0.1 (`url`); records each request as (method, path, query)."""

    def __init__(self, answer: Answer):
        fake = self
        self.requests: list[tuple[str, str, dict[str, str]]] = []

        class Handler(BaseHTTPRequestHandler):
            def _answer(self, method):
                url = urlsplit(self.path)
                query = {k: v[0] for k, v in parse_qs(url.query).items()}
                length = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(length)
                fake.requests.append((method, url.path, query))
                code, kind, body = answer(method, url.path, query)
                self.send_response(code)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                self._answer("GET")

            def do_POST(self):
                self._answer("POST")

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
