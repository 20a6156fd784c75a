"""Use a running session as an open notebook does, through the hub's proxy, for
tests/interactive/test_hub_restart.py: start a kernel, keep one websocket to it open, and every
``interval`` seconds send an HTTP request (``GET api/status``) and run ``1+1`` in the kernel over that
websocket, until stdin closes. Runs under the Jupyter venv's Python (tornado's clients).

Usage: ``session_stream.py SERVER_URL TOKEN [INTERVAL]`` (``SERVER_URL``: the single-user server's
public URL, ending in ``/``). Prints ``ready`` once the websocket is open, then at the end one JSON
line: ``{"http_ok": [t, ...], "ws_ok": [t, ...], "failures": [[t, what], ...]}`` (``t``: Unix seconds).
With ``SESSION_STREAM_PROGRESS`` set to a file, each outcome is also appended to it as it happens, one
line each: ``http <t>``, ``ws <t>`` or ``fail <t> <what>`` (what the test waits for meanwhile).
"""

import asyncio
import json
import os
import sys
import time
import uuid

from tornado.httpclient import AsyncHTTPClient, HTTPRequest
from tornado.websocket import websocket_connect


def execute_request(code: str) -> dict:
    msg_id = uuid.uuid4().hex
    return {
        "header": {"msg_id": msg_id, "username": "test", "session": "s", "msg_type": "execute_request", "version": "5.3"},
        "parent_header": {},
        "metadata": {},
        "content": {"code": code, "silent": False, "store_history": False, "user_expressions": {}, "allow_stdin": False},
        "channel": "shell",
        "buffers": [],
    }


async def run(base: str, token: str, interval: float) -> dict:
    headers = {"Authorization": f"token {token}"}
    http = AsyncHTTPClient()
    response = await http.fetch(HTTPRequest(base + "api/kernels", method="POST", body="{}", headers=headers))
    kernel = json.loads(response.body)["id"]
    ws_url = base.replace("http", "ws", 1) + f"api/kernels/{kernel}/channels"
    ws = await websocket_connect(HTTPRequest(ws_url, headers=headers))
    print("ready", flush=True)
    done = asyncio.Event()
    asyncio.get_running_loop().add_reader(sys.stdin, done.set)  # readable = EOF (the test closed it)
    result = {"http_ok": [], "ws_ok": [], "failures": []}
    path = os.environ.get("SESSION_STREAM_PROGRESS")
    progress = open(path, "a", buffering=1) if path else None  # line-buffered: each line is there as it happens

    def record(kind: str, now: float, what: str = "") -> None:
        if kind == "fail":
            result["failures"].append([now, what])
        else:
            result[f"{kind}_ok"].append(now)
        if progress is not None:
            progress.write(f"{kind} {now} {what}".rstrip() + "\n")

    while not done.is_set():
        now = time.time()
        try:
            r = await http.fetch(HTTPRequest(base + "api/status", headers=headers, request_timeout=10), raise_error=False)
            if r.code == 200:
                record("http", now)
            else:
                record("fail", now, f"GET api/status: HTTP {r.code}")
        except Exception as exc:  # noqa: BLE001 - every failure is reported
            record("fail", now, f"GET api/status: {exc!r}")
        try:
            request = execute_request("1+1")
            await ws.write_message(json.dumps(request))
            while True:
                message = await asyncio.wait_for(ws.read_message(), 10)
                if message is None:
                    raise ConnectionError(f"websocket closed ({ws.close_code} {ws.close_reason})")
                reply = json.loads(message)
                if reply.get("parent_header", {}).get("msg_id") == request["header"]["msg_id"] and (
                    reply["header"]["msg_type"] == "execute_reply"
                ):
                    break
            if reply["content"]["status"] != "ok":
                raise RuntimeError(reply["content"])
            record("ws", now)
        except Exception as exc:  # noqa: BLE001
            record("fail", now, f"kernel over websocket: {exc!r}")
            if ws.protocol is None:  # closed: the next rounds would all fail the same way
                break
        await asyncio.sleep(interval)
    ws.close()
    if progress is not None:
        progress.close()
    await http.fetch(HTTPRequest(base + f"api/kernels/{kernel}", method="DELETE", headers=headers), raise_error=False)
    return result


def main() -> None:
    base, token = sys.argv[1], sys.argv[2]
    interval = float(sys.argv[3]) if len(sys.argv) > 3 else 0.5
    print(json.dumps(asyncio.run(run(base, token, interval))), flush=True)


if __name__ == "__main__":
    main()
