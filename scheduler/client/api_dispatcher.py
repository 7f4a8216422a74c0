"""The API dispatcher: the scheduler's writes of pod status and bindings, asynchronous and
coalesced per pod (kube-scheduler's SchedulerAsyncAPICalls: ``backend/api_dispatcher`` and
``framework/api_calls``).

Why: a pod that fails the same way every backoff, is nominated, then cleared, then bound, would
otherwise cost one write per step, each racing the others.  Here every call names its object
(the pod's UID) and a type with a relevance (a binding, 2, outranks a status patch, 1), and the
dispatcher keeps at most one call per object:

* a call less relevant than the one already queued for the object is skipped
  (``CallSkipped``);
* a more relevant one overwrites a queued call of another type (the old one finishes with
  ``CallOverwritten``), or waits behind it when that call is already executing;
* a status patch merges with a queued status patch: the newer conditions win by type, the
  older ones of other types are kept, a nomination is kept unless the newer call sets one;
* a call with no effect on the object as last seen is skipped, unless a call for the object is
  executing (its effect is not known yet);
* calls for one object never run concurrently: a call added while another executes runs after
  it, on the object as that call left it.

Calls run on up to ``parallelism`` tasks, the oldest object first.  ``add`` answers a future
that ends with the call's result (or its error, ``CallSkipped``, ``CallOverwritten``, or
``DispatcherClosed`` when the dispatcher stops).  ``run_now`` is ``add`` and an await of its
future for a caller that waits anyway (a binding cycle): when nothing is queued, a slot is
free and no call of the object is queued or executing, what the dispatching loop would do
next is to start this very call, so it runs in the caller's task (no future, no wakeup of the
loop, no task), counted against ``parallelism`` and in the metrics as any call; otherwise it
is queued as ``add`` does.  The metrics are upstream's:
``scheduler_async_api_call_execution_total`` and ``_duration_seconds`` by ``call_type`` and
``result``, ``scheduler_pending_async_api_calls`` by ``call_type``.
"""

from __future__ import annotations

import abc
import asyncio
import copy
import time
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from datetime import datetime, timezone
from typing import Any

import structlog

from scheduler.client.pod_status import StatusPatcher, _patch_status, compute_condition
from scheduler.metrics import SchedulerMetrics

__all__ = [
    "POD_STATUS_PATCH",
    "POD_BINDING",
    "RELEVANCES",
    "ApiCall",
    "ApiDispatcher",
    "CallSkipped",
    "CallOverwritten",
    "DispatcherClosed",
    "PodBindingCall",
    "PodStatusPatchCall",
]

log = structlog.get_logger(__name__)

POD_STATUS_PATCH = "pod_status_patch"
POD_BINDING = "pod_binding"
# Upstream api_calls.Relevances: a binding supersedes a status patch of the same pod.
RELEVANCES: Mapping[str, int] = {POD_STATUS_PATCH: 1, POD_BINDING: 2}


class CallSkipped(Exception):
    """The call was not executed: a more relevant one is queued, or it has no effect."""


class CallOverwritten(Exception):
    """A newer call for the same object replaced (or absorbed) this one before it ran."""


class DispatcherClosed(Exception):
    """The dispatcher stopped before the call ran."""


class ApiCall(abc.ABC):
    """One write to the API server about one object."""

    call_type: str = ""

    def __init__(self, uid: str) -> None:
        self.uid = uid

    @abc.abstractmethod
    async def execute(self) -> Any:
        """Do the write; the result is what ``add``'s future ends with."""

    def merge(self, older: ApiCall) -> None:
        """Absorb ``older``, a queued call of the same type for the same object."""

    def sync(self, obj: Mapping[str, Any]) -> None:
        """Take ``obj``, a newer version of the object, as the base of the write."""

    def is_no_op(self) -> bool:
        return False


def _status_of(pod: Mapping[str, Any]) -> dict[str, Any]:
    status = pod.get("status")
    return copy.deepcopy(dict(status)) if isinstance(status, Mapping) else {}


