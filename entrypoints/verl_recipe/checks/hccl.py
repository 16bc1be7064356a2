"""HCCL's two timeouts in the launch environment: each in CANN's range, and link set-up shorter than a collective.

Sources (CANN documentation on hiascend.com):
- HCCL_CONNECT_TIMEOUT: seconds a device waits for its peers' socket links when a communicator is set up; an
  integer in [120, 7200], default 120; HCCL waits 20 s more than the value to spread the reason of a failed set-up
  (CANN 8.5.0 environment variable reference, envref_07_0149).
- HCCL_EXEC_TIMEOUT: seconds a device waits for its peers inside a collective; on A3 an integer in [0, 2147483647],
  default 1836, 0 = never; with HCCL_OP_EXPANSION_MODE=AIV at most 1091, and 0 or more means 1091 (CANN 8.5.0 HCCL
  user guide, hcclug_000074).
- CANN 9.0.0's HCCL user guide (hcclug_000024, environment variables) asks for HCCL_CONNECT_TIMEOUT below
  HCCL_EXEC_TIMEOUT, so that the error reported first is the one that happened first.

Both live in the recipes' launch environment (recipes/_base.yaml `npu_env`), which reaches every worker through
the job's runtime_env; `--set env.NAME=...` and an extra override of the runtime_env variable change them.
"""

from __future__ import annotations

from ..hydra_syntax import unquoted
from .context import Context
from .secrets import ENV_VARS_PATH

CONNECT = "HCCL_CONNECT_TIMEOUT"
EXEC = "HCCL_EXEC_TIMEOUT"
EXPANSION = "HCCL_OP_EXPANSION_MODE"
CONNECT_RANGE = (120, 7200)
CONNECT_GRACE_S = 20  # HCCL's extra wait after HCCL_CONNECT_TIMEOUT, to tell every node why the set-up failed
EXEC_RANGE = (0, 2**31 - 1)  # A3; 0 = a collective never times out
EXEC_DEFAULT_A3 = 1836
EXEC_AIV_MAX = 1091  # with HCCL_OP_EXPANSION_MODE=AIV
_ENV_KEY = ".".join(ENV_VARS_PATH) + "."


def env_value(ctx: Context, name: str) -> str | None:
    """The value the workers get: an extra override of the runtime_env variable, else the launch environment."""
    knobs = ctx.knobs
    if knobs is None:
        return None
    raw = knobs.hydra.get(_ENV_KEY + name)
    if raw is not None:
        return unquoted(str(raw))
    return knobs.env.get(name)


def whole(ctx: Context, name: str, text: str, lo: int, hi: int) -> int | None:
    """`text` as a whole number of seconds in [lo, hi]; one problem naming it otherwise."""
    clean = text.strip()
    if clean.isascii() and clean.isdigit() and len(clean) <= 10 and lo <= int(clean) <= hi:
        return int(clean)
    ctx.add(
        f"env.{name}={text[:40]}",
        f"is not a whole number of seconds in [{lo}, {hi}] (CANN's range for {name})",
        f"set env.{name} to seconds in [{lo}, {hi}]",
    )
    return None


def check(ctx: Context) -> None:
    if ctx.values.get("DEVICE") != "npu":
        return  # HCCL is the NPU's collective library; the CPU stand-ins and GPUs do not read these
    connect_text = env_value(ctx, CONNECT)
    exec_text = env_value(ctx, EXEC)
    connect = whole(ctx, CONNECT, connect_text, *CONNECT_RANGE) if connect_text is not None else None
    exec_s = whole(ctx, EXEC, exec_text, *EXEC_RANGE) if exec_text is not None else EXEC_DEFAULT_A3
    if connect is None or exec_s is None:
        return
    shown = exec_text if exec_text is not None else f"(unset: CANN's default {EXEC_DEFAULT_A3})"
    if (env_value(ctx, EXPANSION) or "").strip().upper() == "AIV" and not 0 < exec_s <= EXEC_AIV_MAX:
        exec_s, shown = EXEC_AIV_MAX, f"{shown} (with {EXPANSION}=AIV: {EXEC_AIV_MAX})"
    if exec_s == 0:
        return  # a collective never times out: nothing can be reported before a link set-up timeout
    if connect + CONNECT_GRACE_S >= exec_s:
        raise_exec = f"env.{EXEC} to at least {connect + CONNECT_GRACE_S + 1}"
        most = exec_s - CONNECT_GRACE_S - 1
        fix = (
            f"set env.{CONNECT} to at most {most}, or {raise_exec}" if most >= CONNECT_RANGE[0] else f"set {raise_exec}"
        )
        ctx.add(
            f"env.{CONNECT}={connect} env.{EXEC}={shown}",
            f"a link set-up may wait {connect + CONNECT_GRACE_S} s ({CONNECT} + {CONNECT_GRACE_S} s), not less than "
            f"a collective may ({exec_s} s); CANN 9.0.0's HCCL guide asks for {CONNECT} below {EXEC} so that the "
            "error reported first is the one that happened first (docs/settings.md, HCCL timeouts)",
            fix,
        )
