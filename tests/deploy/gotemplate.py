"""A small Go text/template + Sprig renderer, enough to render our Helm chart in tests.

No helm binary is reachable from our package registries, yet the chart must be rendered and
validated in CI. This module implements exactly the subset of Go templates and Sprig functions
the chart in ``deploy/helm/kube-py-scheduler`` uses, with Helm's conventions on top
(``.Values``/``.Release``/``.Chart``, ``include``, ``required``, missing keys print as empty).
Anything outside the subset is a :class:`TemplateError`, so the chart cannot quietly start
relying on a feature this renderer gets wrong.

Supported: text and actions with ``{{-``/``-}}`` trimming and ``{{/* comments */}}``; field
chains on ``.``, ``$`` and variables; ``$x := ...`` / ``$x = ...``; string, raw-string, number,
bool and nil literals; parenthesised pipelines; ``|`` pipelines; ``if``/``else if``/``else``,
``with``/``else``, ``range`` over lists and maps (sorted keys) with ``$i, $v :=`` and ``else``;
``define``/``template``/``include``. Functions: ``eq ne lt le gt ge and or not len index
print printf`` (Go builtins) and ``default quote toYaml nindent indent trunc trimSuffix
sha256sum required fail ternary contains replace b64enc`` (Sprig/Helm).

Known divergences from Helm, none of which the chart depends on: Helm loads values through
JSON, so every number is a float64 and prints as Go's ``%v`` would (``1e+06``); here integers
stay integers. ``toYaml`` follows go-yaml v2's choices (sorted keys, block style, lists not
indented under their key, literal blocks for multi-line strings, double quotes for strings that
look like other types) but its emitter is PyYAML's, so rarer scalars may be styled differently.
"""

from __future__ import annotations

import base64
import hashlib
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import yaml

__all__ = ["Template", "TemplateError", "go_str", "render_chart", "to_yaml"]


class TemplateError(Exception):
    """A template failed to parse or execute (Go's template errors, or ``required``)."""


# --- values as Go prints them ------------------------------------------------------------


