"""policyd: a Kubernetes scheduler whose rules are declarative YAML policies."""

__version__ = "0.1.0"

# The Kubernetes minor whose kube-scheduler behaviour (messages, score arithmetic,
# defaults) policyd matches; the local control plane is built from the same version.
KUBERNETES_VERSION = "v1.36.3"
