"""kube-py-scheduler: a secondary Kubernetes scheduler with kube-scheduler semantics."""

__version__ = "0.1.0"
# The kube-scheduler release whose default behaviour this scheduler matches (docs/parity.md).
KUBE_SCHEDULER_RELEASE = "1.37"

from scheduler.lazy_imports import defer as _defer

_defer()  # structlog without rich, cel without its command line (see lazy_imports.py)
