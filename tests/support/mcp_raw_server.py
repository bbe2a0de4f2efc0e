"""A bare MCP server on stdio, written by hand, that breaks the protocol on purpose.

The SDK's own servers keep their protocol stream to themselves (a tool cannot write on
it), so a server that answers a tool call with a line that is not JSON-RPC is played
here: it answers ``initialize`` and ``tools/list`` (one tool, ``garbage``) properly, then
answers every ``tools/call`` with ``this is not a JSON-RPC frame``. With
``--die-on-close`` it dies when its stdin closes (the client stopping it), exit code 9,
after half a frame on stdout.
"""

from __future__ import annotations

import json
import sys


def send(message: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def main() -> None:
    die_on_close = "--die-on-close" in sys.argv
    for line in sys.stdin:
        request = json.loads(line)
        method, ident = request.get("method"), request.get("id")
        if ident is None:
            continue  # a notification
        if method == "initialize":
            result: dict[str, object] = {
                "protocolVersion": request["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "raw", "version": "1"},
            }
            send({"jsonrpc": "2.0", "id": ident, "result": result})
        elif method == "tools/list":
            tool = {"name": "garbage", "inputSchema": {"type": "object"}}
            send({"jsonrpc": "2.0", "id": ident, "result": {"tools": [tool]}})
        elif method == "tools/call":
            sys.stdout.write("this is not a JSON-RPC frame\n")
            sys.stdout.flush()
        else:
            send({"jsonrpc": "2.0", "id": ident, "result": {}})
    if die_on_close:  # its stdin closed: it dies noisily, half a frame on stdout
        sys.stdout.write('{"jsonrpc": "2.0", "id"')
        sys.stdout.flush()
        sys.stderr.write("fatal: lost my input\n")
        sys.exit(9)


if __name__ == "__main__":
    main()