def _go_float(v: float) -> str:
    """``fmt.Sprint(float64)``: shortest digits, exponent form below 1e-4 or from 1e+06 on."""
    if math.isnan(v):
        return "NaN"
    if v in (float("inf"), float("-inf")):
        return "+Inf" if v > 0 else "-Inf"
    d = Decimal(repr(v))
    if d == 0:
        return "-0" if str(d).startswith("-") else "0"
    exp = d.adjusted()
    if exp < -4 or exp >= 6:
        sign, digits, _ = d.as_tuple()
        text = "".join(map(str, digits)).rstrip("0") or "0"
        mant = text[0] + ("." + text[1:] if len(text) > 1 else "")
        return f"{'-' if sign else ''}{mant}e{'-' if exp < 0 else '+'}{abs(exp):02d}"
    text = format(d, "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


def go_str(v: Any) -> str:
    """``fmt.Sprint(v)`` for the value kinds templates see (nil prints empty, as in Helm)."""
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return _go_float(v)
    if isinstance(v, str):
        return v
    if isinstance(v, Mapping):
        return "map[" + " ".join(f"{go_str(k)}:{_go_elem(v[k])}" for k in sorted(v)) + "]"
    if isinstance(v, (list, tuple)):
        return "[" + " ".join(_go_elem(x) for x in v) + "]"
    raise TemplateError(f"cannot print value of type {type(v).__name__}")


def _go_elem(v: Any) -> str:
    return "<nil>" if v is None else go_str(v)


_GO_ESCAPES = {"\a": r"\a", "\b": r"\b", "\f": r"\f", "\n": r"\n", "\r": r"\r",
               "\t": r"\t", "\v": r"\v", "\\": r"\\", '"': r"\""}


def _go_quote(s: str) -> str:
    """``strconv.Quote``: printable runes verbatim, the rest escaped."""
    out = []
    for ch in s:
        if ch in _GO_ESCAPES:
            out.append(_GO_ESCAPES[ch])
        elif ch.isprintable():
            out.append(ch)
        elif ord(ch) < 0x80:
            out.append(f"\\x{ord(ch):02x}")
        elif ord(ch) < 0x10000:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    return '"' + "".join(out) + '"'


def truth(v: Any) -> bool:
    """Go template truth: false, 0, nil and empty strings/lists/maps are false."""
    if v is None:
        return False
    if isinstance(v, (bool, int, float)):
        return bool(v)
    if isinstance(v, (str, list, tuple, Mapping)):
        return len(v) > 0
    return True


class _YamlDumper(getattr(yaml, "CSafeDumper", yaml.SafeDumper)):  # type: ignore[misc]
    pass


_STR_TAG = "tag:yaml.org,2002:str"
_YAML_TAG = "tag:yaml.org,2002:yaml"  # PyYAML's tag for "*", "&", "!": indicators, not types


def _repr_str(dumper: Any, s: str) -> yaml.ScalarNode:
    # go-yaml v2 (under sigs.k8s.io/yaml): multi-line strings as literal blocks, strings that
    # would read back as another type ("true", "10") double-quoted, otherwise plain when the
    # emitter allows it (else single-quoted, as PyYAML does too).
    style: str | None = None
    if "\n" in s:
        style = "|"
    elif dumper.resolve(yaml.ScalarNode, s, (True, False)) not in (_STR_TAG, _YAML_TAG):
        style = '"'
    node: yaml.ScalarNode = dumper.represent_scalar(_STR_TAG, s, style=style)
    return node


_YamlDumper.add_representer(str, _repr_str)


def to_yaml(v: Any) -> str:
    """Helm's ``toYaml``: sigs.k8s.io/yaml output without the trailing newline."""
    if v is None:
        return "null"
    text = yaml.dump(v, Dumper=_YamlDumper, default_flow_style=False, sort_keys=True,
                     allow_unicode=True, width=1 << 30)
    if not isinstance(v, (Mapping, list, tuple)) and text.endswith("\n...\n"):
        text = text[:-4]
    return text.removesuffix("\n")


# --- functions ---------------------------------------------------------------------------


def _printf(fmt: str, *args: Any) -> str:
    out: list[str] = []
    it = iter(args)
    i = 0
    while i < len(fmt):
        ch = fmt[i]
        if ch != "%":
            out.append(ch)
            i += 1
            continue
        verb = fmt[i + 1] if i + 1 < len(fmt) else ""
        i += 2
        if verb == "%":
            out.append("%")
            continue
        try:
            arg = next(it)
        except StopIteration:
            out.append(f"%!{verb}(MISSING)")
            continue
        if verb in ("s", "v"):
            out.append("<nil>" if arg is None else go_str(arg))
        elif verb == "d" and isinstance(arg, int) and not isinstance(arg, bool):
            out.append(str(arg))
        elif verb == "q" and isinstance(arg, str):
            out.append(_go_quote(arg))
        elif verb == "t" and isinstance(arg, bool):
            out.append(go_str(arg))
        else:
            raise TemplateError(f"printf: verb %{verb} with {arg!r} is not supported here")
    extra = list(it)
    if extra:
        out.append("%!(EXTRA " + ", ".join(f"{type(a).__name__}={go_str(a)}" for a in extra)
                   + ")")
    return "".join(out)


def _print(*args: Any) -> str:
    # fmt.Sprint: a space between operands when neither side is a string
    out = ""
    for i, a in enumerate(args):
        if i and not isinstance(a, str) and not isinstance(args[i - 1], str):
            out += " "
        out += "<nil>" if a is None else go_str(a)
    return out


def _default(dflt: Any, *given: Any) -> Any:
    if not given or not truth(given[0]):
        return dflt
    return given[0]


def _quote(*args: Any) -> str:
    return " ".join(_go_quote(go_str(a)) for a in args if a is not None)


def _indent(n: int, s: Any) -> str:
    pad = " " * n
    return pad + go_str(s).replace("\n", "\n" + pad)


def _nindent(n: int, s: Any) -> str:
    return "\n" + _indent(n, s)


def _trunc(n: int, s: Any) -> str:
    text = go_str(s)
    if n < 0 and len(text) + n > 0:
        return text[len(text) + n:]
    if n >= 0 and len(text) > n:
        return text[:n]
    return text


def _required(msg: str, val: Any) -> Any:
    if val is None or (isinstance(val, str) and val == ""):
        raise TemplateError(msg)
    return val


def _comparable(a: Any, b: Any) -> tuple[Any, Any]:
    num = (int, float)
    if isinstance(a, bool) != isinstance(b, bool):
        raise TemplateError(f"incompatible types for comparison: {a!r} and {b!r}")
    if isinstance(a, num) and isinstance(b, num) and type(a) is not type(b):
        raise TemplateError(f"incompatible types for comparison: {a!r} and {b!r}")
    if not (isinstance(a, num) and isinstance(b, num)) and type(a) is not type(b):
        raise TemplateError(f"incompatible types for comparison: {a!r} and {b!r}")
    if not isinstance(a, (int, float, str)):
        raise TemplateError(f"uncomparable type {type(a).__name__}: {a!r}")
    return a, b


def _eq(a: Any, *others: Any) -> bool:
    if not others:
        raise TemplateError("missing argument for comparison")
    for b in others:
        if a is None or b is None:
            if a is None and b is None:
                return True
            continue
        x, y = _comparable(a, b)
        if x == y:
            return True
    return False


def _ordered(op: Callable[[Any, Any], bool]) -> Callable[[Any, Any], bool]:
    def cmp(a: Any, b: Any) -> bool:
        x, y = _comparable(a, b)
        return op(x, y)
    return cmp


def _fail(msg: str) -> Any:
    raise TemplateError(msg)


def _ternary(if_true: Any, if_false: Any, cond: Any) -> Any:
    if not isinstance(cond, bool):
        raise TemplateError(f"ternary: condition must be a bool, got {cond!r}")
    return if_true if cond else if_false


def _index(v: Any, *keys: Any) -> Any:
    for k in keys:
        if v is None:
            raise TemplateError("index of untyped nil")
        if isinstance(v, Mapping):
            v = v.get(k)
        elif isinstance(v, (list, tuple, str)) and isinstance(k, int) \
                and not isinstance(k, bool):
            if not 0 <= k < len(v):
                raise TemplateError(f"error calling index: index out of range: {k}")
            v = v[k]
        else:
            raise TemplateError(f"can't index item of type {type(v).__name__} with {k!r}")
    return v


def _len(v: Any) -> int:
    if isinstance(v, (str, list, tuple, Mapping)):
        return len(v)
    raise TemplateError(f"len of type {type(v).__name__}")


def _strarg(fn: Callable[..., Any]) -> Callable[..., Any]:
    def wrapped(*args: Any) -> Any:
        return fn(*[go_str(a) if not isinstance(a, str) else a for a in args])
    return wrapped


_FUNCS: dict[str, Callable[..., Any]] = {
    "eq": _eq,
    "ne": lambda a, b: not _eq(a, b),
    "lt": _ordered(lambda a, b: a < b),
    "le": _ordered(lambda a, b: a <= b),
    "gt": _ordered(lambda a, b: a > b),
    "ge": _ordered(lambda a, b: a >= b),
    "not": lambda v: not truth(v),
    "len": _len,
    "index": _index,
    "print": _print,
    "printf": _printf,
    "default": _default,
    "quote": _quote,
    "toYaml": to_yaml,
    "indent": _indent,
    "nindent": _nindent,
    "trunc": _trunc,
    "trimSuffix": _strarg(lambda suffix, s: s.removesuffix(suffix)),
    "contains": _strarg(lambda sub, s: sub in s),
    "replace": _strarg(lambda old, new, s: s.replace(old, new)),
    "sha256sum": _strarg(lambda s: hashlib.sha256(s.encode()).hexdigest()),
    "b64enc": _strarg(lambda s: base64.b64encode(s.encode()).decode()),
    "required": _required,
    "fail": _fail,
    "ternary": _ternary,
}
# `and`/`or` evaluate their arguments lazily (Go >= 1.18); `include` needs the template set.
_SPECIAL = {"and", "or", "include"}
_KEYWORDS = {"if", "else", "end", "range", "with", "define", "template", "block", "break",
             "continue"}


# --- lexing and parsing ------------------------------------------------------------------


@dataclass
class _Tok:
    kind: str  # field var ident str num bool nil pipe lparen rparen decl assign comma
    value: Any
    chain: tuple[str, ...] = ()


_TOKEN_RE = re.compile(r"""
    (?P<ws>\s+)
  | (?P<decl>:=)
  | (?P<assign>=)
  | (?P<pipe>\|)
  | (?P<lparen>\()
  | (?P<rparen>\)(?:\.[A-Za-z_][A-Za-z0-9_]*)*)
  | (?P<comma>,)
  | (?P<str>"(?:[^"\\\n]|\\.)*")
  | (?P<raw>`[^`]*`)
  | (?P<num>-?(?:[0-9]+\.[0-9]*|\.[0-9]+|[0-9]+)(?:[eE][-+]?[0-9]+)?(?![A-Za-z_.]))
  | (?P<var>\$[A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)
  | (?P<field>(?:\.[A-Za-z_][A-Za-z0-9_]*)+|\.)
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
""", re.VERBOSE)

_STR_ESCAPE_RE = re.compile(r"\\(x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|[0-7]{3}|.)")
_SIMPLE_ESC = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v",
               "\\": "\\", '"': '"'}


