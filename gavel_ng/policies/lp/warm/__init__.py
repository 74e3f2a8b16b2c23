"""Warm re-solves: one policy solved again and again as jobs come and go (session.py), its max-min LP
kept in HiGHS (warm_lp.py), and when it need not run again (certificate.py)."""
