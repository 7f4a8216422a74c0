"""Exceptions carried inside ``Status(ERROR)`` so the scheduling cycle can tell failures apart."""

from __future__ import annotations

from scheduler.framework.status import Code, Status


class AlreadyBoundError(Exception):
    """The API server answered 409: the pod is already bound (another scheduler won the race).

    The binding cycle forgets the pod without requeueing it: the informer will deliver it as
    an assigned pod.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)


class PodGoneError(Exception):
    """The API server answered 404 while binding: the pod was deleted meanwhile."""

    def __init__(self, message: str) -> None:
        super().__init__(message)


class FrameworkStatusError(Exception):
    """A framework call that returns results (``run_score_plugins``) failed; ``status`` is the
    Error status naming the plugin."""

    def __init__(self, status: Status) -> None:
        super().__init__(status.message())
        self.status = status


class PluginConfigError(ValueError):
    """A profile cannot be turned into a framework: bad plugin args, an unknown plugin, a
    plugin enabled at a point it does not implement, no queueSort or bind plugin ...

    The CLI reports it and exits 2 before touching the cluster.  ``str()`` names the profile,
    the plugin (when there is one) and the field.
    """

    def __init__(self, *, profile: str, plugin: str = "", field: str = "", message: str) -> None:
        parts = [f"profile {profile!r}"]
        if plugin:
            parts.append(f"plugin {plugin!r}")
        if field:
            parts.append(field)
        super().__init__(": ".join([*parts, message]))
        self.profile = profile
        self.plugin = plugin
        self.field = field
        self.detail = message


class ProfileConfigErrors(PluginConfigError):
    """Every ``PluginConfigError`` of one profile, found in one pass (each plugin is built,
    the first failure does not hide the others); ``str()`` is one line per error."""

    def __init__(self, errors: list[PluginConfigError]) -> None:
        first = errors[0]
        super().__init__(profile=first.profile, plugin=first.plugin, field=first.field,
                         message=first.detail)
        self.args = ("\n".join(str(e) for e in errors),)
        self.errors = errors

    def __str__(self) -> str:
        return str(self.args[0])


def guard_error(status: Status, prefix: str, plugin: str) -> Status:
    """Wrap a non-rejection status as upstream's ``AsStatus(fmt.Errorf(prefix: err))``,
    keeping the original exception (AlreadyBoundError ...) for the caller."""
    message = status.message() or status.code.label
    return Status(Code.ERROR, f"{prefix}: {message}", plugin=plugin, error=status.error)


def rejection_or_error(status: Status, point: str, plugin: str) -> Status:
    """A failed Reserve/PreBind: rejections keep their code and name the plugin; anything
    else becomes an Error status."""
    if status.is_rejected():
        status.plugin = plugin
        return status
    return guard_error(status, f"running {point} plugin {plugin!r}", plugin)
