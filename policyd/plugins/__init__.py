"""Built-in plugins reproducing kube-scheduler's default profile, one module each."""
