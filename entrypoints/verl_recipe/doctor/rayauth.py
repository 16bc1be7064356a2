"""Ray token authentication: this container's token settings, and whether the cluster at HEAD_ADDR demands one."""

from __future__ import annotations

import json

from ..topology import RAY_DASHBOARD_PORT
from .findings import Finding


def _http_status(url: str, token: str, timeout_s: float) -> int:
    """HTTP status of a GET (no proxy: the cluster address is local), with a bearer token when one is given."""
    import urllib.error
    import urllib.request

    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with opener.open(req, timeout=timeout_s) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def check_ray_auth(env: dict[str, str], timeout_s: float = 3.0) -> list[Finding]:
    """Whether this container talks to Ray with a token, and whether the cluster it can reach demands one.

    The cluster side goes through the head's dashboard: its authentication mode, then the job API once without
    a token (must be 401) and once with this host's token (must be 200; 403 = the cluster runs with another one).
    """
    from ..cluster.raynode import auth_problem, read_token

    head = env.get("HEAD_ADDR", "")
    if not head:
        return [
            Finding(
                "ray-auth",
                "warn",
                "HEAD_ADDR not set: no cluster in this environment, Ray authentication not checked",
                "run it on a deployed host: docker compose run --rm doctor",
            )
        ]
    out: list[Finding] = []
    token = ""
    problem = auth_problem(env)
    if problem:
        detail, _, fix = problem.partition("; fix: ")
        out.append(Finding("ray-auth:client", "fail", detail, fix or "start it through compose.yaml"))
    else:
        path = env["RAY_AUTH_TOKEN_PATH"]
        token = read_token(path)
        out.append(Finding("ray-auth:client", "ok", f"RAY_AUTH_MODE=token, token file {path}"))
    port = env.get("RAY_DASHBOARD_PORT") or str(RAY_DASHBOARD_PORT)
    base = f"http://{head}:{port}"
    try:
        import urllib.request

        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(f"{base}/api/authentication_mode", timeout=timeout_s) as resp:
            mode = str(json.loads(resp.read())["authentication_mode"])
        anonymous = _http_status(f"{base}/api/jobs/", "", timeout_s)
        mine = _http_status(f"{base}/api/jobs/", token, timeout_s) if token else None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        out.append(
            Finding(
                "ray-auth:cluster",
                "warn",
                f"the head's dashboard {base} does not answer ({exc}): cannot tell whether the cluster demands a token",
                "start ray-head on the head host (docker compose up -d ray-head) and run doctor again",
            )
        )
        return out
    redeploy = "re-run deploy.yml: it starts every node with RAY_AUTH_MODE=token and the cluster's token"
    if mode != "token" or anonymous != 401:
        out.append(
            Finding(
                "ray-auth:cluster",
                "fail",
                f"authentication OFF: the cluster at {base} runs with mode {mode!r} and its job API answers "
                f"{anonymous} without a token, so anyone who reaches its ports can run code on every node",
                redeploy,
            )
        )
    elif mine == 403:
        out.append(
            Finding(
                "ray-auth:cluster",
                "fail",
                f"authentication on, but the cluster at {base} refuses this host's token (403)",
                "re-run deploy.yml: it installs the cluster's one token on every host and restarts what changed",
            )
        )
    elif mine is not None and mine != 200:
        out.append(
            Finding("ray-auth:cluster", "warn", f"authentication on; the job API answered {mine} with this token")
        )
    else:
        shown = "401 without a token" + (", 200 with this host's" if mine == 200 else "")
        out.append(Finding("ray-auth:cluster", "ok", f"authentication on: {base} demands a token (job API: {shown})"))
    return out
