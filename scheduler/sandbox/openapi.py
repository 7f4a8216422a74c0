"""A minimal OpenAPI v3 (``/openapi/v3``): just enough for ``kubectl apply`` to work.

kubectl's default ``--validate=strict`` asks OpenAPI v3 whether the server supports
server-side field validation (a ``fieldValidation`` query parameter on the PATCH operation of
the kind); if not, it downloads OpenAPI v2 for client-side validation and fails when that is
missing. So each group-version document lists, per resource, a PATCH operation tagged with
its group-version-kind and that parameter, without schemas. The PATCH content types omit
strategic merge, so kubectl computes strategic patches from its compiled-in types (built-ins)
or JSON merge patches (custom resources), as it does against any server without schemas.
``kubectl explain`` needs real schemas and is not supported.
"""

from __future__ import annotations

from typing import Any

from .catalog import Catalog

Obj = dict[str, Any]

_PARAMS = [
    {"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": True}},
    {"name": "fieldManager", "in": "query", "schema": {"type": "string", "uniqueItems": True}},
    {"name": "dryRun", "in": "query", "schema": {"type": "string", "uniqueItems": True}},
]
_CONTENT = {
    "application/json-patch+json": {"schema": {"type": "object"}},
    "application/merge-patch+json": {"schema": {"type": "object"}},
    "application/apply-patch+yaml": {"schema": {"type": "object"}},
}


def gv_path(group: str, version: str) -> str:
    return f"api/{version}" if not group else f"apis/{group}/{version}"


def root(cat: Catalog) -> Obj:
    paths = {}
    for group, versions in cat.group_versions().items():
        for v in versions:
            p = gv_path(group, v)
            paths[p] = {"serverRelativeURL": f"/openapi/v3/{p}"}
    return {"paths": paths}


def group_version(cat: Catalog, group: str, version: str) -> Obj:
    paths: Obj = {}
    for rt in cat.in_group_version(group, version):
        base = "/" + gv_path(group, version)
        item = f"{base}/namespaces/{{namespace}}/{rt.plural}/{{name}}" if rt.namespaced else f"{base}/{rt.plural}/{{name}}"
        gvk = {"group": group, "version": version, "kind": rt.kind}
        paths[item] = {
            "patch": {
                "operationId": f"patch{rt.kind}",
                "parameters": list(_PARAMS),
                "requestBody": {"content": dict(_CONTENT), "required": True},
                "responses": {"200": {"description": "OK"}},
                "x-kubernetes-action": "patch",
                "x-kubernetes-group-version-kind": gvk,
            }
        }
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.37.0-sandbox"},
        "paths": paths,
        "components": {"schemas": {}},
    }


def v2_document() -> Obj:
    return {"swagger": "2.0", "info": {"title": "Kubernetes", "version": "v1.37.0-sandbox"},
            "paths": {}, "definitions": {}}
