"""The engine benchmark's parts: workloads (nodes and pods), node churn, the report.

`bench.engine_bench` is the command; these modules are split out so the pure parts
(shape generator, heartbeat schedule, table) can be unit-tested without running it.
"""
