"""`python -m matrixrun` is the same as the `matrixrun` console script."""

from matrixrun.cli.main import main

raise SystemExit(main())