def _unescape(body: str) -> str:
    def sub(m: re.Match[str]) -> str:
        e = m.group(1)
        if e in _SIMPLE_ESC:
            return _SIMPLE_ESC[e]
        if e[0] in "xuU":
            return chr(int(e[1:], 16))
        if e[0] in "01234567" and len(e) == 3:
            return chr(int(e, 8))
        raise TemplateError(f"unknown escape sequence \\{e}")
    return _STR_ESCAPE_RE.sub(sub, body)


def _lex(src: str, where: str) -> list[_Tok]:
    toks: list[_Tok] = []
    pos = 0
    while pos < len(src):
        m = _TOKEN_RE.match(src, pos)
        if m is None:
            raise TemplateError(f"{where}: unexpected {src[pos:pos + 10]!r} in action")
        pos = m.end()
        kind = m.lastgroup
        text = m.group()
        if kind == "ws":
            continue
        if kind == "str":
            toks.append(_Tok("str", _unescape(text[1:-1])))
        elif kind == "raw":
            toks.append(_Tok("str", text[1:-1]))
        elif kind == "num":
            is_float = any(c in text for c in ".eE")
            toks.append(_Tok("num", float(text) if is_float else int(text)))
        elif kind == "var":
            name, *chain = text.split(".")
            toks.append(_Tok("var", name, tuple(chain)))
        elif kind == "field":
            toks.append(_Tok("field", None, tuple(text.split(".")[1:]) if text != "." else ()))
        elif kind == "rparen":
            toks.append(_Tok("rparen", None, tuple(text.split(".")[1:])))
        elif kind == "ident":
            if text in ("true", "false"):
                toks.append(_Tok("bool", text == "true"))
            elif text == "nil":
                toks.append(_Tok("nil", None))
            else:
                toks.append(_Tok("ident", text))
        else:
            assert kind is not None
            toks.append(_Tok(kind, text))
    return toks


