#!/usr/bin/env python3
"""The image tarball's fan-out between hosts: one sender serves one file to one receiver, then exits.

  serve_once.py serve --bind IP --port N --file PATH --token-file PATH [--timeout S]
  serve_once.py fetch --url URL --token-file PATH --dest PATH --sha256 HEX [--timeout S] [--tries N] [--delay S]

The receiver proves itself with a one-time token (`Authorization: Bearer ...`) that deploy.yml made for it on the
control node and wrote to a root-only file on both ends: it is never on a command line, in an argument list Ansible
prints, or in a log. A request without that token gets 403 and counts for nothing, so a stranger on the cluster
network can neither fetch the image nor use up the transfer; only a complete transfer to the token's holder ends the
server. The receiver checks the sha256 the control node took. Python 3.7+, standard library only (the hosts' own
python3).
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import os
import socket
import stat
import sys
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

CHUNK = 1 << 20
# Seconds a connection may make no progress (the receiver's disk, a dead peer) before it is dropped.
IDLE_S = 300


def read_token(path: str) -> str:
    """The token in a file only its owner may read (refused otherwise: a token others can read proves nothing)."""
    st = os.stat(path)
    if st.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise SystemExit(f"serve_once: {path} is readable by others (mode {stat.S_IMODE(st.st_mode):o}); want 0600")
    with open(path, encoding="ascii") as fh:
        token = fh.read().strip()
    if len(token) < 20:
        raise SystemExit(f"serve_once: {path} holds no token (under 20 characters)")
    return token


def serve(args: argparse.Namespace) -> int:
    token = read_token(args.token_file).encode()
    name = "/" + os.path.basename(args.file)
    size = os.path.getsize(args.file)
    done = threading.Event()
    refused = [0]  # requests without the token

    class Handler(BaseHTTPRequestHandler):
        timeout = IDLE_S

        def do_GET(self) -> None:  # noqa: N802 (http.server naming)
            scheme, _, given = self.headers.get("Authorization", "").partition(" ")
            offered = given.strip().encode() if scheme == "Bearer" else b""
            if not hmac.compare_digest(offered, token) or done.is_set():
                refused[0] += 1
                self.send_error(403)
                return
            if self.path != name:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(size))
            self.end_headers()
            try:
                with open(args.file, "rb") as fh:
                    sent = self.connection.sendfile(fh)
            except OSError:  # the receiver went away: not a transfer, it may retry with the same token
                return
            if sent == size:
                done.set()

        def log_message(self, *_: object) -> None:
            return

    server = ThreadingHTTPServer((args.bind, args.port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    ok = done.wait(timeout=args.timeout)
    server.shutdown()
    if not ok:
        print(
            f"serve_once: no complete transfer to the token's holder within {args.timeout} s "
            f"({refused[0]} request(s) refused)",
            file=sys.stderr,
        )
        return 1
    print(f"served {size} bytes once ({refused[0]} request(s) without the token refused)")
    return 0


def fetch_once(args: argparse.Namespace, token: str, part: str) -> str:
    """One download into `part`; returns its sha256 or raises (OSError, urllib.error.URLError)."""
    req = urllib.request.Request(args.url, headers={"Authorization": "Bearer " + token})
    digest = hashlib.sha256()
    with urllib.request.urlopen(req, timeout=IDLE_S) as resp:
        want = int(resp.headers.get("Content-Length", "-1"))
        fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        got = 0
        with os.fdopen(fd, "wb") as out:
            while True:
                chunk = resp.read(CHUNK)
                if not chunk:
                    break
                out.write(chunk)
                digest.update(chunk)
                got += len(chunk)
        if want >= 0 and got != want:
            raise ConnectionError(f"transfer cut short: {got} of {want} bytes")
    return digest.hexdigest()


def fetch(args: argparse.Namespace) -> int:
    token = read_token(args.token_file)
    part = args.dest + ".part"
    deadline = time.monotonic() + args.timeout
    last = ""
    for attempt in range(1, args.tries + 1):
        try:
            got = fetch_once(args, token, part)
        except urllib.error.HTTPError as exc:  # the sender answered: retrying cannot help
            what = "refused this host's token" if exc.code == 403 else f"answered HTTP {exc.code}"
            print(f"serve_once: {args.url}: the sender {what}", file=sys.stderr)
            return 1
        except (OSError, urllib.error.URLError, ConnectionError) as exc:  # not started yet, or cut off
            last = str(getattr(exc, "reason", exc))
            if attempt < args.tries and time.monotonic() + args.delay < deadline:
                time.sleep(args.delay)
                continue
            break
        if got != args.sha256.lower():
            os.unlink(part)
            print(f"serve_once: {args.url}: sha256 {got}, expected {args.sha256}", file=sys.stderr)
            return 1
        os.replace(part, args.dest)
        print(f"received {os.path.getsize(args.dest)} bytes from {args.url}, sha256 verified")
        return 0
    if os.path.exists(part):
        os.unlink(part)
    print(f"serve_once: {args.url}: no transfer after {args.tries} tries: {last}", file=sys.stderr)
    return 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve", help="serve --file to the holder of the token in --token-file, once")
    s.add_argument("--bind", required=True)
    s.add_argument("--port", type=int, required=True)
    s.add_argument("--file", required=True)
    s.add_argument("--token-file", required=True)
    s.add_argument("--timeout", type=int, default=1800, help="give up after this many seconds")
    f = sub.add_parser("fetch", help="download --url with the token in --token-file, check its sha256")
    f.add_argument("--url", required=True)
    f.add_argument("--token-file", required=True)
    f.add_argument("--dest", required=True)
    f.add_argument("--sha256", required=True)
    f.add_argument("--timeout", type=int, default=1800, help="give up after this many seconds")
    f.add_argument("--tries", type=int, default=30, help="connection attempts (the sender may still be starting)")
    f.add_argument("--delay", type=float, default=2.0, help="seconds between attempts")
    args = ap.parse_args(argv)
    socket.setdefaulttimeout(IDLE_S)
    return serve(args) if args.cmd == "serve" else fetch(args)


if __name__ == "__main__":
    sys.exit(main())
