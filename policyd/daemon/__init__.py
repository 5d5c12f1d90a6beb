"""The in-cluster scheduler (`policyd run`): queue, scheduling loop, binder, events,
leader election, hot reload, metrics and health.

It drives the same engine (`policyd.engine.cycle.schedule_one`) as the offline
commands over a `ClusterState` fed by informers; all API traffic goes through
`policyd.kube`.
"""
