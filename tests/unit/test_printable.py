"""Someone else's words are drawn as text only (issue 31, finding 8): ``printable`` strips
escape sequences and control characters, and the sources apply it where a server's or a
file's string enters the console's state."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace
from typing import Any

import pytest
from msgspec import Struct

from console.model.printable import clean, has_controls, printable
from console.model.snapshot import PodSnapshot

ESC = "\x1b"


@pytest.mark.parametrize(("raw", "shown"), [
    (f"llama{ESC}]0;owned by attacker\x07-8b", "llama-8b"),           # OSC 0 (title), BEL
    (f"m{ESC}]2;title{ESC}\\x", "mx"),                                 # OSC 2, ST end
    (f"a{ESC}]52;c;Y3VybCBldmlsIHwgc2g=\x07b", "ab"),                 # OSC 52 (clipboard)
    (f"{ESC}]8;;javascript:alert(1){ESC}\\click{ESC}]8;;{ESC}\\", "click"),  # OSC 8 link
    (f"x{ESC}[2Jy{ESC}[H{ESC}[31;1mz{ESC}[0m", "xyz"),                 # CSI: clear, colour
    ("a\x9b2Jb", "ab"),                                                 # C1 CSI
    ("a\x9d0;t\x9cb", "ab"),                                            # C1 OSC … C1 ST
    ("a\x90qpayload\x9cb", "ab"),                                       # C1 DCS
    (f"a{ESC}Ppayload{ESC}\\b", "ab"),                                  # DCS
    (f"a{ESC}_apc{ESC}\\b", "ab"),                                      # APC
    (f"lone {ESC}", "lone "),                                           # a lone ESC
    (f"{ESC}", ""),
    (f"a{ESC}(Bb", "ab"),                                               # charset
    (f"a{ESC}cb", "ab"),                                                # RIS (reset)
    (f"unterminated{ESC}]0;title to the end", "unterminated"),          # OSC never ended
    ("bell\x07 back\x08 nul\x00 del\x7f", "bell back nul del"),
    ("tab\there\r\nline", "tab here  line"),
    ("a\u202eevil\u202cb \u2066x\u2069", "aevilb x"),                  # bidi overrides
    (KOREAN := "한국어 모델 — 서빙 중 🚀 👩\u200d💻 café ½ ✓", KOREAN),
    ("plain ascii [bold]markup[/] stays as text", "plain ascii [bold]markup[/] stays as text"),
])
def test_printable(raw: str, shown: str) -> None:
    assert printable(raw) == shown
    assert not has_controls(printable(raw))
    assert printable(printable(raw)) == printable(raw)


def test_printable_takes_any_value_and_a_limit() -> None:
    assert printable(None) == "None" and printable(42) == "42"
    assert printable(f"{ESC}[2J" + "x" * 500, 10) == "x" * 10
    s = "nothing to do"
    assert printable(s) is s  # clean text costs one search, no copy


def test_clean_goes_through_records_dicts_and_sequences() -> None:
    class Inner(Struct, frozen=True):
        name: str
        n: int = 1

    pod = PodSnapshot(pod_id="p1", gpu_name=f"H200{ESC}]0;t\x07", agent_error=f"x{ESC}[2J",
                      agent_slots={f"A{ESC}[1m": {"state": "ready\x9b2J"}},
                      agent_actions=("ok", "bad\x07"))
    out = clean(pod)
    assert (out.gpu_name, out.agent_error) == ("H200", "x")
    assert out.agent_slots == {"A": {"state": "ready"}}
    assert out.agent_actions == ("ok", "bad")
    assert clean([Inner(f"a{ESC}b"), (1, 2.0, None)]) == [Inner("a"), (1, 2.0, None)]
    fine = PodSnapshot(pod_id="p1", gpu_name="H200", agent_slots={"A": {"state": "ready"}})
    assert clean(fine) is fine  # nothing to clean: the same object


# -- the boundaries -----------------------------------------------------------------------
@pytest.fixture
def hostile_vllm() -> Iterator[str]:
    """A vLLM-shaped server whose model id and errors carry escape sequences."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/health":
                body, code = b"", 200
            elif self.path == "/v1/models":
                body, code = json.dumps({"data": [
                    {"id": f"tiny{ESC}]0;PWNED\x07{ESC}[2J-main"},
                    {"id": "모델-🚀"}]}).encode(), 200
            else:
                body, code = f"boom{ESC}[2J".encode(), 500
            self.send_response(code)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            return None

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    t = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05},
                         daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


async def test_model_ids_from_v1_models_enter_the_state_printable(hostile_vllm: str) -> None:
    from console.sources.collect.http import HttpClient
    from console.sources.collect.slot import probe_slot
    from console.sources.collect.targets import SlotTarget

    client = HttpClient()
    try:
        probe = await probe_slot(client, SlotTarget("A", "tiny-main", 1, hostile_vllm), 5.0)
    finally:
        await client.aclose()
    assert probe.health == "up"
    assert probe.served_models == ("tiny-main", "모델-🚀")
    assert probe.error is not None and not has_controls(probe.error)


async def test_the_pod_enters_the_state_printable() -> None:
    from console.sources.collect.pod import PodCollector

    class Provider:
        async def get(self, pod_id: str) -> Any:
            return SimpleNamespace(status="RUNNING", cost_per_hr=1.0, cuda="12.8",
                                   gpu_type=f"H200{ESC}]52;c;eA==\x07", gpu_count=1,
                                   started_at=None)

    class Agent:
        configured = True

        async def request(self, req: Any, timeout_s: float | None = None) -> Any:
            assert req.key() == "status"
            return SimpleNamespace(ok=False, final=None, message=f"refused{ESC}]0;x\x07")

    pod = await PodCollector("p1", Provider(), Agent()).poll()  # type: ignore[arg-type]
    assert (pod.gpu_name, pod.agent_error) == ("H200", "refused")


async def test_a_slots_log_lines_enter_the_state_printable(tmp_path) -> None:
    from tests.session.world import world

    w = world(tmp_path, 1_800_000_000.0)

    class Agent:
        configured = True

        async def request(self, req: Any) -> Any:
            assert (req.key(), req.slot) == ("logs", "A")
            return SimpleNamespace(ok=True, final={"lines": [
                f"{ESC}[32mINFO{ESC}[0m ready", f"{ESC}]0;pwned\x07title", "로그 ✅"]})

    w.ctx.agent = Agent()  # type: ignore[assignment]
    assert await w.session.slot_logs("A") == ["INFO ready", "title", "로그 ✅"]


def test_a_line_drawn_keeps_its_styles_without_the_controls() -> None:
    from rich.text import Text

    from console.ui.widgets.lines import safe_text

    t = Text("12:00 ", style="dim", no_wrap=True, overflow="ellipsis")
    # (Rich drops a BEL as the Text is built: the title here ends with ST)
    t.append(f"ALERT{ESC}]0;x{ESC}\\ down", "bold red")
    t.append(f" — {ESC}[2Jdetail", "dim")
    out = safe_text(t)
    assert out.plain == "12:00 ALERT down — detail"
    assert [(out.plain[s.start:s.end], str(s.style)) for s in out.spans] == [
        ("ALERT down", "bold red"), (" — detail", "dim")]
    assert (out.style, out.no_wrap, out.overflow) == ("dim", True, "ellipsis")
    fine = Text("nothing to strip", "bold")
    assert safe_text(fine) is fine
