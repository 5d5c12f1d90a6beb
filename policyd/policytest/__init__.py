"""`policyd test`: PolicyTest files run policies against small clusters and check their
verdicts.

A layer of its own above `config` and `engine`: whole-scheduler expectations run the
default profile plus the test's policies (or the profile the test names, built by
`config.loader`) through `schedule_one`, so this cannot live in `policy`, which both of
those import.
"""