@dataclass
class _Pipeline:
    decl: list[str]
    assign: bool  # `=` rather than `:=`
    cmds: list[list[Any]]  # each command: list of args (_Tok or _Pipeline with chain)


@dataclass
class _Sub:
    pipe: _Pipeline
    chain: tuple[str, ...]


@dataclass
class _Text:
    text: str


@dataclass
class _Action:
    pipe: _Pipeline


@dataclass
class _If:
    branches: list[tuple[_Pipeline, list[Any]]]
    orelse: list[Any] = field(default_factory=list)


@dataclass
class _With:
    pipe: _Pipeline
    body: list[Any]
    orelse: list[Any] = field(default_factory=list)


@dataclass
class _Range:
    pipe: _Pipeline
    body: list[Any]
    orelse: list[Any] = field(default_factory=list)


@dataclass
class _Var:
    """A template variable; scopes are lists of these so `$x = ...` reaches outer scopes."""

    name: str
    value: Any


@dataclass
class _TemplateCall:
    name: str
    pipe: _Pipeline | None


class _Parser:
    def __init__(self, toks: list[_Tok], where: str) -> None:
        self.toks = toks
        self.pos = 0
        self.where = where

    def fail(self, msg: str) -> TemplateError:
        return TemplateError(f"{self.where}: {msg}")

    def peek(self) -> _Tok | None:
        return self.toks[self.pos] if self.pos < len(self.toks) else None

    def take(self) -> _Tok:
        tok = self.peek()
        if tok is None:
            raise self.fail("unexpected end of action")
        self.pos += 1
        return tok

    def done(self) -> None:
        if self.peek() is not None:
            raise self.fail(f"unexpected {self.peek()!r} in action")

    def pipeline(self, *, allow_decl: bool = True, max_vars: int = 1) -> _Pipeline:
        decl: list[str] = []
        assign = False
        if allow_decl:
            save = self.pos
            names: list[str] = []
            while True:
                tok = self.peek()
                if tok is None or tok.kind != "var" or tok.chain:
                    break
                self.pos += 1
                names.append(tok.value)
                nxt = self.peek()
                if nxt is not None and nxt.kind == "comma" and len(names) < max_vars:
                    self.pos += 1
                    continue
                break
            nxt = self.peek()
            if names and nxt is not None and nxt.kind in ("decl", "assign"):
                self.pos += 1
                decl, assign = names, nxt.kind == "assign"
            else:
                self.pos = save
        cmds: list[list[Any]] = []
        while True:
            cmd: list[Any] = []
            while True:
                tok = self.peek()
                if tok is None or tok.kind in ("pipe", "rparen"):
                    break
                self.pos += 1
                if tok.kind == "lparen":
                    sub = self.pipeline(allow_decl=False)
                    close = self.take()
                    if close.kind != "rparen":
                        raise self.fail("unclosed parenthesis")
                    cmd.append(_Sub(sub, close.chain))
                elif tok.kind in ("decl", "assign", "comma"):
                    raise self.fail(f"unexpected {tok.value!r}")
                elif tok.kind == "ident" and tok.value in _KEYWORDS:
                    raise self.fail(f"unexpected keyword {tok.value!r}")
                else:
                    if tok.kind == "ident" and tok.value not in _FUNCS \
                            and tok.value not in _SPECIAL:
                        raise self.fail(f'function "{tok.value}" not defined')
                    cmd.append(tok)
            if not cmd:
                raise self.fail("missing command in pipeline")
            cmds.append(cmd)
            tok = self.peek()
            if tok is not None and tok.kind == "pipe":
                self.pos += 1
                continue
            break
        return _Pipeline(decl, assign, cmds)


