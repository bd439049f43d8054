"""An admission webhook for the gates benchmark: HTTPS, allows every AdmissionReview.

    python -m bench.apiserver.webhook_server PORT CERT KEY

As cheap as a webhook can be (a raw ASGI app on uvicorn, one JSON decode and encode per call),
so that what the benchmark measures is the apiserver's cost of calling one.
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
import uvicorn

Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


async def app(scope: dict[str, Any], receive: Receive, send: Send) -> None:
    if scope["type"] != "http":
        return
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    try:
        uid = orjson.loads(body)["request"]["uid"]
    except (orjson.JSONDecodeError, KeyError, TypeError):
        await send({"type": "http.response.start", "status": 400, "headers": []})
        await send({"type": "http.response.body", "body": b"not an AdmissionReview"})
        return
    answer = orjson.dumps(
        {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": {"uid": uid, "allowed": True}}
    )
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": answer})


def main(argv: list[str]) -> int:
    port, cert, key = int(argv[0]), argv[1], argv[2]
    uvicorn.run(
        app,
        host="127.0.0.1",
        port=port,
        ssl_certfile=cert,
        ssl_keyfile=key,
        log_level="warning",
        access_log=False,
        lifespan="off",
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
