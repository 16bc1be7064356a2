# STAND-IN (docker/npu-standin): CANN's ascendnpu-ir set_env.sh; no CANN here.
export VERL_RECIPE_STANDIN_ASCENDNPU_IR_ENV=1
