#!/usr/bin/env python3
"""`make base-digest`: read the CANN base image's digest from its registry and record it in docker/versions.yaml.

The digest is asked of the registry (OCI distribution API: HEAD /v2/<repo>/manifests/<tag>, anonymous bearer
token when challenged) and written to base.cann.digest (SOC=a3) or base.cann.digest_a2. Where the registry cannot
be reached the command says so and exits 1: a digest is never guessed. When a digest is already recorded and the
registry now answers another one, the tag has moved: that is reported and nothing is written unless --update.
Stdlib + PyYAML only; TLS is verified.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import yaml

ACCEPT = ", ".join(
    [
        "application/vnd.oci.image.index.v1+json",
        "application/vnd.docker.distribution.manifest.list.v2+json",
        "application/vnd.oci.image.manifest.v1+json",
        "application/vnd.docker.distribution.manifest.v2+json",
    ]
)
DIGEST_RE = re.compile(r"^sha256:[0-9a-f]{64}$")


class DigestError(Exception):
    pass


def split_image(image: str) -> tuple[str, str]:
    """'registry.example/ns/repo' -> ('https://registry.example', 'ns/repo'); Docker Hub names get its host."""
    first, _, rest = image.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        return f"https://{first}", rest
    repo = image if "/" in image else f"library/{image}"
    return "https://registry-1.docker.io", repo


def bearer_token(challenge: str, timeout: float) -> str:
    params = dict(re.findall(r'(\w+)="([^"]*)"', challenge))
    realm = params.pop("realm", "")
    if not realm:
        raise DigestError(f"registry asked for auth without a realm: {challenge!r}")
    url = realm + "?" + urllib.parse.urlencode(params)
    with urllib.request.urlopen(url, timeout=timeout) as resp:  # noqa: S310 - https realm named by the registry
        data = json.load(resp)
    token = data.get("token") or data.get("access_token")
    if not token:
        raise DigestError(f"no token from {realm}")
    return str(token)


def fetch_digest(base_url: str, repo: str, tag: str, timeout: float = 20.0) -> str:
    url = f"{base_url}/v2/{repo}/manifests/{tag}"
    headers = {"Accept": ACCEPT}
    for attempt in range(2):
        req = urllib.request.Request(url, method="HEAD", headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310
                digest = str(resp.headers.get("Docker-Content-Digest", ""))
                if not DIGEST_RE.match(digest):
                    raise DigestError(f"{url}: the registry sent no usable Docker-Content-Digest ({digest!r})")
                return digest
        except urllib.error.HTTPError as exc:
            challenge = exc.headers.get("WWW-Authenticate", "") if exc.headers else ""
            if exc.code == 401 and attempt == 0 and challenge.lower().startswith("bearer"):
                headers["Authorization"] = f"Bearer {bearer_token(challenge, timeout)}"
                continue
            raise DigestError(f"{url}: HTTP {exc.code}") from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise DigestError(f"{base_url} is not reachable from here ({reason})") from None
    raise DigestError(f"{url}: authentication failed")


def record(manifest: Path, key: str, digest: str) -> None:
    """Replace the one `key: "..."` line of base.cann in place, keeping the file's comments and layout."""
    text = manifest.read_text()
    pattern = re.compile(rf'^(\s+{re.escape(key)}:\s*)"[^"\n]*"', re.MULTILINE)
    new, count = pattern.subn(lambda m: f'{m.group(1)}"{digest}"', text)
    if count != 1:
        raise DigestError(f"{manifest}: expected one `{key}:` line under base.cann, found {count}")
    manifest.write_text(new)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="base-digest", description=__doc__)
    p.add_argument("--manifest", default=str(Path(__file__).resolve().parents[1] / "versions.yaml"))
    p.add_argument("--soc", default="a3")
    p.add_argument("--update", action="store_true", help="replace a recorded digest that no longer matches")
    p.add_argument("--registry-url", default="", help=argparse.SUPPRESS)  # tests: a loopback registry
    a = p.parse_args(argv)
    manifest = Path(a.manifest)
    data = yaml.safe_load(manifest.read_text())
    cann = data["base"]["cann"]
    suffix = "" if a.soc == "a3" else f"_{a.soc}"
    if f"tag{suffix}" not in cann:
        print(f"base-digest: SOC={a.soc!r} has no base.cann.tag{suffix} in {manifest}: use a3 or a2", file=sys.stderr)
        return 2
    tag, key = cann[f"tag{suffix}"], f"digest{suffix}"
    base_url, repo = split_image(cann["image"])
    if a.registry_url:
        base_url = a.registry_url.rstrip("/")
    try:
        digest = fetch_digest(base_url, repo, tag)
    except DigestError as exc:
        print(
            f"base-digest: {cann['image']}:{tag}: {exc}; digest left as recorded ({cann.get(key)!r})", file=sys.stderr
        )
        print(
            "base-digest: run `make base-digest` on a host that reaches the registry and commit the result",
            file=sys.stderr,
        )
        return 1
    old = str(cann.get(key) or "")
    if old == digest:
        print(f"base-digest: {cann['image']}:{tag} is still {digest}")
        return 0
    if old and not a.update:
        print(
            f"base-digest: {cann['image']}:{tag} moved: recorded {old}, registry now {digest}; "
            "check the new image, then rerun with --update (make base-digest BASE_DIGEST_UPDATE=1)",
            file=sys.stderr,
        )
        return 1
    record(manifest, key, digest)
    print(f"base-digest: recorded {cann['image']}:{tag}@{digest} as base.cann.{key} in {manifest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
