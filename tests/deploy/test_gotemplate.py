"""The Go-template renderer against outputs Go's text/template + Sprig produce (as Helm runs it).

Expected strings are written from Go template semantics: trim markers eat every adjacent
whitespace character, missing map keys print as empty (Helm), ``range`` over a map visits keys
in sorted order, ``toYaml`` sorts keys and drops the trailing newline, and so on.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.deploy.gotemplate import (
    Template,
    TemplateError,
    go_str,
    merge_values,
    render_chart,
)


def run(src: str, data: Any = None, **defines: str) -> str:
    tpl = Template()
    for name, body in defines.items():
        tpl.add(name, body)
    tpl.add("t", src)
    return tpl.render("t", data)


V = {"Values": {"name": "web", "n": 3, "on": True, "off": False, "empty": "", "list": ["a", "b"],
                "map": {"b": 2, "a": 1}, "nested": {"x": {"y": "deep"}}, "zero": 0, "emptymap": {}, "emptylist": [],
                "text": "a\nb"},
     "Release": {"Name": "rel", "Namespace": "ns"}}

CASES: list[tuple[str, str, str]] = [
    # text, actions and trimming
    ("plain", "hello\n", "hello\n"),
    ("field", "{{ .Values.name }}", "web"),
    ("nested", "{{ .Values.nested.x.y }}", "deep"),
    ("int", "n={{ .Values.n }}", "n=3"),
    ("bool", "{{ .Values.on }}/{{ .Values.off }}", "true/false"),
    ("missing key prints empty", "[{{ .Values.nope }}]", "[]"),
    ("left trim eats newlines", "a\n  \n{{- .Values.name }}", "aweb"),
    ("right trim eats newlines", "{{ .Values.name -}}\n\n  b", "webb"),
    ("dash needs a space", "{{-3}}", "-3"),
    ("comment", "a {{- /* gone */ -}} b", "ab"),
    ("plain comment", "a{{/* x */}}b", "ab"),
    ("string with braces", '{{ "}}" }}', "}}"),
    ("raw string", "{{ `a\\n` }}", "a\\n"),
    ("escapes", '{{ "a\\tb\\"" }}', 'a\tb"'),
    ("float literal", "{{ 1.5 }}", "1.5"),
    # control structures
    ("if true", "{{ if .Values.on }}yes{{ end }}", "yes"),
    ("if empty string", "{{ if .Values.empty }}yes{{ else }}no{{ end }}", "no"),
    ("if zero", "{{ if .Values.zero }}yes{{ else }}no{{ end }}", "no"),
    ("if missing", "{{ if .Values.nope }}yes{{ else }}no{{ end }}", "no"),
    ("else if", "{{ if .Values.off }}a{{ else if .Values.n }}b{{ else }}c{{ end }}", "b"),
    ("else if falls through",
     "{{ if .Values.off }}a{{ else if .Values.zero }}b{{ else }}c{{ end }}", "c"),
    ("with sets dot", "{{ with .Values.nested.x }}{{ .y }}{{ end }}", "deep"),
    ("with else", "{{ with .Values.empty }}x{{ else }}none{{ end }}", "none"),
    ("with keeps $", "{{ with .Values.nested }}{{ $.Release.Name }}{{ end }}", "rel"),
    ("range list", "{{ range .Values.list }}[{{ . }}]{{ end }}", "[a][b]"),
    ("range index", "{{ range $i, $v := .Values.list }}{{ $i }}={{ $v }} {{ end }}",
     "0=a 1=b "),
    ("range map sorted", "{{ range $k, $v := .Values.map }}{{ $k }}:{{ $v }};{{ end }}",
     "a:1;b:2;"),
    ("range one var is the element", "{{ range $v := .Values.list }}{{ $v }}{{ end }}", "ab"),
    ("range else", "{{ range .Values.nope }}x{{ else }}empty{{ end }}", "empty"),
    ("range lines", "items:\n{{- range .Values.list }}\n  - {{ . }}\n{{- end }}\n",
     "items:\n  - a\n  - b\n"),
    # variables
    ("variable", "{{ $x := .Values.name }}{{ $x }}", "web"),
    ("assign reaches outer scope", "{{ $x := 1 }}{{ if true }}{{ $x = 2 }}{{ end }}{{ $x }}",
     "2"),
    ("variable scoped to block", "{{ $x := 1 }}{{ if true }}{{ $x := 5 }}{{ end }}{{ $x }}",
     "1"),
    ("variable field", "{{ $v := .Values }}{{ $v.nested.x.y }}", "deep"),
    # pipelines and functions
    ("pipe appends last arg", '{{ .Values.name | printf "%s-%s" "x" }}', "x-web"),
    ("parens", '{{ (printf "%s" .Values.name) | quote }}', '"web"'),
    ("paren field", "{{ (.Values.nested).x.y }}", "deep"),
    ("default given", '{{ .Values.name | default "d" }}', "web"),
    ("default empty", '{{ .Values.empty | default "d" }}', "d"),
    ("default missing", '{{ .Values.nope | default "d" }}', "d"),
    ("default zero", "{{ .Values.zero | default 7 }}", "7"),
    ("default false", "{{ .Values.off | default true }}", "true"),
    ("quote", "{{ .Values.name | quote }}", '"web"'),
    ("quote int", "{{ .Values.n | quote }}", '"3"'),
    ("quote escapes", '{{ "a\\"b\\n" | quote }}', '"a\\"b\\n"'),
    ("quote nil is empty", "[{{ quote .Values.nope }}]", "[]"),
    ("printf", '{{ printf "%s=%d %v %q %%" "a" 3 true "x" }}', 'a=3 true "x" %'),
    ("print", '{{ print "a" 1 2 "b" }}', "a1 2b"),
    ("trunc", '{{ "abcdef" | trunc 3 }}', "abc"),
    ("trunc negative", '{{ "abcdef" | trunc -2 }}', "ef"),
    ("trunc short", '{{ "ab" | trunc 63 }}', "ab"),
    ("trimSuffix", '{{ "name-" | trimSuffix "-" }}', "name"),
    ("trimSuffix once", '{{ "a--" | trimSuffix "-" }}', "a-"),
    ("contains", '{{ if contains "py" "kube-py-scheduler" }}y{{ end }}', "y"),
    ("replace", '{{ "1.0+b" | replace "+" "_" }}', "1.0_b"),
    ("indent", '{{ "a\\nb" | indent 2 }}', "  a\n  b"),
    ("nindent", 'x:{{ "a\\nb" | nindent 2 }}', "x:\n  a\n  b"),
    ("sha256sum", '{{ "abc" | sha256sum }}',
     "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
    ("b64enc", '{{ "hello" | b64enc }}', "aGVsbG8="),
    ("eq", '{{ eq .Values.name "web" }} {{ eq .Values.n 4 }} {{ eq .Values.n 1 2 3 }}',
     "true false true"),
    ("ne", '{{ ne .Values.name "web" }}', "false"),
    ("lt", "{{ lt 1 2 }} {{ ge 1 2 }}", "true false"),
    ("eq nil", '{{ eq .Values.nope "x" }}', "false"),
    ("and returns operand", '{{ and .Values.n .Values.name }}', "web"),
    ("and short-circuits", "{{ and .Values.nope .Values.nope.deeper }}", ""),
    ("or returns first truthy", '{{ or .Values.empty .Values.zero "z" }}', "z"),
    ("or short-circuits", "{{ or .Values.on .Values.nope.deeper }}", "true"),
    ("not", "{{ not .Values.empty }} {{ not .Values.list }}", "true false"),
    ("len", "{{ len .Values.list }}", "2"),
    ("index", '{{ index .Values.list 1 }} {{ index .Values.map "b" }}', "b 2"),
    ("ternary", '{{ ternary "yes" "no" .Values.on }}', "yes"),
    ("required ok", '{{ required "need name" .Values.name }}', "web"),
    # toYaml, as sigs.k8s.io/yaml prints it
    ("toYaml map", "{{ toYaml .Values.map }}", "a: 1\nb: 2"),
    ("toYaml list under key", "l:\n{{ toYaml .Values.list }}", "l:\n- a\n- b"),
    ("toYaml nested nindent", "spec:{{ toYaml .Values.nested | nindent 2 }}",
     "spec:\n  x:\n    y: deep"),
    ("toYaml nil", "{{ toYaml .Values.nope }}", "null"),
    ("toYaml empty", "{{ toYaml .Values.emptymap }} {{ toYaml .Values.emptylist }}", "{} []"),
    ("toYaml multi-line string", '{{ toYaml .Values.text }}', "|-\n  a\n  b"),
    ("toYaml string", '{{ toYaml "x" }}', "x"),
    ("toYaml quotes ambiguous strings", '{{ toYaml "true" }}|{{ toYaml "10" }}|{{ toYaml "*" }}|{{ toYaml "" }}',
     '"true"|"10"|\'*\'|""'),
]


@pytest.mark.parametrize(("src", "expected"), [(s, e) for _, s, e in CASES],
                         ids=[i for i, _, _ in CASES])
def test_renders_like_go(src: str, expected: str) -> None:
    assert run(src, V) == expected


def test_define_include_and_template() -> None:
    helpers = ('{{- define "x.name" -}}{{ .Release.Name }}-x{{- end }}\n'
               '{{- define "x.labels" -}}\napp: {{ include "x.name" . }}\n'
               'ns: {{ .Release.Namespace }}\n{{- end }}\n')
    src = ('metadata:\n  labels:\n    {{- include "x.labels" . | nindent 4 }}\n'
           'name: {{ template "x.name" . }}\n')
    assert run(src, V, helpers=helpers) == \
        "metadata:\n  labels:\n    app: rel-x\n    ns: ns\nname: rel-x\n"


def test_include_passes_its_argument_as_dot_and_dollar() -> None:
    helpers = '{{- define "p" -}}{{ . }}/{{ $ }}{{- end }}'
    assert run('{{ include "p" .Values.name }}', V, helpers=helpers) == "web/web"


def test_go_prints_floats_like_fmt() -> None:
    assert [go_str(v) for v in (2.0, 0.5, 1e6, 123456.0, 1.234567e6, 1e-5, 0.0001)] == \
        ["2", "0.5", "1e+06", "123456", "1.234567e+06", "1e-05", "0.0001"]
    assert go_str({"b": [1, None], "a": "x"}) == "map[a:x b:[1 <nil>]]"


@pytest.mark.parametrize(("src", "message"), [
    ("{{ .Values.nope.deeper }}", "nil pointer evaluating interface {}.deeper"),
    ("{{ .Values.name.x }}", "can't evaluate field x"),
    ('{{ required "name is required" .Values.nope }}', "name is required"),
    ('{{ required "empty" .Values.empty }}', "empty"),
    ('{{ fail "boom" }}', "boom"),
    ("{{ nosuchfunc 1 }}", 'function "nosuchfunc" not defined'),
    ("{{ if true }}x", "missing {{end}}"),
    ("{{ end }}", "unexpected {{end}}"),
    ("{{ .Values.name", "unclosed action"),
    ("{{ $x }}", "undefined variable: $x"),
    ('{{ include "nope" . }}', 'no template "nope"'),
    ('{{ eq .Values.name 3 }}', "incompatible types for comparison"),
    ("{{ .Values.name 3 }}", "can't give argument to non-function"),
    ("{{ range .Values.n }}{{ end }}", "range can't iterate over 3"),
    ("{{ block \"x\" . }}{{ end }}", "not supported"),
])
def test_errors_like_go(src: str, message: str) -> None:
    with pytest.raises(TemplateError, match=message.replace("{", r"\{").replace("}", r"\}")
                       .replace("(", r"\(").replace("$", r"\$")):
        run(src, V)


def test_merge_values_like_helm() -> None:
    base = {"a": {"b": 1, "c": 2}, "l": [1, 2], "k": "v", "gone": {"x": 1}}
    assert merge_values(base, {"a": {"c": 3}, "l": [9], "gone": None}) == \
        {"a": {"b": 1, "c": 3}, "l": [9], "k": "v"}


def test_render_chart_skips_partials_and_exposes_release_and_chart(tmp_path: Path) -> None:
    (tmp_path / "templates").mkdir()
    (tmp_path / "Chart.yaml").write_text("apiVersion: v2\nname: c\nversion: 1.2.3\n"
                                         "appVersion: \"9.9\"\n")
    (tmp_path / "values.yaml").write_text("greeting: hi\nnested:\n  a: 1\n  b: 2\n")
    (tmp_path / "templates" / "_h.tpl").write_text('{{- define "c.n" -}}{{ .Chart.Name }}'
                                                    '{{- end }}')
    (tmp_path / "templates" / "cm.yaml").write_text(
        '{{ .Values.greeting }} {{ include "c.n" . }} {{ .Chart.Version }} '
        '{{ .Chart.AppVersion }} {{ .Release.Name }} {{ .Release.Namespace }} '
        '{{ .Release.Service }} {{ .Values.nested.a }}{{ .Values.nested.b }}')
    out = render_chart(tmp_path, values={"greeting": "yo", "nested": {"b": 5}},
                       release_name="r", namespace="n")
    assert out == {"c/templates/cm.yaml": "yo c 1.2.3 9.9 r n Helm 15"}
