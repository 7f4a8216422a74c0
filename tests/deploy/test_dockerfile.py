"""The Dockerfile, checked by reading it (no Docker engine runs here).

It must name files that exist and are not excluded by .dockerignore, run as a non-root numeric
user created in the final stage, carry no build tools into the final image, start the console
script pyproject.toml declares, and agree with the Deployment (user, port).
"""

from __future__ import annotations

import fnmatch
import importlib
import json
import re
import shlex
import tomllib
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.deploy import support
from tests.deploy.support import REPO, find

DOCKERFILE = REPO / "Dockerfile"
DOCKERIGNORE = REPO / ".dockerignore"
BUILD_TOOLS = {"gcc", "g++", "cc", "clang", "make", "build-essential", "python3-dev",
               "libc6-dev", "cmake", "rustc", "cargo", "git"}


@dataclass
class Stage:
    image: str
    name: str | None
    instructions: list[tuple[str, str]] = field(default_factory=list)

    def all(self, instr: str) -> list[str]:
        return [args for i, args in self.instructions if i == instr]


def _substitute(text: str, env: dict[str, str]) -> str:
    def sub(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2)
        return env.get(name, "")
    return re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)", sub, text)


def parse_dockerfile(text: str) -> tuple[dict[str, str], list[Stage]]:
    """(global ARG defaults, stages) with line continuations joined and comments dropped."""
    lines: list[str] = []
    buf = ""
    for raw in text.splitlines():
        stripped = raw.strip()
        if not buf and (not stripped or stripped.startswith("#")):
            continue
        if stripped.startswith("#"):  # comment lines inside a continuation are skipped
            continue
        if stripped.endswith("\\"):
            buf += stripped[:-1] + " "
            continue
        lines.append(buf + stripped)
        buf = ""
    assert not buf, "Dockerfile ends inside a line continuation"
    global_args: dict[str, str] = {}
    stages: list[Stage] = []
    for line in lines:
        instr, _, args = line.partition(" ")
        instr = instr.upper()
        args = args.strip()
        if instr == "FROM":
            words = [w for w in args.split() if not w.startswith("--")]
            image = _substitute(words[0], global_args)
            name = words[2] if len(words) == 3 and words[1].upper() == "AS" else None
            stages.append(Stage(image, name))
        elif not stages:
            assert instr == "ARG", f"{instr} before the first FROM"
            k, _, v = args.partition("=")
            global_args[k] = v.strip('"')
        else:
            stages[-1].instructions.append((instr, args))
    return global_args, stages


def _words(args: str) -> list[str]:
    """Arguments of a COPY/ENTRYPOINT-like instruction, exec (JSON) or shell form."""
    if args.startswith("["):
        value = json.loads(args)
        assert isinstance(value, list)
        return [str(v) for v in value]
    return shlex.split(args)


def _copies(stage: Stage) -> list[tuple[dict[str, str], list[str], str]]:
    out = []
    for args in stage.all("COPY") + stage.all("ADD"):
        words = _words(args) if args.startswith("[") else args.split()
        flags = {}
        while words and words[0].startswith("--"):
            k, _, v = words.pop(0)[2:].partition("=")
            flags[k] = v
        out.append((flags, words[:-1], words[-1]))
    return out


def _ignored(rel: str, patterns: list[str]) -> bool:
    """Does .dockerignore exclude the path (or one of its parent directories)?"""
    parts = rel.split("/")
    candidates = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
    excluded = False
    for pattern in patterns:
        negate = pattern.startswith("!")
        pat = pattern[1:] if negate else pattern
        pat = pat.strip("/")
        pats = [pat, pat[3:]] if pat.startswith("**/") else [pat]
        if any(fnmatch.fnmatchcase(c, p) for c in candidates for p in pats):
            excluded = not negate
    return excluded


GLOBAL_ARGS, STAGES = parse_dockerfile(DOCKERFILE.read_text(encoding="utf-8"))
FINAL = STAGES[-1]
IGNORE = [ln.strip() for ln in DOCKERIGNORE.read_text(encoding="utf-8").splitlines()
          if ln.strip() and not ln.strip().startswith("#")]
PROJECT: dict[str, Any] = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))


def test_parser_handles_continuations_args_and_forms() -> None:
    args, stages = parse_dockerfile(
        "# c\nARG V=1.2.3\nFROM img:${V} AS b\nRUN a \\\n  # inner\n  && b\n"
        "FROM img:$V\nCOPY --from=b /x /y\nENTRYPOINT [\"p\"]\n")
    assert args == {"V": "1.2.3"}
    assert [(s.image, s.name) for s in stages] == [("img:1.2.3", "b"), ("img:1.2.3", None)]
    assert stages[0].all("RUN") == ["a  && b"]
    assert _copies(stages[1]) == [({"from": "b"}, ["/x"], "/y")]
    assert _ignored("tests/deploy/x.py", ["tests"])
    assert _ignored("a/__pycache__/m.pyc", ["**/__pycache__"])
    assert not _ignored("README.md", ["tests", "*.egg-info"])
    assert not _ignored("keep.md", ["*.md", "!keep.md"])


def test_is_multi_stage_with_named_build_stage() -> None:
    assert len(STAGES) >= 2
    names = [s.name for s in STAGES[:-1]]
    for stage in STAGES:
        for flags, _, _ in _copies(stage):
            if "from" in flags:
                assert flags["from"] in names[:STAGES.index(stage)], flags


