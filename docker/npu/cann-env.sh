# shellcheck shell=bash
# Sourced, never run: CANN's environment, exactly as the CANN base image's ENTRYPOINT sets it up
# (Ascend/cann-container-image, cann/9.0.0-a3-ubuntu22.04-py3.11/Dockerfile: it sources these three set_env.sh files,
# then `exec "$@"`). `docker build` never runs an ENTRYPOINT, so every build step that needs CANN sources this file.
# ASCEND_TOOLKIT_HOME comes from the base image's ENV (/usr/local/Ascend/cann-<version>).
if [ -z "${ASCEND_TOOLKIT_HOME:-}" ]; then
  echo "cann-env: ASCEND_TOOLKIT_HOME is not set: CANN_IMAGE is not a CANN base image (see docs/image.md)" >&2
  return 1
fi
for cann_env_file in /usr/local/Ascend/ascend-toolkit/set_env.sh \
    "${ASCEND_TOOLKIT_HOME}/share/info/ascendnpu-ir/bin/set_env.sh" \
    /usr/local/Ascend/nnal/atb/set_env.sh; do
  if [ ! -f "${cann_env_file}" ]; then
    echo "cann-env: ${cann_env_file} is missing: CANN_IMAGE is not a CANN toolkit+NNAL base image (see docs/image.md)" >&2
    return 1
  fi
  # shellcheck disable=SC1090
  . "${cann_env_file}" || { echo "cann-env: sourcing ${cann_env_file} failed" >&2; return 1; }
done
unset cann_env_file
# set_env.sh prepends CANN's directories to PATH: the image's venv (VIRTUAL_ENV, set by docker/npu/Dockerfile) goes
# back in front, so `python3`, `pip` and `verl-recipe` stay the venv's.
if [ -n "${VIRTUAL_ENV:-}" ]; then
  export PATH="${VIRTUAL_ENV}/bin:${PATH}"
fi
