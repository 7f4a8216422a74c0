"""Thin typed views and helpers over raw API dicts (quantities, resources, pod requests,
label selectors, taints, node affinity). Objects stay plain ``dict[str, Any]``; the modules
here parse what the scheduler needs once and raise ``ObjectError`` on malformed input."""