class PodStatusPatchCall(ApiCall):
    """Patch ``pods/status``: conditions (merged by type) and ``nominatedNodeName``
    (``nominated_node_name``: None leaves it alone, "" clears it, a name sets it)."""

    call_type = POD_STATUS_PATCH

    def __init__(
        self,
        pod: Mapping[str, Any],
        *,
        client: StatusPatcher,
        conditions: list[dict[str, Any]] | None = None,
        nominated_node_name: str | None = None,
        always: bool = False,
        now: Callable[[], datetime] = lambda: datetime.now(timezone.utc),
        retries: int = 3,
    ) -> None:
        meta = pod.get("metadata") or {}
        super().__init__(str(meta.get("uid") or f"{meta.get('namespace')}/{meta.get('name')}"))
        self.pod = pod
        self.status = _status_of(pod)
        self.conditions = [dict(c) for c in conditions or ()]
        self.nominated_node_name = nominated_node_name
        # Write the nomination even when ``pod`` shows it already: the caller's copy may be
        # older than the server's (clearing a nomination whose write is not seen yet).
        self.always = always and nominated_node_name is not None
        self._client = client
        self._now = now
        self._retries = retries
        self.executed = False

    def merge(self, older: ApiCall) -> None:
        if not isinstance(older, PodStatusPatchCall):
            raise TypeError(f"cannot merge a {older.call_type} call into a status patch")
        if self.nominated_node_name is None:
            self.nominated_node_name = older.nominated_node_name
            self.always = older.always
        types = {c.get("type") for c in self.conditions}
        self.conditions += [c for c in older.conditions if c.get("type") not in types]

    def sync(self, obj: Mapping[str, Any]) -> None:
        if not self.executed:
            self.pod = obj
            self.status = _status_of(obj)
            if self.always and (self.status.get("nominatedNodeName") or "") == (
                    self.nominated_node_name or ""):
                self.always = False  # a version at least as new shows the nomination done

    def _patch(self) -> dict[str, Any]:
        """The status patch against ``self.status`` (empty when nothing changes)."""
        now = self._now()
        patch: dict[str, Any] = {}
        changed = []
        for condition in self.conditions:
            new, differs = compute_condition(self.status, condition, now=now)
            if differs:
                changed.append(new)
        if changed:
            # Strategic merge merges conditions by "type": only ours are touched.
            patch["conditions"] = changed
        nnn = self.nominated_node_name
        if nnn is not None and (self.always
                                or nnn != (self.status.get("nominatedNodeName") or "")):
            patch["nominatedNodeName"] = nnn or None
        return patch

    def is_no_op(self) -> bool:
        return not self._patch()

    async def execute(self) -> dict[str, Any] | None:
        self.executed = True
        patch = self._patch()
        if not patch:
            return None
        return await _patch_status(self._client, self.pod, {"status": patch},
                                   retries=self._retries, sleep=asyncio.sleep)


class PodBindingCall(ApiCall):
    """The binding of a pod: ``bind`` runs the binders (the Bind plugins, or a binder
    extender) and answers their result.  Never a no-op; a newer binding replaces it."""

    call_type = POD_BINDING

    def __init__(self, uid: str, bind: Callable[[], Coroutine[Any, Any, Any]]) -> None:
        super().__init__(uid)
        self._bind = bind

    def merge(self, older: ApiCall) -> None:
        return None  # the newer binding wins

    def execute(self) -> Coroutine[Any, Any, Any]:
        # The binders' own coroutine, awaited by the dispatcher: no coroutine of its own
        # between them (each level of a binding's await chain runs at every resumption).
        return self._bind()


class _Queued:
    __slots__ = ("call", "future", "call_id")

    def __init__(self, call: ApiCall, future: asyncio.Future[Any] | None, call_id: int) -> None:
        self.call = call
        self.future = future  # None for a call run in its caller's task (``run_now``)
        self.call_id = call_id

    def finish(self, *, result: Any = None, error: BaseException | None = None) -> None:
        future = self.future
        if future is None or future.done():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)


def _quiet(future: asyncio.Future[Any]) -> None:
    # A caller may drop the future of a fire-and-forget call: retrieve its exception so the
    # loop does not log it as never retrieved (failures are logged by the dispatcher).
    if not future.cancelled():
        future.exception()


