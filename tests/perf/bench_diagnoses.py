"""What the daemon's diagnosis store costs (run by hand; figures in docs/explain.md).

- per pod informer update (every bind is one): the store's handler with an empty store and
  with 1000 entries, against a handler that does nothing;
- per failed attempt on 5000 nodes: ``record`` against what the daemon already does with
  the same diagnosis, building the FailedScheduling message (``str(FitError)``).

    python tests/perf/bench_diagnoses.py
"""

from __future__ import annotations

import timeit
from typing import Any

from scheduler.explain.diagnoses import DiagnosisStore
from scheduler.framework.status import Code, Status
from scheduler.framework.types import Diagnosis, FitError, QueuedPodInfo
from scheduler.objects.pod import PodInfo

NODES = 5000
UPDATES = 200_000
RECORDS = 100


def _pod(name: str, node: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "i"}]}
    if node:
        spec["nodeName"] = node
    return {"metadata": {"namespace": "default", "name": name, "uid": f"uid-{name}"},
            "spec": spec}


def _fit_error() -> FitError:
    reasons = ["Insufficient cpu", "Insufficient memory",
               "node(s) had untolerated taint {dedicated: gpu}"]
    diagnosis = Diagnosis(node_to_status={
        f"node-{i:05d}": Status(Code.UNSCHEDULABLE, reasons[i % 3], plugin="NodeResourcesFit")
        for i in range(NODES)})
    return FitError(pod_key="default/p", num_all_nodes=NODES, diagnosis=diagnosis)


def _noop(old: dict[str, Any], new: dict[str, Any]) -> None:
    return None


def main() -> None:
    old, new = _pod("p"), _pod("p", "node-00001")
    base = timeit.timeit(lambda: _noop(old, new), number=UPDATES) / UPDATES
    empty = DiagnosisStore()
    t_empty = timeit.timeit(lambda: empty.on_pod_update(old, new), number=UPDATES) / UPDATES
    full = DiagnosisStore()
    fit = _fit_error()
    status = Status(Code.UNSCHEDULABLE, str(fit), error=fit)
    for i in range(1000):
        full.record(QueuedPodInfo(PodInfo.from_pod(_pod(f"q{i}")), timestamp=0.0), status,
                    profile="py", message="m")
    t_full = timeit.timeit(lambda: full.on_pod_update(old, new), number=UPDATES) / UPDATES
    print(f"pod update handler: no-op {base * 1e9:.0f} ns, empty store {t_empty * 1e9:.0f} ns, "
          f"1000 entries {t_full * 1e9:.0f} ns")

    qpi = QueuedPodInfo(PodInfo.from_pod(_pod("p")), timestamp=0.0, attempts=1)
    t_message = timeit.timeit(lambda: str(fit), number=RECORDS) / RECORDS
    t_record = timeit.timeit(
        lambda: full.record(qpi, status, profile="py", message="m"), number=RECORDS) / RECORDS
    print(f"failure on {NODES} nodes: FailedScheduling message {t_message * 1e3:.2f} ms, "
          f"record {t_record * 1e3:.2f} ms ({t_record / t_message:.2f}x the message)")


if __name__ == "__main__":
    main()
