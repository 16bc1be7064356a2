#!/usr/bin/env python3
"""Import every module named on the command line for real (not just find it), and report all failures at once.

Usage: import_smoke.py [--hide MODULE ...] MODULE [MODULE ...]      exit 0 when every import works, 1 otherwise.
--hide makes a module unimportable (sys.modules[name] = None, Python's documented way to block an import: `import`
raises ImportError and importlib.util.find_spec returns None), so the packages take their path for "not installed".
The rehearsal on the stand-in base hides torch_npu, which cannot load without CANN's libraries (transformers, verl
and Megatron-Bridge import it whenever it is installed); the A3 build hides nothing.
Run at the end of the NPU runtime stage; docs/image.md says which imports need an Ascend build host.
"""

from __future__ import annotations

import importlib
import sys
import time
import traceback


def main(argv: list[str]) -> int:
    hidden = []
    while len(argv) >= 2 and argv[0] == "--hide":
        hidden.append(argv[1])
        argv = argv[2:]
    if not argv or any(a.startswith("-") for a in argv):
        print("import-smoke: usage: import_smoke.py [--hide MODULE ...] MODULE [MODULE ...]", file=sys.stderr)
        return 2
    for name in hidden:
        sys.modules[name] = None  # type: ignore[assignment]
        print(f"import-smoke: hidden {name} (import raises ImportError, find_spec returns None)")
    failed = []
    for name in argv:
        start = time.monotonic()
        try:
            importlib.import_module(name)
        except BaseException as exc:  # noqa: BLE001 - SystemExit and friends from a module are failures too
            last = traceback.format_exception_only(type(exc), exc)[-1].strip()
            failed.append(name)
            print(f"import-smoke: FAIL {name}: {last}", file=sys.stderr)
        else:
            print(f"import-smoke: ok   {name} ({time.monotonic() - start:.1f} s)")
    if failed:
        print(f"import-smoke: {len(failed)} of {len(argv)} imports failed: {' '.join(failed)}", file=sys.stderr)
        return 1
    print(f"import-smoke: all {len(argv)} imports work" + (f" with {', '.join(hidden)} hidden" if hidden else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
