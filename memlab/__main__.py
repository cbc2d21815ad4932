"""``python -m memlab ...``: the same command line as the `memlab` console script."""

try:
    from memlab.cli import main
except KeyboardInterrupt:  # Ctrl-C while Python imports memlab: the status of any interruption
    raise SystemExit(130) from None

raise SystemExit(main())
