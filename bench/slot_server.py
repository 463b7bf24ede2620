"""A minimal keep-alive HTTP server answering like N vLLM slots, for benchmarks.

Serves an exposition file on ``/metrics``, 200 on ``/health``, a model list on
``/v1/models`` and a fixed "OK" on ``/v1/chat/completions`` (the console's completion
probe) on each of N consecutive ports. Like a busy server, every scrape's
counters, buckets and sums have grown since the last one (by the scrape's number), so
no scrape repeats an earlier one. Runs in its own process so its CPU is not counted
against the console.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path


def response(body: bytes, ctype: bytes) -> bytes:
    return (b"HTTP/1.1 200 OK\r\ncontent-type: " + ctype + b"\r\ncontent-length: "
            + str(len(body)).encode() + b"\r\n\r\n" + body)


class Growing:
    """The exposition with its cumulative series (``_total``, ``_bucket``, ``_count``,
    ``_sum``) raised by n at the n-th scrape; gauges and ``_created`` stay."""

    def __init__(self, text: bytes) -> None:
        self.n = 0
        self.parts: list[tuple[bytes, float | None]] = []
        for line in text.split(b"\n"):
            head, sep, value = line.rpartition(b" ")
            name = head.split(b"{", 1)[0]
            if sep and not line.startswith(b"#") and name.endswith(
                    (b"_total", b"_bucket", b"_count", b"_sum")):
                self.parts.append((head + b" ", float(value)))
            else:
                self.parts.append((line, None))

    def next(self) -> bytes:
        self.n += 1
        n = self.n
        return b"\n".join(line if v is None else line + repr(v + n).encode()
                          for line, v in self.parts)


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--base-port", type=int, required=True)
    ap.add_argument("--slots", type=int, required=True)
    ap.add_argument("--exposition", type=Path, required=True)
    ap.add_argument("--model", default=None,
                    help="the model every port serves (default: slot-N on the N-th port)")
    args = ap.parse_args()
    text = args.exposition.read_bytes()

    def handler_for(i: int):
        name = args.model or f"slot-{i}"
        models = json.dumps({"object": "list", "data": [{"id": name}]}).encode()
        metrics = text.replace(b'model_name="tiny-main"', f'model_name="{name}"'.encode())
        growing = Growing(metrics)
        answers = {
            b"/health": response(b"", b"application/json"),
            b"/v1/models": response(models, b"application/json"),
            b"/v1/chat/completions": response(json.dumps({
                "object": "chat.completion", "model": name, "choices": [{
                    "index": 0, "finish_reason": "stop",
                    "message": {"role": "assistant", "content": "OK"}}]}).encode(),
                b"application/json"),
        }
        missing = b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n"

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                while True:
                    head = await reader.readuntil(b"\r\n\r\n")
                    path = head.split(b" ", 2)[1].split(b"?", 1)[0]
                    length = 0
                    for line in head.lower().split(b"\r\n"):
                        if line.startswith(b"content-length:"):
                            length = int(line.split(b":", 1)[1])
                    if length:
                        await reader.readexactly(length)
                    if path == b"/metrics":
                        writer.write(response(growing.next(),
                                              b"text/plain; version=1.0.0; charset=utf-8"))
                    else:
                        writer.write(answers.get(path, missing))
                    await writer.drain()
            except (asyncio.IncompleteReadError, ConnectionError, IndexError):
                pass
            finally:
                writer.close()
        return handle

    servers = [await asyncio.start_server(handler_for(i), "127.0.0.1", args.base_port + i)
               for i in range(args.slots)]
    print("ready", flush=True)
    await asyncio.gather(*(s.serve_forever() for s in servers))


if __name__ == "__main__":
    asyncio.run(main())