def _split(src: str, name: str) -> list[tuple[str, Any]]:
    """Split source into ("text", str) and ("action", (tokens, where)) items, applying trims."""
    items: list[tuple[str, Any]] = []
    pos = 0
    trim_next = False
    while True:
        start = src.find("{{", pos)
        text = src[pos:] if start < 0 else src[pos:start]
        if trim_next:
            text = text.lstrip(" \t\r\n")
        if start < 0:
            items.append(("text", text))
            return items
        line = src.count("\n", 0, start) + 1
        where = f"{name}:{line}"
        inner_start = start + 2
        left_trim = re.match(r"-[ \t\r\n]", src[inner_start:inner_start + 2]) is not None
        if left_trim:
            text = text.rstrip(" \t\r\n")
            inner_start += 1
        items.append(("text", text))
        # find the closing delimiter outside of string literals
        i = inner_start
        stripped = src[inner_start:].lstrip()
        if stripped.startswith("/*"):
            end_comment = src.find("*/", inner_start)
            if end_comment < 0:
                raise TemplateError(f"{where}: unclosed comment")
            i = end_comment + 2
        quote = ""
        while i < len(src):
            ch = src[i]
            if quote:
                if ch == "\\" and quote == '"':
                    i += 2
                    continue
                if ch == quote:
                    quote = ""
            elif ch in "\"`":
                quote = ch
            elif src.startswith("}}", i):
                break
            i += 1
        else:
            raise TemplateError(f"{where}: unclosed action")
        inner_end = i
        right_trim = inner_end - 2 >= inner_start and src[inner_end - 1] == "-" \
            and src[inner_end - 2] in " \t\r\n"
        body = src[inner_start:inner_end - 1 if right_trim else inner_end]
        if not body.strip().startswith("/*"):
            items.append(("action", (_lex(body, where), where)))
        trim_next = right_trim
        pos = inner_end + 2


