"""`python -m verl_recipe.doctor`: the image build records the image with it (docker/recipe/Dockerfile), and a
container without the console script runs the checks with it."""

import sys

from . import main

sys.exit(main())