class ApiDispatcher:
    """Queues API calls per object and runs them on up to ``parallelism`` tasks."""

    def __init__(
        self,
        *,
        parallelism: int = 16,
        metrics: SchedulerMetrics | None = None,
        relevances: Mapping[str, int] = RELEVANCES,
    ) -> None:
        if parallelism < 1:
            raise ValueError(f"parallelism must be at least 1, got {parallelism}")
        self._parallelism = parallelism
        self._relevances = dict(relevances)
        self._metrics = metrics
        # The metrics' children by label values, looked up once (several per binding).
        self._pending_children: dict[str, Any] = {}
        self._observe_children: dict[tuple[str, str], tuple[Any, Any]] = {}
        self._calls: dict[str, _Queued] = {}  # uid -> the queued or executing call
        self._queue: deque[str] = deque()  # uids whose call waits to run, oldest first
        self._in_flight: set[str] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._executing: dict[int, asyncio.Task[Any]] = {}  # call_id -> its execution
        # Calls run in their caller's task (``run_now``) that ``close`` cancelled: their
        # caller is told DispatcherClosed, as a queued caller is.
        self._closed_inline: set[int] = set()
        self._running = 0  # calls executing (tasks and callers' own), at most parallelism
        self._wakeup = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._next_id = 0
        self._closed = False
        self._runner: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Run the dispatching loop as a named, supervised task (idempotent; ``add`` calls it)."""
        if self._runner is not None or self._closed:
            return
        self._runner = asyncio.create_task(self.run(), name="api-dispatcher")

        def done(task: asyncio.Task[None]) -> None:
            if not task.cancelled() and task.exception() is not None:
                log.error("api dispatcher crashed", error=repr(task.exception()))

        self._runner.add_done_callback(done)

    async def drain(self, timeout: float) -> bool:
        """Wait (up to ``timeout`` seconds) until no call is queued or executing."""
        try:
            await asyncio.wait_for(self._idle.wait(), timeout)
        except TimeoutError:
            return False
        return True

    # --- adding -------------------------------------------------------------------------------

    def add(self, call: ApiCall) -> asyncio.Future[Any]:
        """Queue ``call``; the future ends with its result or why it did not run."""
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        future.add_done_callback(_quiet)
        queued = _Queued(call, future, self._next_id)
        self._next_id += 1
        future.add_done_callback(lambda f: self._abandoned(queued) if f.cancelled() else None)
        if self._closed:
            queued.finish(error=DispatcherClosed("api dispatcher is closed"))
            return future
        self.start()
        old = self._calls.get(call.uid)
        if old is not None and not self._merge(old, queued):
            return future
        self._enqueue(queued, old_present=old is not None)
        return future

    def would_run_now(self, uid: str) -> bool:
        """Whether ``run_now`` of a call for ``uid`` runs it at once in the caller's task
        (until the caller next yields to the loop)."""
        return not (self._closed or self._queue or self._running >= self._parallelism
                    or uid in self._calls)

    def run_now(self, call: ApiCall) -> Coroutine[Any, Any, Any]:
        """``await self.add(call)``, with the call run in the caller's task when the loop
        would start it at once (see the module's docstring): same result, errors, ordering
        and metrics; a cancelled caller cancels the write, as with ``add``.  To be awaited
        at once (``await dispatcher.run_now(call)``): the call starts when it is awaited,
        and that of the write itself is the coroutine answered (no coroutine between)."""
        uid = call.uid
        task = asyncio.current_task()
        if (self._closed or self._queue or self._running >= self._parallelism
                or uid in self._calls or task is None or call.is_no_op()):
            return self._queued_or_skipped(call)
        return self._run(self._start_inline(call, task), caller=task)

    async def _queued_or_skipped(self, call: ApiCall) -> Any:
        """``run_now`` of a call the loop would not start at once, or of a no-op."""
        if not self.would_run_now(call.uid) or asyncio.current_task() is None:
            return await self.add(call)
        raise CallSkipped("call does not need to be executed because it has no effect")

    def _start_inline(self, call: ApiCall, task: asyncio.Task[Any]) -> _Queued:
        """Count ``call`` as executing in ``task`` (its caller's): ``run_now``'s start."""
        uid = call.uid
        if self._runner is None:
            self.start()  # runs the calls that arrive for this object meanwhile
        if call.call_type not in self._pending_children:
            # Never queued, but its pending gauge is exported (at 0) as if it had been.
            self._pending(call.call_type, 0)
        call_id = self._next_id
        self._next_id += 1
        queued = _Queued(call, None, call_id)
        self._calls[uid] = queued
        self._idle.clear()
        self._in_flight.add(uid)
        self._executing[call_id] = task
        self._running += 1
        return queued

    def _merge(self, old: _Queued, new: _Queued) -> bool:
        """Reconcile ``new`` with ``old`` (queued or executing); False when ``new`` is dropped."""
        old_type, new_type = old.call.call_type, new.call.call_type
        if self._relevances.get(new_type, 0) < self._relevances.get(old_type, 0):
            new.finish(error=CallSkipped("a more relevant call is already enqueued for this "
                                         "object"))
            return False
        uid = new.call.uid
        executing = old.call_id in self._executing
        if old_type != new_type:
            if executing:
                return True  # runs after the executing call
            if uid not in self._in_flight:  # ``old`` is counted in the queue, ``new`` takes it
                self._pending(old_type, -1)
                self._pending(new_type, +1)
            old.finish(error=CallOverwritten("a more relevant call was enqueued for this object"))
            return True
        if not executing:
            new.call.merge(old.call)
            old.finish(error=CallOverwritten("a call of the same type was enqueued for this "
                                             "object"))
        elif not isinstance(new.call, PodBindingCall):
            # The executing call's effect lands before this one runs; keep what it adds.
            new.call.merge(old.call)
        return True

    def _enqueue(self, queued: _Queued, *, old_present: bool) -> None:
        uid = queued.call.uid
        if queued.call.is_no_op() and uid not in self._in_flight:
            if old_present:
                self._remove_pending(uid)
            queued.finish(error=CallSkipped("call does not need to be executed because it has "
                                            "no effect"))
            return
        self._calls[uid] = queued
        self._idle.clear()
        if old_present:
            # Either it replaced a call already counted in the queue, or it waits for the
            # executing call's end (finalize puts it in the queue then).
            return
        self._queue.append(uid)
        self._pending(queued.call.call_type, +1)
        self._wakeup.set()

    def _forget(self, uid: str) -> _Queued | None:
        queued = self._calls.pop(uid, None)
        if not self._calls:
            self._idle.set()
        return queued

    def _remove_pending(self, uid: str) -> None:
        queued = self._forget(uid)
        if queued is None or uid in self._in_flight:
            return
        try:
            self._queue.remove(uid)
        except ValueError:
            return
        self._pending(queued.call.call_type, -1)

    def _abandoned(self, queued: _Queued) -> None:
        """The caller cancelled its wait (its task was cancelled): a queued call is dropped,
        an executing one is cancelled, as the awaited write itself would have been."""
        uid = queued.call.uid
        current = self._calls.get(uid)
        task = self._executing.get(queued.call_id)
        if task is not None:
            task.cancel()
        elif current is not None and current.call_id == queued.call_id:
            self._remove_pending(uid)

    def forget_object(self, obj: Any) -> None:
        """The object was deleted (``obj``, or a tombstone holding it in ``.obj``): its
        queued call (not one executing) is dropped."""
        if type(obj) is not dict and not isinstance(obj, Mapping):  # a dict from the wire
            obj = getattr(obj, "obj", None)
            if not isinstance(obj, Mapping):
                return
        uid = str((obj.get("metadata") or {}).get("uid") or "")
        queued = self._calls.get(uid)
        if queued is None or uid in self._in_flight:
            return
        self._remove_pending(uid)
        queued.finish(error=CallSkipped("the object was deleted"))

    def sync_object(self, obj: Mapping[str, Any]) -> None:
        """A newer version of an object arrived (an informer update): rebase its queued call
        on it, and drop the call if it has no effect any more."""
        uid = str((obj.get("metadata") or {}).get("uid") or "")
        queued = self._calls.get(uid)
        if queued is None:
            return
        queued.call.sync(obj)
        if uid not in self._in_flight and queued.call.is_no_op():
            self._remove_pending(uid)
            queued.finish(error=CallSkipped("call does not need to be executed because after "
                                            "sync it has no effect"))

    def sync_update(self, _old: Mapping[str, Any], new: Mapping[str, Any]) -> None:
        """``sync_object(new)`` as an informer's update handler; nothing to look up while no
        call is queued or executing (every pod update but the few behind a write)."""
        if self._calls:
            self.sync_object(new)

    # --- running ------------------------------------------------------------------------------

    async def run(self) -> None:
        """Pop calls and execute them, ``parallelism`` at a time, until closed."""
        while not self._closed:
            if not self._queue or self._running >= self._parallelism:
                # Woken by a call queued, or by a slot freed while calls wait.
                self._wakeup.clear()
                await self._wakeup.wait()
                continue
            uid = self._queue.popleft()
            queued = self._calls[uid]
            self._in_flight.add(uid)
            self._running += 1
            self._pending(queued.call.call_type, -1)
            task = asyncio.create_task(self._execute(queued),
                                       name=f"api-call:{queued.call.call_type}:{uid}")
            self._tasks.add(task)
            self._executing[queued.call_id] = task
            task.add_done_callback(self._tasks.discard)
            task.add_done_callback(self._forget_execution(queued.call_id))

    def _forget_execution(self, call_id: int) -> Callable[[asyncio.Task[None]], None]:
        def forget(_task: asyncio.Task[None]) -> None:
            self._executing.pop(call_id, None)

        return forget

    async def _execute(self, queued: _Queued) -> None:
        await self._run(queued, caller=None)

    async def _run(self, queued: _Queued, *, caller: asyncio.Task[Any] | None) -> Any:
        """Execute a call counted in ``_running``: its metrics, its end, the next call of its
        object.  ``caller``: the task of a ``run_now`` caller, which hears the call's result
        or error itself; None for a task of the dispatching loop, which hands them to the
        call's future and logs a failure without raising it.  Cancellation: a loop task's
        call cancelled by its caller (``_abandoned``) ends there, the dispatcher goes on, and
        one cancelled by ``close`` re-raises; a ``run_now`` caller cancelled by ``close``
        hears ``DispatcherClosed`` (as a caller awaiting a queued call does), unless it was
        also cancelled itself."""
        call, call_id = queued.call, queued.call_id
        started = time.perf_counter()
        result: Any = None
        error: BaseException | None = None
        try:
            result = await call.execute()
        except asyncio.CancelledError:
            error = DispatcherClosed("the call was cancelled")
            if caller is None:
                if self._closed:
                    raise
            elif call_id in self._closed_inline:
                # ``close`` cancelled the write, not the caller.
                caller.uncancel()
                if caller.cancelling():
                    raise
                raise error from None
            else:
                raise
        except Exception as exc:
            error = exc
            log.warning("API call failed", call_type=call.call_type, object=call.uid,
                        error=str(exc))
            if caller is not None:
                raise
        finally:
            self._running -= 1
            if caller is not None:
                self._executing.pop(call_id, None)
                self._closed_inline.discard(call_id)
            self._observe(call.call_type, "error" if error is not None else "success",
                          time.perf_counter() - started)
            self._finalize(queued, result)
            if caller is None:
                queued.finish(result=result, error=error)
            if self._queue:
                self._wakeup.set()
        return result

    def _finalize(self, queued: _Queued, result: Any) -> None:
        uid = queued.call.uid
        self._in_flight.discard(uid)
        current = self._calls.get(uid)
        if current is None:
            return
        if current.call_id == queued.call_id:
            self._forget(uid)
            return
        # A call arrived while this one executed: it runs now, on the object as left by it.
        if isinstance(result, Mapping) and result.get("metadata"):
            current.call.sync(result)
        if self._closed:
            return
        if current.call.is_no_op():
            self._forget(uid)
            current.finish(error=CallSkipped("call does not need to be executed because it has "
                                             "no effect"))
            return
        self._queue.append(uid)
        self._pending(current.call.call_type, +1)
        self._wakeup.set()

    async def close(self) -> None:
        """Stop: queued calls end with ``DispatcherClosed``, executing ones are cancelled."""
        if self._closed:
            return
        self._closed = True
        self._wakeup.set()
        for queued in list(self._calls.values()):
            if queued.call.uid not in self._in_flight:
                self._pending(queued.call.call_type, -1)
            queued.finish(error=DispatcherClosed("api dispatcher is closed"))
        self._queue.clear()
        for call_id, caller in list(self._executing.items()):
            if caller not in self._tasks:  # a call run in its caller's task
                self._closed_inline.add(call_id)
                caller.cancel()
        tasks = list(self._tasks)
        if self._runner is not None:
            tasks.append(self._runner)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        self._calls.clear()
        self._idle.set()

    # --- introspection and metrics ------------------------------------------------------------

    def pending(self) -> dict[str, str]:
        """uid -> call type of every queued or executing call (debugging, tests)."""
        return {uid: q.call.call_type for uid, q in self._calls.items()}

    def _pending(self, call_type: str, delta: int) -> None:
        if self._metrics is None:
            return
        child = self._pending_children.get(call_type)
        if child is None:
            child = self._metrics.ops.pending_async_api_calls.labels(call_type)
            self._pending_children[call_type] = child
        child.inc(delta)

    def _observe(self, call_type: str, result: str, seconds: float) -> None:
        if self._metrics is None:
            return
        children = self._observe_children.get((call_type, result))
        if children is None:
            ops = self._metrics.ops
            children = (ops.async_api_call_execution.labels(call_type, result),
                        ops.async_api_call_execution_duration.labels(call_type, result))
            self._observe_children[call_type, result] = children
        children[0].inc()
        children[1].observe(seconds)