class Template:
    """A set of parsed templates: named ``define`` blocks plus one body per source file."""

    def __init__(self) -> None:
        self.defines: dict[str, list[Any]] = {}
        self.files: dict[str, list[Any]] = {}

    def add(self, name: str, src: str) -> None:
        items = _split(src, name)
        pos = 0

        def parse_list(stop: set[str]) -> tuple[list[Any], str, Any]:
            nonlocal pos
            out: list[Any] = []
            while pos < len(items):
                kind, payload = items[pos]
                pos += 1
                if kind == "text":
                    if payload:
                        out.append(_Text(payload))
                    continue
                toks, where = payload
                p = _Parser(toks, where)
                first = p.peek()
                if first is None:
                    raise TemplateError(f"{where}: missing value for command")
                kw = first.value if first.kind == "ident" and first.value in _KEYWORDS else None
                if kw in ("end", "else"):
                    if kw not in stop:
                        raise TemplateError(f"{where}: unexpected {{{{{kw}}}}}")
                    p.take()
                    return out, kw, p
                if kw is None:
                    pipe = p.pipeline()
                    p.done()
                    out.append(_Action(pipe))
                    continue
                p.take()
                if kw == "if":
                    out.append(parse_if(p))
                elif kw in ("with", "range"):
                    pipe = p.pipeline(max_vars=2 if kw == "range" else 1)
                    p.done()
                    body, term, ep = parse_list({"end", "else"})
                    orelse: list[Any] = []
                    if term == "else":
                        if ep.peek() is not None:
                            raise TemplateError(f"{ep.where}: only `else if` is supported")
                        orelse, _, _ = parse_list({"end"})
                    out.append(_With(pipe, body, orelse) if kw == "with"
                               else _Range(pipe, body, orelse))
                elif kw == "define":
                    tname = p.take()
                    if tname.kind != "str":
                        raise TemplateError(f"{where}: define needs a string name")
                    p.done()
                    body, _, _ = parse_list({"end"})
                    self.defines[tname.value] = body
                elif kw == "template":
                    tname = p.take()
                    if tname.kind != "str":
                        raise TemplateError(f"{where}: template needs a string name")
                    tpipe = p.pipeline(allow_decl=False) if p.peek() is not None else None
                    p.done()
                    out.append(_TemplateCall(tname.value, tpipe))
                else:
                    raise TemplateError(f"{where}: {{{{{kw}}}}} is not supported")
            if stop:
                raise TemplateError(f"{name}: unexpected EOF (missing {{{{end}}}})")
            return out, "", None

        def parse_if(p: _Parser) -> _If:
            pipe = p.pipeline()
            p.done()
            node = _If([])
            while True:
                body, term, ep = parse_list({"end", "else"})
                node.branches.append((pipe, body))
                if term == "end":
                    return node
                nxt = ep.peek()
                if nxt is not None and nxt.kind == "ident" and nxt.value == "if":
                    ep.take()
                    pipe = ep.pipeline()
                    ep.done()
                    continue
                ep.done()
                node.orelse, _, _ = parse_list({"end"})
                return node

        body, _, _ = parse_list(set())
        self.files[name] = body

    # --- execution -----------------------------------------------------------------------

    def render(self, name: str, data: Any) -> str:
        """Execute the body of source file ``name`` (or a defined template) with ``data``."""
        body = self.files.get(name)
        if body is None:
            body = self.defines.get(name)
        if body is None:
            raise TemplateError(f'no template "{name}"')
        out: list[str] = []
        self._exec(body, data, [_Var("$", data)], out)
        return "".join(out)

    def include(self, name: str, data: Any) -> str:
        if name not in self.defines:
            raise TemplateError(f'no template "{name}" associated with template')
        out: list[str] = []
        self._exec(self.defines[name], data, [_Var("$", data)], out)
        return "".join(out)

    def _exec(self, nodes: list[Any], dot: Any, scope: list[_Var],
              out: list[str]) -> None:
        mark = len(scope)
        for node in nodes:
            if isinstance(node, _Text):
                out.append(node.text)
            elif isinstance(node, _Action):
                val = self._pipe(node.pipe, dot, scope)
                if not node.pipe.decl:
                    out.append(go_str(val))
            elif isinstance(node, _If):
                for pipe, body in node.branches:
                    inner = scope[:]
                    if truth(self._pipe(pipe, dot, inner)):
                        self._exec(body, dot, inner, out)
                        break
                else:
                    self._exec(node.orelse, dot, scope[:], out)
            elif isinstance(node, _With):
                inner = scope[:]
                val = self._pipe(node.pipe, dot, inner)
                if truth(val):
                    self._exec(node.body, val, inner, out)
                else:
                    self._exec(node.orelse, dot, scope[:], out)
            elif isinstance(node, _Range):
                self._range(node, dot, scope, out)
            elif isinstance(node, _TemplateCall):
                arg = self._pipe(node.pipe, dot, scope[:]) if node.pipe else None
                if node.name not in self.defines:
                    raise TemplateError(f'no template "{node.name}" associated with template')
                self._exec(self.defines[node.name], arg, [_Var("$", arg)], out)
        del scope[mark:]

    def _range(self, node: _Range, dot: Any, scope: list[_Var],
               out: list[str]) -> None:
        inner = scope[:]
        pipe = _Pipeline([], False, node.pipe.cmds)
        val = self._pipe(pipe, dot, inner)
        if isinstance(val, Mapping):
            pairs: list[tuple[Any, Any]] = [(k, val[k]) for k in sorted(val)]
        elif isinstance(val, (list, tuple)):
            pairs = list(enumerate(val))
        elif val is None:
            pairs = []
        else:
            raise TemplateError(f"range can't iterate over {go_str(val)}")
        if not pairs:
            self._exec(node.orelse, dot, scope[:], out)
            return
        for key, elem in pairs:
            it_scope = inner[:]
            if len(node.pipe.decl) == 1:
                it_scope.append(_Var(node.pipe.decl[0], elem))
            elif len(node.pipe.decl) == 2:
                it_scope += [_Var(node.pipe.decl[0], key), _Var(node.pipe.decl[1], elem)]
            self._exec(node.body, elem, it_scope, out)

    def _pipe(self, pipe: _Pipeline, dot: Any, scope: list[_Var]) -> Any:
        val: Any = None
        for i, cmd in enumerate(pipe.cmds):
            val = self._cmd(cmd, dot, scope, piped=(val,) if i else ())
        if pipe.decl:
            name = pipe.decl[0]
            if pipe.assign:
                for var in reversed(scope):
                    if var.name == name:
                        var.value = val
                        break
                else:
                    raise TemplateError(f"undefined variable: {name}")
            else:
                scope.append(_Var(name, val))
        return val

    def _cmd(self, cmd: list[Any], dot: Any, scope: list[_Var],
             piped: tuple[Any, ...]) -> Any:
        head = cmd[0]
        if isinstance(head, _Tok) and head.kind == "ident":
            name = head.value
            if name in ("and", "or"):
                args = cmd[1:]
                if len(args) + len(piped) < 1:
                    raise TemplateError(f"wrong number of args for {name}")
                val: Any = None
                for a in args:
                    val = self._arg(a, dot, scope)
                    if truth(val) != (name == "and"):
                        return val
                if piped:
                    val = piped[0]
                return val
            values = [self._arg(a, dot, scope) for a in cmd[1:]] + list(piped)
            if name == "include":
                if len(values) != 2 or not isinstance(values[0], str):
                    raise TemplateError("include needs a template name and one argument")
                return self.include(values[0], values[1])
            try:
                return _FUNCS[name](*values)
            except TypeError as exc:
                raise TemplateError(f"error calling {name}: {exc}") from None
        if len(cmd) > 1 or piped:
            raise TemplateError(f"can't give argument to non-function {self._describe(head)}")
        return self._arg(head, dot, scope)

    @staticmethod
    def _describe(arg: Any) -> str:
        if isinstance(arg, _Tok):
            return arg.kind + ("." + ".".join(arg.chain) if arg.chain else "")
        return "(pipeline)"

    def _arg(self, arg: Any, dot: Any, scope: list[_Var]) -> Any:
        if isinstance(arg, _Sub):
            return _fields(self._pipe(arg.pipe, dot, scope[:]), arg.chain)
        tok: _Tok = arg
        if tok.kind == "field":
            return _fields(dot, tok.chain)
        if tok.kind == "var":
            for var in reversed(scope):
                if var.name == tok.value:
                    return _fields(var.value, tok.chain)
            raise TemplateError(f"undefined variable: {tok.value}")
        if tok.kind in ("str", "num", "bool", "nil"):
            return tok.value
        if tok.kind == "ident":
            # a function used as an argument is called without arguments
            return self._cmd([tok], dot, scope, ())
        raise TemplateError(f"unexpected {tok.kind} in command")


