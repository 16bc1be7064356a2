# STAND-IN (docker/npu-standin): NNAL/ATB set_env.sh; no NNAL here.
export ATB_HOME_PATH=/usr/local/Ascend/nnal/atb/latest/atb/cxx_abi_1
export LD_LIBRARY_PATH="${ATB_HOME_PATH}/lib${LD_LIBRARY_PATH:+:${LD_LIBRARY_PATH}}"
export VERL_RECIPE_STANDIN_NNAL_ENV=1
