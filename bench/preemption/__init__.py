"""The preemption benchmark's pieces (bench/preemption_bench.py): the cluster shapes
both measurements share, the engine-only measurement and the side-by-side one."""
