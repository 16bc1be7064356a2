# STAND-IN (docker/npu-standin): sets what CANN's toolkit set_env.sh sets that the build depends on; no CANN here.
# ASCEND_TOOLKIT_HOME: kept from the image's ENV (the real file sets the same value).
export ASCEND_HOME_PATH="${ASCEND_TOOLKIT_HOME}"
export ASCEND_OPP_PATH="${ASCEND_TOOLKIT_HOME}/opp"
export ASCEND_AICPU_PATH="${ASCEND_TOOLKIT_HOME}"
export TOOLCHAIN_HOME="${ASCEND_TOOLKIT_HOME}/toolkit"
export LD_LIBRARY_PATH="${ASCEND_TOOLKIT_HOME}/lib64${LD_LIBRARY_PATH:+:${LD_LIBRARY_PATH}}"
export PYTHONPATH="${ASCEND_TOOLKIT_HOME}/python/site-packages:${ASCEND_TOOLKIT_HOME}/opp/built-in/op_impl/ai_core/tbe${PYTHONPATH:+:${PYTHONPATH}}"
# CANN's directories go in front of PATH, as the real file does.
export PATH="${ASCEND_TOOLKIT_HOME}/bin:${ASCEND_TOOLKIT_HOME}/tools/ccec_compiler/bin:${PATH}"
export VERL_RECIPE_STANDIN_TOOLKIT_ENV=1
