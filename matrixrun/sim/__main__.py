"""`python -m matrixrun.sim ...`: see `matrixrun.sim.cli`."""

import sys

from matrixrun.sim.cli import main

sys.exit(main())
