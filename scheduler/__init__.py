"""kube-py-scheduler: a secondary Kubernetes scheduler with kube-scheduler semantics."""

__version__ = "0.1.0"
