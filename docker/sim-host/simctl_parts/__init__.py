"""The parts of the simulated cluster's controller (simctl.py, its command line), each importing only the ones
before it: common -> cluster -> inventory -> lifecycle -> power. They import the A3 facts as `a3facts` from
tools/ (a link to entrypoints/verl_recipe/a3facts.py), which simctl.py puts on the path."""
