"""The served resource types, by group/version/plural: built-ins plus what CRDs define."""

from __future__ import annotations

from .resources import ResourceType, builtin_types


class Catalog:
    """Served resource types, by (group, version, plural)."""

    def __init__(self) -> None:
        self.by_gvr: dict[tuple[str, str, str], ResourceType] = {}
        self.crd_types: dict[str, list[ResourceType]] = {}
        self._builtin: dict[tuple[str, str], ResourceType] = {}
        for rt in builtin_types():
            self.add(rt)

    def add(self, rt: ResourceType) -> None:
        self.by_gvr[(rt.group, rt.version, rt.plural)] = rt

    def get(self, group: str, version: str, plural: str) -> ResourceType | None:
        return self.by_gvr.get((group, version, plural))

    def builtin(self, group: str, plural: str) -> ResourceType:
        rt = self._builtin.get((group, plural))
        if rt is None:
            for (g, _, p), cand in self.by_gvr.items():
                if g == group and p == plural:
                    rt = self._builtin[(group, plural)] = cand
                    break
            else:
                raise KeyError(plural)
        return rt

    def has_group_version(self, group: str, version: str) -> bool:
        return any(g == group and v == version for g, v, _ in self.by_gvr)

    def group_versions(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for g, v, _ in self.by_gvr:
            vs = out.setdefault(g, [])
            if v not in vs:
                vs.append(v)
        return out

    def in_group_version(self, group: str, version: str) -> list[ResourceType]:
        return [rt for (g, v, _), rt in self.by_gvr.items() if g == group and v == version]
