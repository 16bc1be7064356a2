"""Headless Chromium (Debian's `chromium` package) for the page tests: the DOM after the page's script ran, a
screenshot, and a small PNG reader to check pixel colours. Every run gets a fresh profile and no network."""

from __future__ import annotations

import html
import json
import re
import shutil
import struct
import subprocess
import sys
import zlib
from pathlib import Path
from typing import Any

CANDIDATES = ("chromium", "chromium-browser", "google-chrome")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--hide-scrollbars",
    "--force-device-scale-factor=1",
    "--mute-audio",
)

# Appended to a copy of the page, after the page's own script: measures what is drawn and writes it into the DOM,
# then clicks the first failing die so the details panel is in the dump too. A test's own measuring lines (with
# `out`, `rect` and `bg` in scope) go where /*EXTRA*/ is, before that click.
MEASURE_JS = r"""
<script>
(function(){
  function rect(e){ var r = e.getBoundingClientRect(); return [r.left, r.top, r.width, r.height]; }
  function bg(e){ return getComputedStyle(e).backgroundColor; }
  var out = {viewport: [window.innerWidth, window.innerHeight],
             doc: [document.documentElement.scrollWidth, document.documentElement.scrollHeight],
             ready: document.body.getAttribute('data-ready')};
  out.boxes = Array.prototype.map.call(document.querySelectorAll('header.top, section'), function(s){
    return {id: s.id || s.className, sw: s.scrollWidth, cw: s.clientWidth, right: s.getBoundingClientRect().right};
  });
  out.cells = Array.prototype.map.call(document.querySelectorAll('#dies .cell'), function(c){
    return {host: c.dataset.host, die: +c.dataset.die, status: c.dataset.status, bg: bg(c), rect: rect(c)};
  });
  out.pairs = Array.prototype.map.call(document.querySelectorAll('#pairs .cell[data-from]'), function(c){
    return {from: c.dataset.from, to: c.dataset.to, status: c.dataset.status, bg: bg(c), text: c.textContent};
  });
  out.badges = Array.prototype.map.call(document.querySelectorAll('#hosts .badge[data-check]'), function(b){
    return {host: b.dataset.host || '*', check: b.dataset.check, status: b.dataset.status, bg: bg(b)};
  });
  out.labels = Array.prototype.map.call(
    document.querySelectorAll('.rowh, .colh, .badge, table.badges th, .legend span, .card, h1, h2, .meta td'),
    function(e){ return {text: e.textContent.slice(0, 40), cls: e.className,
                         px: parseFloat(getComputedStyle(e).fontSize), sw: e.scrollWidth, cw: e.clientWidth,
                         vis: e.getClientRects().length > 0}; });
  /*EXTRA*/
  var bad = document.querySelector('#dies .cell[data-status=fail]');
  if (bad) {
    bad.click();
    var d = document.getElementById('details');
    out.panel = {key: d.getAttribute('data-key'), text: d.innerText, display: getComputedStyle(d).display,
                 rect: rect(d)};
  }
  var pre = document.createElement('pre'); pre.id = 'measure'; pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
</script>
"""


def find() -> str | None:
    for name in CANDIDATES:
        path = shutil.which(name)
        if path:
            return path
    return None


def _run(binary: str, profile: Path, args: list[str], timeout: int = 120) -> subprocess.CompletedProcess[str]:
    argv = [binary, *FLAGS, f"--user-data-dir={profile}", *args]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    assert proc.returncode == 0, f"{' '.join(argv)} exited {proc.returncode}: {proc.stderr[-2000:]}"
    return proc


def measure(binary: str, page: Path, work: Path, width: int, height: int, extra: str = "") -> dict[str, Any]:
    """Load a copy of the page with MEASURE_JS (and `extra` lines in it) from a file:// URL; return what the script
    measured."""
    text = page.read_text(encoding="utf-8")
    assert text.count("</body>") == 1
    probe = work / f"{page.stem}-measure-{width}.html"
    probe.write_text(text.replace("</body>", MEASURE_JS.replace("/*EXTRA*/", extra) + "</body>"), encoding="utf-8")
    proc = _run(binary, work / f"profile-m{width}", [f"--window-size={width},{height}", "--dump-dom", probe.as_uri()])
    m = re.search(r'<pre id="measure">(.*?)</pre>', proc.stdout, re.S)
    assert m, f"the measuring script did not run; DOM tail: {proc.stdout[-1500:]}"
    data: dict[str, Any] = json.loads(html.unescape(m.group(1)))
    return data


def screenshot(binary: str, page: Path, out: Path, width: int, height: int) -> Path:
    _run(
        binary,
        out.parent / f"profile-s{width}",
        [f"--window-size={width},{height}", f"--screenshot={out}", page.as_uri()],
    )
    assert out.is_file(), f"no screenshot written to {out}"
    return out


def find_or_say() -> str | None:
    """The browser for a picture-making command, or None after one line saying how to install it."""
    binary = find()
    if not binary:
        print("error: chromium is not installed; apt-get install -y chromium (scripts/host-deps.sh)", file=sys.stderr)
    return binary


def keep(shot: Path, out: Path) -> None:
    """A screenshot taken in a temporary folder, copied to where it was asked for; its size said."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(shot.read_bytes())
    print(f"{out}: {out.stat().st_size // 1024} KiB")


def read_png(path: Path, max_rows: int | None = None) -> tuple[int, int, list[bytes]]:
    """(width, height, rows of RGB bytes) of an 8-bit RGB or RGBA, non-interlaced PNG (what Chromium writes);
    only the first max_rows rows are decoded when given."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    pos, idat, ihdr = 8, b"", b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind = data[pos + 4 : pos + 8]
        body = data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            ihdr = body
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", ihdr)
    assert depth == 8 and color in (2, 6) and interlace == 0, f"unsupported PNG: depth {depth}, colour type {color}"
    bpp = 3 if color == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows: list[bytes] = []
    prev = bytearray(stride)
    i = 0
    for _ in range(min(height, max_rows or height)):
        ftype = raw[i]
        line = bytearray(raw[i + 1 : i + 1 + stride])
        i += 1 + stride
        for x in range(stride):
            a = line[x - bpp] if x >= bpp else 0
            b = prev[x]
            c = prev[x - bpp] if x >= bpp else 0
            if ftype == 1:
                line[x] = (line[x] + a) & 0xFF
            elif ftype == 2:
                line[x] = (line[x] + b) & 0xFF
            elif ftype == 3:
                line[x] = (line[x] + (a + b) // 2) & 0xFF
            elif ftype == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
        prev = line
        rows.append(bytes(line) if bpp == 3 else bytes(v for k, v in enumerate(line) if k % 4 != 3))
    return width, height, rows


def pixel(rows: list[bytes], x: int, y: int) -> tuple[int, int, int]:
    r = rows[y]
    return r[3 * x], r[3 * x + 1], r[3 * x + 2]
