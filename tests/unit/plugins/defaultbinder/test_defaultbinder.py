"""DefaultBinder: POST v1.Binding; 409 / 404 carried as typed errors."""

from __future__ import annotations

import pytest

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.errors import AlreadyBoundError, PodGoneError
from scheduler.framework.status import Code
from scheduler.objects.pod import PodInfo
from scheduler.plugins.defaultbinder import NAME, DefaultBinder
from tests.builders import PodBuilder
from tests.fakes import FakeHandle, FakeResponse

PATH = "/api/v1/namespaces/ns1/pods/p/binding"


def _setup(*responses: FakeResponse) -> tuple[DefaultBinder, FakeHandle, PodInfo]:
    handle = FakeHandle()
    if responses:
        handle.client.responses[("POST", PATH)] = list(responses)
    pod = PodInfo.from_pod(PodBuilder("p", "ns1").uid("uid-123").container().obj())
    return DefaultBinder({}, handle), handle, pod


@pytest.mark.parametrize("code", [200, 201])
async def test_success_posts_binding(code: int) -> None:
    binder, handle, pod = _setup(FakeResponse(code, {}))
    assert binder.name == NAME == "DefaultBinder"
    assert await binder.bind(CycleState(), pod, "node-a") is None
    assert handle.client.requests == [
        (
            "POST",
            PATH,
            {
                "apiVersion": "v1",
                "kind": "Binding",
                "metadata": {"name": "p", "namespace": "ns1", "uid": "uid-123"},
                "target": {"apiVersion": "v1", "kind": "Node", "name": "node-a"},
            },
        )
    ]


async def test_conflict_is_already_bound() -> None:
    binder, _, pod = _setup(
        FakeResponse(409, {"kind": "Status", "message": 'pod p is already assigned to node "x"'})
    )
    status = await binder.bind(CycleState(), pod, "node-a")
    assert status is not None and status.code == Code.ERROR
    assert isinstance(status.error, AlreadyBoundError)
    assert "already assigned" in status.message()


async def test_not_found_is_pod_gone() -> None:
    binder, _, pod = _setup(FakeResponse(404, {"message": 'pods "p" not found'}))
    status = await binder.bind(CycleState(), pod, "node-a")
    assert status is not None and isinstance(status.error, PodGoneError)


async def test_other_failure_carries_api_message() -> None:
    binder, _, pod = _setup(FakeResponse(500, {"message": "etcd timeout"}))
    status = await binder.bind(CycleState(), pod, "node-a")
    assert status is not None and status.code == Code.ERROR and status.error is None
    assert "etcd timeout" in status.message() and "500" in status.message()


# --- a POST without an answer (issue 22: a gang member must not be half- or double-bound) ---

POD_PATH = "/api/v1/namespaces/ns1/pods/p"
TIMEOUT = ConnectionError("no response within 1 s")


class _Client:
    """Answers each (method, path) from a script; an exception in it is raised."""

    def __init__(self, script: dict[tuple[str, str], list[object]]) -> None:
        self.script = script
        self.calls: list[tuple[str, str]] = []

    async def request(self, method: str, path: str, **_: object) -> FakeResponse:
        self.calls.append((method, path))
        answer = self.script[(method, path)].pop(0)
        if isinstance(answer, BaseException):
            raise answer
        assert isinstance(answer, FakeResponse)
        return answer


def _pod_body(node: str | None, uid: str = "uid-123") -> dict[str, object]:
    return {"metadata": {"name": "p", "namespace": "ns1", "uid": uid},
            "spec": {"nodeName": node} if node else {}}


@pytest.mark.parametrize(
    ("posts", "gets", "outcome"),
    [
        # The first POST landed unseen: the second one is refused, the pod is ours.
        ([TIMEOUT, FakeResponse(409, {"message": "already assigned"})],
         [FakeResponse(200, _pod_body("node-a"))], "bound"),
        # It did not land: the second POST binds it.
        ([TIMEOUT, FakeResponse(201, {})], [], "bound"),
        # Bound elsewhere meanwhile (another scheduler): not ours to retry.
        ([TIMEOUT, FakeResponse(409, {"message": "already assigned"})],
         [FakeResponse(200, _pod_body("node-b"))], "already-bound"),
        # No answer twice, the pod reads bound here: bound.
        ([TIMEOUT, TIMEOUT], [FakeResponse(200, _pod_body("node-a"))], "bound"),
        # No answer twice and the pod is still unbound: the failure stands (retried later).
        ([TIMEOUT, TIMEOUT], [FakeResponse(200, _pod_body(None))], "raises"),
        # Deleted (or replaced by a namesake) meanwhile.
        ([TIMEOUT, TIMEOUT], [FakeResponse(404, {})], "gone"),
        ([TIMEOUT, TIMEOUT], [FakeResponse(200, _pod_body("node-a", uid="other"))], "gone"),
    ],
)
async def test_a_binding_without_an_answer_is_settled(
    posts: list[object], gets: list[object], outcome: str
) -> None:
    binder, handle, pod = _setup()
    client = _Client({("POST", PATH): list(posts), ("GET", POD_PATH): list(gets)})
    handle._client = client
    if outcome == "raises":
        with pytest.raises(ConnectionError):
            await binder.bind(CycleState(), pod, "node-a")
        return
    status = await binder.bind(CycleState(), pod, "node-a")
    if outcome == "bound":
        assert status is None or status.is_success()
    else:
        assert status is not None and status.code == Code.ERROR
        error = AlreadyBoundError if outcome == "already-bound" else PodGoneError
        assert isinstance(status.error, error)
    assert client.calls.count(("POST", PATH)) == 2


class _KwargsClient:
    """Records each request's keyword arguments; answers from a list."""

    def __init__(self, answers: list[FakeResponse]) -> None:
        self.answers = answers
        self.kwargs: list[tuple[str, dict[str, object]]] = []

    async def request(self, method: str, path: str, **kw: object) -> FakeResponse:
        self.kwargs.append((method, kw))
        return self.answers.pop(0)


@pytest.mark.parametrize(("answer", "bound"), [
    (FakeResponse(201, None), True),  # the success body is not decoded: None is all it needs
    (FakeResponse(200, None), True),
    (FakeResponse(409, {"message": "already assigned"}), False),  # a refusal's body is read
])
async def test_binding_post_does_not_ask_for_the_success_body(
        answer: FakeResponse, bound: bool) -> None:
    client = _KwargsClient([answer])
    handle = FakeHandle(client=client)
    pod = PodInfo.from_pod(PodBuilder("p", "ns1").uid("uid-123").container().obj())
    status = await DefaultBinder({}, handle).bind(CycleState(), pod, "node-a")
    assert [(m, kw.get("discard_ok_body")) for m, kw in client.kwargs] == [("POST", True)]
    assert (status is None) is bound
    if not bound:
        assert status is not None and "already assigned" in status.message()