def _fields(val: Any, chain: tuple[str, ...]) -> Any:
    for i, name in enumerate(chain):
        if val is None:
            raise TemplateError(f"nil pointer evaluating interface {{}}.{name}")
        if not isinstance(val, Mapping):
            raise TemplateError(f"can't evaluate field {name} in type {type(val).__name__}")
        val = val.get(name)
    return val


# --- Helm conventions --------------------------------------------------------------------


def merge_values(base: Any, override: Any) -> Any:
    """Helm's coalescing: maps merge recursively, anything else replaces; null deletes."""
    if not isinstance(base, Mapping) or not isinstance(override, Mapping):
        return override
    out = dict(base)
    for k, v in override.items():
        if v is None:
            out.pop(k, None)
        elif isinstance(v, Mapping) and isinstance(out.get(k), Mapping):
            out[k] = merge_values(out[k], v)
        else:
            out[k] = v
    return out


_CHART_FIELDS = {"apiVersion": "APIVersion", "appVersion": "AppVersion", "kubeVersion":
                 "KubeVersion"}


def render_chart(chart_dir: str | Path, *, values: Mapping[str, Any] | None = None,
                 release_name: str = "release", namespace: str = "default"
                 ) -> dict[str, str]:
    """Render every template of a chart like ``helm template``; returns {path: text}.

    Paths are ``<chart>/templates/<file>`` as Helm prints them in ``# Source:`` comments.
    Files starting with ``_`` only contribute ``define`` blocks and are not returned.
    """
    chart_dir = Path(chart_dir)
    meta = yaml.safe_load((chart_dir / "Chart.yaml").read_text(encoding="utf-8"))
    chart = {_CHART_FIELDS.get(k, k[:1].upper() + k[1:]): v for k, v in meta.items()}
    defaults = yaml.safe_load((chart_dir / "values.yaml").read_text(encoding="utf-8")) or {}
    vals = merge_values(defaults, dict(values or {}))
    name = meta["name"]
    data = {
        "Values": vals,
        "Chart": chart,
        "Release": {"Name": release_name, "Namespace": namespace, "Service": "Helm",
                    "IsInstall": True, "IsUpgrade": False, "Revision": 1},
        "Template": {"BasePath": f"{name}/templates"},
    }
    tpl = Template()
    paths = sorted(p for p in (chart_dir / "templates").rglob("*") if p.is_file())
    for p in paths:
        tpl.add(f"{name}/templates/{p.relative_to(chart_dir / 'templates').as_posix()}",
                p.read_text(encoding="utf-8"))
    out: dict[str, str] = {}
    for p in paths:
        if p.name.startswith("_"):
            continue
        key = f"{name}/templates/{p.relative_to(chart_dir / 'templates').as_posix()}"
        file_data = dict(data, Template={"BasePath": f"{name}/templates", "Name": key})
        out[key] = tpl.render(key, file_data)
    return out
