"""Exceptions carried inside ``Status(ERROR)`` so the scheduling cycle can tell failures apart."""

from __future__ import annotations


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
