"""What the benchmark sends: the short and long inputs, and seven task-type prompt sets.

The short input is one question of about 21 tokens, the long one a generated operations
report of about ``long_tokens`` tokens to summarise (the field's 21 and 3,035). The long
document is built from a seeded generator, so every run — today's and last week's — sends
the same text for the same size. Token counts here are estimates (about four characters
per token of English); the record keeps the server's own count from ``usage``.

The task-type sets exist to show where speculative decoding pays: formatted output (JSON,
a tool call, code) repeats what is predictable and drafts are accepted more often than in
free prose (QA in Korean or English). Each set has two prompts, sent once each.
"""

from __future__ import annotations

import random

CHARS_PER_TOKEN = 4.0

SHORT = ("In one paragraph, explain why speculative decoding makes a language model "
         "write text faster on a GPU.")

TASKS: dict[str, tuple[str, ...]] = {
    "json": (
        "Return only a JSON object, no prose, describing three GPU pods. Each pod has the "
        "keys id, gpu_type, gpu_count, hourly_usd, region and status.",
        "Convert this to a JSON array of objects with keys name, port and gpu_util: slot "
        "QWEN on port 8000 uses 0.55, slot EMBED on port 8001 uses 0.25, slot JUDGE on "
        "port 8002 uses 0.15. Output JSON only.",
    ),
    "code": (
        "Write a Python function that parses a Prometheus text exposition line such as "
        "'vllm:num_requests_running{model_name=\"a\"} 3' into a name, a dict of labels "
        "and a float. Include type hints.",
        "Write a bash script that waits until http://127.0.0.1:8000/health answers 200, "
        "checking every 5 seconds and giving up after 10 minutes with exit code 1.",
    ),
    "summarisation": (
        "Summarise in three bullet points: The night shift saw the first slot restart "
        "twice after the engine ran out of KV cache blocks under a burst of long "
        "documents. The second slot stayed healthy. Raising its gpu_util from 0.45 to "
        "0.55 and lowering the other slot to 0.35 stopped the preemptions, and time to "
        "first token at the 95th percentile fell from 2.4 s to 1.1 s by morning.",
        "Summarise this incident for a status page in two sentences: a rented host came "
        "up with peer-to-peer access between its GPUs broken; NCCL hung during start-up "
        "until the pod was restarted with NCCL_P2P_DISABLE=1, which cost about 15 % of "
        "decode speed until the pod moved to another host.",
    ),
    "ko_qa": (
        "GPU 서버에서 KV 캐시가 무엇이고, 왜 동시 요청이 많아지면 부족해지는지 설명해 주세요.",
        "추측 디코딩(speculative decoding)에서 수락률이 낮으면 어떤 일이 생기는지 "
        "짧게 설명해 주세요.",
    ),
    "en_qa": (
        "Why does time to first token grow when many long prompts arrive at the same time "
        "on one inference server?",
        "What are the trade-offs of stopping a rented GPU pod every evening and resuming "
        "it every morning?",
    ),
    "translation": (
        "Translate into Korean: The pod stops at six in the evening unless someone "
        "extends it, and it resumes at half past eight on weekdays.",
        "Translate into English: 두 번째 슬롯의 첫 토큰 지연이 평소보다 두 배 길어서 "
        "호스트의 P2P 상태를 다시 확인했습니다.",
    ),
    "tool_call": (
        "You can call one tool: get_pod_status(pod_id: string). Answer only with the call "
        "as JSON {\"name\": ..., \"arguments\": {...}} for: is pod p-7f3a running?",
        "Tools: set_gpu_util(slot: string, value: number), restart_slot(slot: string). "
        "Answer only with a JSON list of calls to give slot QWEN 0.6 and restart it.",
    ),
}
"""Task type → its prompts. The names are the record's keys."""

_SUBJECTS = ("slot QWEN", "slot EMBED", "slot JUDGE", "the gateway", "Prometheus",
             "the watchdog", "GPU 0", "GPU 1", "the NCCL probe", "the host")
_EVENTS = ("reported KV cache usage of {n} %", "restarted after {n} s of start-up",
           "answered {n} requests in the last minute", "ran at {n} degrees C",
           "drew {n} W against its cap", "saw time to first token p95 of {n} ms",
           "held {n} requests waiting", "accepted {n} % of drafted tokens")


def long_document(tokens: int, seed: int = 20260828) -> str:
    """About ``tokens`` tokens of an operations log, the same text for the same size."""
    rng = random.Random(seed)
    want = int(tokens * CHARS_PER_TOKEN)
    lines: list[str] = []
    size = 0
    minute = 8 * 60
    while size < want:
        minute += rng.randint(1, 7)
        h, m = divmod(minute % (24 * 60), 60)
        ev = rng.choice(_EVENTS).format(n=rng.randint(3, 980))
        line = f"At {h:02d}:{m:02d} {rng.choice(_SUBJECTS)} {ev}."
        lines.append(line)
        size += len(line) + 1
    return ("Operations log of one GPU pod:\n" + "\n".join(lines)
            + "\n\nSummarise the log above in five bullet points, naming the slots that "
              "needed attention and why.")


def prompt_for(length: str, long_tokens: int) -> str:
    return SHORT if length == "short" else long_document(long_tokens)
