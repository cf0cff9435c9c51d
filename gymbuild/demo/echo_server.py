"""An HTTP echo service: `GET /health` answers 200 once it listens; `POST /echo` returns the JSON it got.

    python3 -m gymbuild.demo.echo_server --port 8765

It stands in for a model server in examples/local.yaml: a `type: command` service whose health check
polls /health, as gymbuild's job does for vLLM.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class EchoHandler(BaseHTTPRequestHandler):
    server_version = "gymbuild-echo/1"

    def _reply(self, status: int, payload: object) -> None:
        body = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        if self.path == "/health":
            self._reply(200, {"status": "ok"})
        else:
            self._reply(404, {"error": f"no {self.path}; try GET /health or POST /echo"})

    def do_POST(self) -> None:
        if self.path != "/echo":
            self._reply(404, {"error": f"no {self.path}; try POST /echo"})
            return
        length = int(self.headers.get("Content-Length") or 0)
        try:
            received = json.loads(self.rfile.read(length) or b"null")
        except json.JSONDecodeError as err:
            self._reply(400, {"error": f"not JSON: {err}"})
            return
        self._reply(200, {"echo": received})

    def log_message(self, format: str, *args: object) -> None:
        # One line per request on stderr, which the job sends to logs/<service>-<job id>.log.
        sys.stderr.write(f"echo_server: {self.address_string()} {format % args}\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default: loopback only)")
    args = parser.parse_args(argv)
    server = ThreadingHTTPServer((args.host, args.port), EchoHandler)
    # TERM (the job stopping its services) ends the server cleanly, with status 0.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print(f"echo_server: listening on http://{args.host}:{args.port}", file=sys.stderr, flush=True)
    try:
        server.serve_forever()
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
