"""``python -m memlab ...``: the same command line as the `memlab` console script."""

from memlab.cli import main

raise SystemExit(main())
