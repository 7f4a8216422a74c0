"""Reading the running scheduler's own last diagnosis of a pod (``/debug/pods/{ns}/{name}``),
so ``explain --from-scheduler`` can show it next to the fresh one.

A scheduler that cannot be reached or refuses us is reported inside the answer, not as a
failure: the fresh explanation is still worth printing.
"""

from __future__ import annotations

import ssl
from typing import Any
from urllib.parse import quote

import aiohttp

DEFAULT_TIMEOUT_SECONDS = 10.0


def _ssl(url: str, *, ca_file: str | None, insecure: bool) -> ssl.SSLContext | bool:
    if not url.startswith("https"):
        return True
    if insecure:
        return False
    return ssl.create_default_context(cafile=ca_file)


async def fetch_daemon_diagnosis(
    url: str,
    namespace: str,
    name: str,
    *,
    token: str | None = None,
    ca_file: str | None = None,
    insecure: bool = False,
    timeout: float = DEFAULT_TIMEOUT_SECONDS,
) -> dict[str, Any]:
    target = f"{url.rstrip('/')}/debug/pods/{quote(namespace, safe='')}/{quote(name, safe='')}"
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        ssl_arg = _ssl(url, ca_file=ca_file, insecure=insecure)
    except (OSError, ssl.SSLError) as exc:
        return {"found": False, "message": f"--ca-file: {exc}"}
    try:
        async with aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=timeout)
        ) as session, session.get(target, headers=headers, ssl=ssl_arg) as resp:
            if resp.status == 404:
                return {"found": False,
                        "message": f"the scheduler at {url} has no record of {namespace}/{name} "
                        "(not pending in its queue, or not its pod)"}
            if resp.status != 200:
                text = (await resp.text()).strip()
                return {"found": False,
                        "message": f"{target}: HTTP {resp.status} {text}".rstrip()}
            body = await resp.json()
    except (aiohttp.ClientError, TimeoutError, OSError, ValueError) as exc:
        return {"found": False, "message": f"cannot reach {target}: {exc}"}
    if not isinstance(body, dict):
        return {"found": False, "message": f"{target}: unexpected answer"}
    body.setdefault("found", True)
    return body
