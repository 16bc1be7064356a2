# The aarch64 half of an A3 build host, rehearsed under qemu user-mode emulation (scripts/rehearse_arm64.sh): an
# arm64 Debian from debootstrap (cached in .cache/arm64), a fresh clone of HEAD, `make venv`, validate, plan and the
# NPU lock's wheels for aarch64. Not in CI: tens of minutes and about 4 GB from PyPI.
# ARM64_OVERLAY: working-tree files copied over the clone, to rehearse changes not committed yet.
ARM64_OVERLAY ?=

.PHONY: rehearse-arm64
rehearse-arm64: venv ### Rehearse make venv, validate, plan, the NPU lock on arm64 Debian under qemu (not in CI; slow)
	ARM64_OVERLAY="$(ARM64_OVERLAY)" bash scripts/rehearse_arm64.sh
