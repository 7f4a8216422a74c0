"""kube-py-scheduler."""
