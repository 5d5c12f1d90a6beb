"""The one adapter between policyd and the Kubernetes API server.

Only this package uses the `kubernetes` client, and only for what it does well:
reading kubeconfig/in-cluster credentials and holding an authenticated connection pool;
`official.py` is the one module that imports it and reads its objects.
Requests go through `KubeClient.request` as raw JSON (the client's model decoding is
about four times slower than `json.loads`, and it raises on a successful Binding reply:
kubernetes-client/python issue 547), with a client-side rate limit and a timeout on
every call.
"""
