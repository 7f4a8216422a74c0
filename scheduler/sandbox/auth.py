"""TokenReview and SubjectAccessReview from a small static table (delegated authn/authz).

Why: the scheduler's secure metrics endpoint authenticates scrapers with a TokenReview and
authorizes them with a SubjectAccessReview against the API server, like every component
using k8s.io/apiserver's delegated auth. The sandbox answers both from a table given on the
command line (``--auth-user TOKEN=USERNAME[:GROUP1;GROUP2]``, ``--auth-allow
USERNAME:VERB:PATH``) or to ``Sandbox(auth_users=..., auth_allow=...)``.

As upstream: an authenticated user also gets the group ``system:authenticated``; the reviewed
audiences default to the API server's own (``https://kubernetes.default.svc.cluster.local``)
and a token is only accepted for those, as a static token authenticator is; an empty token is
a 400; a SubjectAccessReview needs exactly one of resourceAttributes / nonResourceAttributes
and a user or a group (422 otherwise). ``status.authenticated`` is omitted when false (Go's
omitempty), ``status.allowed`` is always present.

Rules: ``*`` matches any user, verb or path; a path ending in ``*`` matches by prefix (RBAC's
nonResourceURLs). For resourceAttributes the rule's PATH is compared with
``resource[.group][/subresource]`` (so ``*`` allows everything). Only the table decides: the
``--token`` that guards the API itself is not in it.
"""

from __future__ import annotations

from typing import Any

from . import errors

Obj = dict[str, Any]
API_AUDIENCES = ("https://kubernetes.default.svc.cluster.local",)
AUTHENTICATED = "system:authenticated"


def parse_user(s: str) -> tuple[str, tuple[str, list[str]]]:
    """``TOKEN=USERNAME[:GROUP1;GROUP2]``; the groups follow the last ``:``, so a username
    containing ``:`` (``system:serviceaccount:ns:sa``) is written with a trailing ``:``."""
    token, eq, rest = s.partition("=")
    if not eq or not token or not rest:
        raise ValueError(f"auth user {s!r} is not TOKEN=USERNAME[:GROUP1;GROUP2]")
    user, colon, groups = rest.rpartition(":")
    if not colon:
        user, groups = rest, ""
    if not user:
        raise ValueError(f"auth user {s!r} has an empty username")
    return token, (user, [g for g in groups.split(";") if g])


def parse_allow(s: str) -> tuple[str, str, str]:
    """``USERNAME:VERB:PATH``; split from the right, so usernames may contain ``:``."""
    parts = s.rsplit(":", 2)
    if len(parts) != 3 or not all(parts):
        raise ValueError(f"auth rule {s!r} is not USERNAME:VERB:PATH")
    return parts[0], parts[1], parts[2]


def _match(pattern: str, value: str) -> bool:
    if pattern == "*" or pattern == value:
        return True
    return pattern.endswith("*") and value.startswith(pattern[:-1])


class AuthTable:
    def __init__(
        self,
        users: dict[str, tuple[str, list[str]]] | None = None,
        allow: list[tuple[str, str, str]] | None = None,
    ) -> None:
        self.users = {t: (u, list(g)) for t, (u, g) in (users or {}).items()}
        self.allow = [tuple(r) for r in (allow or [])]

    # ------------------------------------------------------------ TokenReview

    def token_review(self, body: Any) -> Obj:
        if not isinstance(body, dict):
            raise errors.bad_request("the body of the request must be a TokenReview object")
        spec = body.get("spec") if isinstance(body.get("spec"), dict) else {}
        assert isinstance(spec, dict)
        token = spec.get("token")
        if not isinstance(token, str) or not token:
            raise errors.bad_request("token is required for TokenReview in authentication")
        wanted = [str(a) for a in spec.get("audiences") or []] or list(API_AUDIENCES)
        auds = [a for a in API_AUDIENCES if a in wanted]
        status: Obj = {"user": {}}
        entry = self.users.get(token)
        if entry is not None and auds:
            user, groups = entry
            gs = list(groups)
            if AUTHENTICATED not in gs:
                gs.append(AUTHENTICATED)
            status = {"authenticated": True, "user": {"username": user, "uid": user, "groups": gs},
                      "audiences": auds}
        return {"kind": "TokenReview", "apiVersion": "authentication.k8s.io/v1",
                "metadata": _md(body), "spec": spec, "status": status}

    # ------------------------------------------------------------ SubjectAccessReview

    def subject_access_review(self, body: Any) -> Obj:
        if not isinstance(body, dict):
            raise errors.bad_request("the body of the request must be a SubjectAccessReview object")
        spec = body.get("spec") if isinstance(body.get("spec"), dict) else {}
        assert isinstance(spec, dict)
        ra, nra = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
        causes: list[tuple[str, str, str]] = []
        if ra is None and nra is None:
            causes.append(("spec.resourceAttributes", "FieldValueRequired",
                           "Required value: exactly one of nonResourceAttributes or resourceAttributes must be specified"))
        if ra is not None and nra is not None:
            causes.append(("spec.nonResourceAttributes", "FieldValueInvalid",
                           "Invalid value: cannot be specified in combination with resourceAttributes"))
        user = str(spec.get("user") or "")
        if not user and not spec.get("groups"):
            causes.append(("spec.user", "FieldValueInvalid",
                           'Invalid value: "": at least one of user or group must be specified'))
        if causes:
            raise errors.invalid("SubjectAccessReview", "", causes, group="authorization.k8s.io")
        if isinstance(nra, dict):
            verb, path = str(nra.get("verb") or ""), str(nra.get("path") or "")
        else:
            attrs = ra if isinstance(ra, dict) else {}
            verb = str(attrs.get("verb") or "")
            path = str(attrs.get("resource") or "")
            if attrs.get("group"):
                path += f".{attrs['group']}"
            if attrs.get("subresource"):
                path += f"/{attrs['subresource']}"
        status: Obj = {"allowed": False}
        for ru, rv, rp in self.allow:
            if _match(ru, user) and _match(rv, verb) and _match(rp, path):
                status = {"allowed": True, "reason": f'allowed by sandbox rule "{ru}:{rv}:{rp}"'}
                break
        else:
            status["reason"] = f'no sandbox --auth-allow rule lets user "{user}" {verb} "{path}"'
        return {"kind": "SubjectAccessReview", "apiVersion": "authorization.k8s.io/v1",
                "metadata": _md(body), "spec": spec, "status": status}


def _md(body: Obj) -> Obj:
    md = body.get("metadata")
    out = dict(md) if isinstance(md, dict) else {}
    out.setdefault("creationTimestamp", None)
    return out
