# shellcheck shell=bash
# Sourced at the start of every build-stage RUN of docker/npu/Dockerfile that runs Python (after the venv exists).
# Each line fixes a stop that a replay of the build on the CANN base reached:
# - CANN's set_env.sh files (cann-env.sh), as the base image's ENTRYPOINT would have sourced them;
# - the venv first on PATH, after CANN's own PATH entries: vllm-ascend's setup.py runs `python3 -m pip show
#   torch-npu` and Megatron-LM's setup.py runs `python3 -m pybind11 --includes` with whatever python3 comes first,
#   and vllm-ascend's CMakeLists needs cmake >= 3.26 (the lock's cmake, not the base's apt cmake 3.22);
# - torch_npu registers itself as a torch backend that every `import torch` auto-loads, and it needs the driver's
#   libascend_hal.so, which a build host does not have: auto-load is switched off, and CANN's devlib directory
#   (the stub libascend_hal.so; vllm-ascend's Dockerfile.a3 does the same) goes on LD_LIBRARY_PATH.
# shellcheck source=docker/npu/cann-env.sh
. /build/npu/cann-env.sh || return 1
build_env_arch="$(uname -m)"
build_env_devlib="${ASCEND_TOOLKIT_HOME}/${build_env_arch}-linux/devlib/linux/${build_env_arch}"
if [ -d "${build_env_devlib}" ]; then
  export LD_LIBRARY_PATH="${build_env_devlib}${LD_LIBRARY_PATH:+:${LD_LIBRARY_PATH}}"
else
  echo "build-env: note: ${build_env_devlib} does not exist; relying on TORCH_DEVICE_BACKEND_AUTOLOAD=0" >&2
fi
unset build_env_arch build_env_devlib
export TORCH_DEVICE_BACKEND_AUTOLOAD=0
if [ ! -x /opt/venv/bin/python3 ]; then
  echo "build-env: /opt/venv/bin/python3 is missing: create the venv before sourcing build-env.sh" >&2
  return 1
fi
export VIRTUAL_ENV=/opt/venv
export PATH="/opt/venv/bin:${PATH}"
hash -r
export PIP_CERT=/build/ca.crt PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