def test_every_copy_source_exists_and_is_in_the_build_context() -> None:
    missing, ignored = [], []
    for stage in STAGES:
        for flags, sources, _ in _copies(stage):
            if "from" in flags:
                continue
            for src in sources:
                rel = src.removeprefix("./").rstrip("/")
                if not list(REPO.glob(rel)):
                    missing.append(src)
                elif _ignored(rel, IGNORE):
                    ignored.append(src)
    assert missing == [], f"COPY sources missing from the repository: {missing}"
    assert ignored == [], f"COPY sources excluded by .dockerignore: {ignored}"


def test_build_stage_copies_what_the_package_build_needs() -> None:
    build = STAGES[0]
    copied = {s.removeprefix("./").rstrip("/") for _, srcs, _ in _copies(build) for s in srcs}
    needed = {"pyproject.toml", "scheduler"}
    readme = PROJECT["project"].get("readme")
    if isinstance(readme, str):
        needed.add(readme)
    assert needed <= copied


def test_base_images_are_pinned_slim_python_matching_requires_python() -> None:
    for stage in STAGES:
        repo, _, tag = stage.image.partition(":")
        assert "@sha256:" in stage.image or re.match(r"\d+\.\d+\.\d+", tag), stage.image
        assert tag != "latest"
    repo, _, tag = FINAL.image.partition(":")
    assert repo in ("python", "docker.io/library/python")
    assert "slim" in tag
    version = tuple(int(x) for x in re.match(r"(\d+)\.(\d+)\.(\d+)", tag).groups())  # type: ignore[union-attr]
    minimum = re.fullmatch(r">=\s*(\d+)\.(\d+)", PROJECT["project"]["requires-python"])
    assert minimum is not None
    assert version[:2] >= (int(minimum.group(1)), int(minimum.group(2)))


def _user_ids() -> tuple[int, int | None]:
    (user,) = FINAL.all("USER")[-1:]
    m = re.fullmatch(r"(\d+)(?::(\d+))?", user)
    assert m, f"USER must be numeric (uid[:gid]) so runAsNonRoot can verify it, got {user!r}"
    return int(m.group(1)), int(m.group(2)) if m.group(2) else None


def test_final_stage_runs_as_a_non_root_user_it_creates() -> None:
    uid, gid = _user_ids()
    assert uid != 0 and gid != 0
    runs = " ".join(FINAL.all("RUN"))
    assert re.search(rf"useradd\b[^&;]*(--uid|-u)[ =]{uid}\b", runs), \
        f"uid {uid} is not created by useradd in the final stage"
    if gid is not None:
        assert re.search(rf"groupadd\b[^&;]*(--gid|-g)[ =]{gid}\b", runs), \
            f"gid {gid} is not created by groupadd in the final stage"
    # USER comes after the RUN that creates it, and nothing runs as root afterwards
    kinds = [i for i, _ in FINAL.instructions]
    last_user = len(kinds) - 1 - kinds[::-1].index("USER")
    assert "RUN" not in kinds[last_user:]


def test_no_build_tools_in_the_final_stage() -> None:
    for run in FINAL.all("RUN"):
        words = set(re.split(r"[\s;&|=]+", run))
        assert not words & BUILD_TOOLS, run
        assert not re.search(r"pip[0-9.]* install[^&;]*\bbuild\b", run), run


def test_entrypoint_is_the_console_script_and_cmd_is_run() -> None:
    (entrypoint,) = FINAL.all("ENTRYPOINT")[-1:]
    (cmd,) = FINAL.all("CMD")[-1:]
    assert entrypoint.startswith("[") and json.loads(entrypoint) == ["kube-py-scheduler"]
    assert cmd.startswith("[") and json.loads(cmd) == ["run"]
    target = PROJECT["project"]["scripts"]["kube-py-scheduler"]
    module, _, func = target.partition(":")
    assert callable(getattr(importlib.import_module(module), func)), target


def test_labels_and_version() -> None:
    labels = " ".join(FINAL.all("LABEL"))
    version = re.search(r'org\.opencontainers\.image\.version="([^"]+)"', labels)
    assert version and version.group(1) == PROJECT["project"]["version"]
    assert "org.opencontainers.image.title=" in labels


def test_dockerignore_keeps_the_context_small() -> None:
    for path in (".git", ".venv", "tests", "tests/deploy/test_dockerfile.py",
                 "scheduler/__pycache__/x.pyc"):
        assert _ignored(path, IGNORE), path
    assert not _ignored("scheduler/cli/main.py", IGNORE)
    assert not _ignored("pyproject.toml", IGNORE)


@pytest.mark.parametrize("source", ["manifests", "chart"])
def test_deployment_agrees_with_the_image(source: str) -> None:
    objs = [o for _, o in support.manifest_objects(examples=False)] if source == "manifests" \
        else support.render()
    deploy = find(objs, "Deployment")
    pod = deploy["spec"]["template"]["spec"]
    uid, gid = _user_ids()
    assert pod["securityContext"]["runAsUser"] == uid
    if gid is not None:
        assert pod["securityContext"]["runAsGroup"] == gid
    (ctr,) = pod["containers"]
    exposed = {int(p.split("/")[0]) for e in FINAL.all("EXPOSE") for p in e.split()}
    assert {p["containerPort"] for p in ctr["ports"]} <= exposed
    assert "command" not in ctr  # the image's ENTRYPOINT runs; args replace CMD
    assert ctr["image"].rpartition(":")[2] == PROJECT["project"]["version"]
