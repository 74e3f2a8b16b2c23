"""An allocation policy as a linear (or convex) program: the Problem a policy states its objective on, its
variables and rows, and solving it cold (solving.py, highs.py); pipeline.py takes a registered name
through it; warm/ keeps the max-min LP alive between solves."""
