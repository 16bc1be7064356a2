#!/usr/bin/env python3
"""Serve one file over HTTP to a fixed number of downloaders, then exit (image tarball fan-out between hosts).

Bound to the cluster address only; every other path gets 404; the receiver verifies the sha256 it expects.
"""

import argparse
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bind", required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--file", required=True)
    ap.add_argument("--count", type=int, default=1, help="complete downloads to serve before exiting")
    ap.add_argument("--timeout", type=int, default=1800, help="give up after this many seconds")
    args = ap.parse_args()
    name = "/" + os.path.basename(args.file)
    size = os.path.getsize(args.file)
    done = threading.Semaphore(0)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server naming)
            if self.path != name:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(size))
            self.end_headers()
            with open(args.file, "rb") as fh:
                self.connection.sendfile(fh)
            done.release()

        def log_message(self, *_: object) -> None:
            return

    server = ThreadingHTTPServer((args.bind, args.port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    for _ in range(args.count):
        if not done.acquire(timeout=args.timeout):
            print(f"timed out after {args.timeout} s waiting for downloads", file=sys.stderr)
            server.shutdown()
            return 1
    server.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
