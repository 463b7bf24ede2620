"""Modal screens: confirmation, operation progress, help, watchdog menu, gpu_util editor."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.css.query import NoMatches
from textual.keys import format_key
from textual.screen import ModalScreen
from textual.widgets import Button, Checkbox, Input, Label, ProgressBar, RichLog, Static

from console.model import fmt
from console.model.printable import printable
from console.operations.split import changes, plan_words
from console.ui.widgets.ordered_input import OrderedInput
from pod_agent.profile import MAX_GPU_UTIL_PER_GPU


class ConfirmScreen(ModalScreen[bool]):
    """A dangerous operation asks first; Enter/y confirms, Escape/n cancels."""

    DEFAULT_CSS = """
    ConfirmScreen { align: center middle; }
    ConfirmScreen > Vertical { width: 70; max-width: 95%; height: auto; border: thick $error;
                               background: $surface; padding: 1 2; }
    ConfirmScreen Horizontal { height: auto; align: center middle; margin-top: 1; }
    """
    BINDINGS = [Binding("y", "answer(True)", "yes"), Binding("n", "answer(False)", "no"),
                Binding("escape", "answer(False)", "cancel", show=False)]

    def __init__(self, title: str, question: str) -> None:
        super().__init__()
        self.title_text = title
        self.question = question

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(Text(f"⚠ {self.title_text}", style="bold"))
            yield Static(Text(printable(self.question)))  # remote text: never markup
            with Horizontal():
                yield Button(Text("Yes [y]"), id="yes", variant="error")
                yield Button(Text("No [n]"), id="no")

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_answer(self, value: bool) -> None:
        self.dismiss(value)


class ProgressScreen(ModalScreen[None]):
    """Live progress of a long operation; Escape hides it (the operation keeps running).

    It keeps what it was told (step, fraction, lines, the end) and draws from that: an
    operation that fails before the dialog has even been drawn still shows its failure
    in it. The elapsed time ticks every second; no ETA is guessed for steps of unknown
    length (a P2P probe takes 5 s or 90 s)."""

    DEFAULT_CSS = """
    ProgressScreen { align: center middle; }
    ProgressScreen > Vertical { width: 90; max-width: 98%; height: 20; max-height: 95%;
                                border: thick $primary; background: $surface; padding: 0 1; }
    ProgressScreen ProgressBar { margin: 1 0; }
    ProgressScreen RichLog { height: 1fr; }
    ProgressScreen #pstep { width: 1fr; }
    """
    BINDINGS = [Binding("escape", "hide", "hide"), Binding("c", "cancel_op", "cancel")]
    CLOSING_KEYS = frozenset({"escape", "enter", "space"})
    """Keys that only close a finished dialog; every other key closes it and goes on to
    the screen beneath (``w`` then ``1`` extends the watchdog, ``L`` opens the log)."""

    def __init__(self, title: str, clock: Callable[[], float] = time.monotonic,
                 on_cancel: Callable[[], None] | None = None,
                 urgent_keys: frozenset[str] = frozenset(), compact: bool = False) -> None:
        super().__init__()
        self.title_text = title
        self.compact = compact
        """The steps are one line, each in place of the one before (a benchmark's ~30
        steps, issue 30 #11); lines without a step (its result) are added below."""
        self._last_was_step = False
        self.on_cancel = on_cancel
        """Set for an operation that may stop halfway (``c``); None: it cannot."""
        self.urgent_keys = urgent_keys
        """Keys that act on a warning (the watchdog's ``w`` before a stop): even while the
        operation runs they hide the dialog and reach the screen beneath."""
        self.cancelling = False
        self.done = False
        self.clock = clock
        self.started = clock()
        self.ended: float | None = None
        self.current = ""
        self.fraction: float | None = None
        self.outcome: tuple[bool, str] | None = None
        self.lines: list[Text] = []
        self._drawn = False
        """Composed and mounted (``is_mounted`` is not yet true inside ``on_mount``)."""
        self._last_shape: tuple[str, str] | None = None
        """The last line's step and message without its numbers (``progress_shape``)."""

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(Text(self.title_text, style="bold"), id="ptitle")
            yield Label("", id="pstep")
            yield ProgressBar(total=100, show_eta=False, id="pbar")
            yield Label("", id="pelapsed")
            yield RichLog(max_lines=300, wrap=True, id="plog")

    def on_mount(self) -> None:
        log = self.query_one("#plog", RichLog)
        for line in self.lines:
            log.write(line)
        self._drawn = True
        self._draw()
        if self.done:
            self._fit()
        self.set_interval(1.0, self._tick)

    def _tick(self) -> None:
        if not self.done:
            self._draw_elapsed()

    def step(self, step: str, fraction: float | None, message: str) -> None:
        self.current = f"{step}  {message}".strip()
        if fraction is not None or step:
            self.fraction = fraction
        line = Text(printable(f"{step}: {message}" if message and step else (message or step)))
        if line.plain:
            key = fmt.progress_shape(step, message)
            # a countdown, or a compact operation's next step: its one line, in place
            if self.lines and (key == self._last_shape
                               or (self.compact and bool(step) and self._last_was_step)):
                self._replace(line)
            else:
                self._add(line)
            self._last_shape = key
            self._last_was_step = bool(step)
        self._draw()

    def _replace(self, line: Text) -> None:
        self.lines[-1] = line
        if self._drawn:
            with contextlib.suppress(NoMatches):
                self._rewrite_log()
                self.query_one("#plog", RichLog).scroll_end(animate=False)

    def finish(self, ok: bool, message: str) -> None:
        self.done = True
        self.ended = self.clock()
        self.outcome = (ok, message)
        self._add(Text(printable(message), style="ok.strong" if ok else "crit"))
        self._draw()
        self._fit()

    def _fit(self) -> None:
        """At the end, the dialog takes the room its result needs (a benchmark's table
        is ~120 columns: on a 160-column terminal it fits unwrapped), and its log shows
        the result from its first line, not scrolled to its end."""
        if not self._drawn:
            return  # on_mount fits it
        with contextlib.suppress(NoMatches):
            box = self.query_one(Vertical)
            widest = max((line.cell_len for line in self.lines), default=0)
            # border 2, padding 2, the log's scrollbar 2
            width = min(self.app.size.width - 2, max(90, widest + 6))
            box.styles.width = width
            box.styles.max_width = "100%"
            # title, step, bar (and its margins), elapsed, borders: 8 rows
            box.styles.height = max(20, min(self.app.size.height - 2, len(self.lines) + 9))
            box.styles.max_height = "100%"
            # the log wrapped its lines at the old width: written again at the new one
            # (its width given: the new layout may not have reached it yet)
            self.query_one("#plog", RichLog).min_width = width - 6
            self._rewrite_log()

    def _rewrite_log(self) -> None:
        with contextlib.suppress(NoMatches):
            log = self.query_one("#plog", RichLog)
            log.clear()
            for line in self.lines:
                log.write(line, scroll_end=False)
            log.scroll_home(animate=False)
            self.call_after_refresh(log.scroll_home, animate=False)

    def _add(self, line: Text) -> None:
        self.lines.append(line)
        del self.lines[:-300]
        if self._drawn:
            with contextlib.suppress(NoMatches):
                self.query_one("#plog", RichLog).write(line)

    def _draw(self) -> None:
        if not self._drawn:
            return  # on_mount draws what was recorded meanwhile
        with contextlib.suppress(NoMatches):
            bar = self.query_one("#pbar", ProgressBar)
            label = self.query_one("#pstep", Label)
            if self.outcome is not None:
                ok, message = self.outcome
                bar.update(total=100, progress=100 if ok else (self.fraction or 0) * 100)
                label.update(Text(printable(("✓ " if ok else "✖ FAILED: ") + message),
                                  style="ok.strong" if ok else "crit"))
            else:
                if self.fraction is None:
                    bar.update(total=None)
                else:
                    bar.update(total=100, progress=max(0.0, min(1.0, self.fraction)) * 100)
                label.update(Text(printable(self.current or "starting…")))
            self._draw_elapsed()

    def _draw_elapsed(self) -> None:
        with contextlib.suppress(NoMatches):
            end = self.ended if self.ended is not None else self.clock()
            word = "took" if self.done else "elapsed"
            hint = "" if self.done else (
                "  ·  cancelling…" if self.cancelling else
                ("  ·  c cancels" if self.on_cancel is not None else "")
                + "  ·  escape hides this; the operation goes on")
            self.query_one("#pelapsed", Label).update(
                Text(f"{word} {fmt.duration(end - self.started)}{hint}", style="dim"))

    def action_hide(self) -> None:
        self.dismiss(None)

    def on_key(self, event: events.Key) -> None:
        """A finished dialog does not hold the keyboard: the next key closes it and,
        unless it is only a closing key, is handed on to the screen it uncovers. While
        the operation runs, only an urgent key does that (the operation goes on)."""
        if self.done:
            passes = event.key not in self.CLOSING_KEYS
            if event.key == "escape":
                return  # the hide binding closes it
        elif event.key in self.urgent_keys:
            passes = True
        else:
            return
        event.stop()
        event.prevent_default()
        if self.app.screen is not self:
            return
        self.dismiss(None)
        if passes:
            key = events.Key(event.key, event.character)
            self.app.call_later(self.app.post_message, key)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "cancel_op":
            return self.on_cancel is not None and not self.done
        return True

    def action_cancel_op(self) -> None:
        if self.on_cancel is None or self.done or self.cancelling:
            return
        self.cancelling = True
        self._add(Text("cancelling: the requests in flight are dropped; nothing is kept",
                       style="warn"))
        self.on_cancel()
        self._draw_elapsed()


def _key_name(key: str) -> str:
    """A binding's key as a keyboard labels it ("question_mark" is "?"; enter is "enter",
    not a glyph a terminal font may lack)."""
    return key if key in ("enter", "backspace", "space", "tab") else format_key(key)


class HelpScreen(ModalScreen[None]):
    """Generated from the bindings, so it can never disagree with the keys."""

    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll { width: 100; max-width: 98%; height: auto; max-height: 95%;
                                  border: thick $primary; background: $surface; padding: 1 2; }
    """
    BINDINGS = [Binding("escape,q,question_mark", "close", "close")]

    def __init__(self, rows: list[tuple[str, str, bool, bool]],
                 legend: list[tuple[str, str]] | None = None,
                 sections: list[tuple[str, list[tuple[str, str]]]] | None = None,
                 title: str = "Keys") -> None:
        """rows: (key, description, dangerous, available); legend: (column, meaning);
        sections: the screen's own words (states, columns, thresholds), each titled."""
        super().__init__()
        self.rows = rows
        self.legend = legend or []
        self.sections = sections or []
        self.title = title

    def compose(self) -> ComposeResult:
        t = Text(f"{self.title}\n\n", style="bold")
        for key, desc, dangerous, available in self.rows:
            style = "" if available else "dim strike"
            # binding names as a keyboard shows them: "question_mark" is "?"
            shown = " / ".join(_key_name(k.strip()) for k in key.split(","))
            shown += " " if len(shown) >= 12 else ""  # "esc / backspace / g" then a gap
            t.append(f"  {shown:<12}", "bold" if available else "dim")
            t.append(desc, style)
            if dangerous:
                t.append("  (asks first)" if available else "  (disabled: read-only)",
                         "warn" if available else "dim")
            t.append("\n")
        if self.legend:
            t.append("\nColumns (pod-console catalog prints their PromQL)\n\n", "bold")
            for header, meaning in self.legend:
                t.append(f"  {header:<10}", "bold")
                t.append(meaning + "\n", "")
        for title, pairs in self.sections:
            t.append(f"\n{title}\n\n", "bold")
            width = min(14, max((len(w) for w, _ in pairs), default=0) + 1)
            for word, meaning in pairs:
                t.append(f"  {word:<{width}}", "bold")
                t.append(meaning + "\n", "")
        t.append("\nctrl+p opens the command palette with the same actions.", "dim")
        with VerticalScroll():  # at 80×24 the legend runs past the screen
            yield Static(t)

    def action_close(self) -> None:
        self.dismiss(None)


class FatalScreen(ModalScreen[None]):
    """The console cannot run (config or profiles invalid): every problem, then quit.

    Stays up until a key is pressed, so a wall display shows why it stopped."""

    DEFAULT_CSS = """
    FatalScreen { align: center middle; }
    FatalScreen > Vertical { width: 100; max-width: 98%; height: auto; max-height: 95%;
                             border: thick $error; background: $surface; padding: 1 2; }
    """
    BINDINGS = [Binding("escape,q,enter", "close", "quit")]

    def __init__(self, problem: str) -> None:
        super().__init__()
        self.problem = problem

    def compose(self) -> ComposeResult:
        t = Text("pod-console cannot start\n\n", style="crit")
        # a file's words: its lines kept, no control character in them
        t.append("\n".join(printable(line) for line in self.problem.split("\n")))
        t.append("\n\nFix the file and start again. q quits.", "dim")
        with Vertical():
            yield Static(t, id="fatal")

    def action_close(self) -> None:
        self.dismiss(None)


class WatchdogScreen(ModalScreen[dict | None]):
    """Keep the pod running longer (+1 h, +2 h, until a time, with a reason), end an
    extension, arm, disarm, or stop now. Returns the watchdog operation's arguments."""

    AUTO_FOCUS = ""  # keys pick; the two fields are clicked or tabbed into
    DEFAULT_CSS = """
    WatchdogScreen { align: center middle; }
    WatchdogScreen > Vertical { width: 60; height: auto; border: thick $warning;
                                background: $surface; padding: 1 2; }
    """
    BINDINGS = [Binding("1", "pick('extend', '+1h')", "+1 h"),
                Binding("2", "pick('extend', '+2h')", "+2 h"),
                Binding("t", "until", "until HH:MM"),
                Binding("r", "replaces", "its end replaces the evening's stop"),
                Binding("c", "pick('clear')", "end extension"),
                Binding("a", "pick('arm')", "arm"), Binding("d", "pick('disarm')", "disarm"),
                Binding("s", "pick('stop-now')", "stop now"),
                Binding("escape", "cancel", "cancel")]

    def __init__(self, armed: bool | None, next_stop: str | None, now: float,
                 extension: str | None = None, who: str | None = None) -> None:
        super().__init__()
        self.who = who
        """Who used the gateway in the last hour (``model.gateway.who_text``), or None."""
        self.armed = armed
        self.next_stop = next_stop
        self.now = now
        self.extension = extension

    def compose(self) -> ComposeResult:
        state = {True: "armed", False: "DISARMED", None: "unknown"}[self.armed]
        with Vertical():
            yield Label(Text(f"Watchdog: {state}; next stop "
                             f"{fmt.stop_time(self.next_stop, self.now)}", style="bold"))
            if self.extension:
                yield Label(Text(printable(self.extension), style="info"))  # remote text
            if self.who:
                yield Label(Text(printable(self.who, 400), style="bold"), id="who")
            yield Label(Text("Keep the pod running:", style="dim"))
            yield Input(placeholder="reason (optional, said in every warning)", id="reason",
                        max_length=200)
            yield Button(Text("[1] +1 h"), id="plus-1h")
            yield Button(Text("[2] +2 h"), id="plus-2h")
            yield Input(placeholder="until HH:MM (the profile's zone), Enter", id="until",
                        max_length=32)
            # the agent's --replaces-next-stop: an overnight extension ending in working
            # hours then stops the pod there, in place of that evening's stop
            yield Checkbox(Text("[r] its end replaces the next evening's stop"),
                           id="replaces")
            # only what can be done now: no "end the extension" without one, no "arm"
            # when armed, no "disarm" when disarmed
            if self.extension:
                yield Button(Text("[c] end the extension"), id="clear")
            if self.armed is not True:
                yield Button(Text("[a] arm"), id="arm")
            if self.armed is not False:
                yield Button(Text("[d] disarm (nothing stops the pod)"), id="disarm")
            yield Button(Text("[s] stop the pod now"), id="stop-now", variant="error")

    def _reason(self) -> str:
        return self.query_one("#reason", Input).value.strip()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """The keys of actions that do not apply now do nothing (as their buttons are
        not there)."""
        if action == "pick" and parameters:
            what = parameters[0]
            if what == "clear" and not self.extension:
                return False
            if what == "arm" and self.armed is True:
                return False
            if what == "disarm" and self.armed is False:
                return False
        return True

    def on_button_pressed(self, event: Button.Pressed) -> None:
        bid = event.button.id or ""
        if bid.startswith("plus-"):
            self.action_pick("extend", "+" + bid.removeprefix("plus-"))
        else:
            self.action_pick(bid)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "until" and event.value.strip():
            self.action_pick("extend", event.value.strip())
        elif event.input.id == "reason":
            self.query_one("#until", Input).focus()

    def action_until(self) -> None:
        self.query_one("#until", Input).focus()

    def action_cancel(self) -> None:
        self.dismiss(None)

    def action_replaces(self) -> None:
        self.query_one("#replaces", Checkbox).toggle()

    def action_pick(self, what: str, until: str = "") -> None:
        if what == "extend":
            args: dict[str, str | bool] = {"cmd": "extend", "until": until,
                                           "reason": self._reason()}
            if self.query_one("#replaces", Checkbox).value:
                args["replaces_next_stop"] = True
            self.dismiss(args)
        elif what == "clear":
            self.dismiss({"cmd": "extend", "clear": True})
        else:
            self.dismiss({"cmd": what})


class RebalanceScreen(ModalScreen[dict[str, float] | None]):
    """Current vs proposed gpu_util per slot, validated as typed."""

    DEFAULT_CSS = """
    RebalanceScreen { align: center middle; }
    RebalanceScreen > Vertical { width: 96; max-width: 98%; height: auto; max-height: 95%;
                                 border: thick $warning; background: $surface; padding: 1 2; }
    RebalanceScreen Horizontal { height: auto; }
    RebalanceScreen Input { width: 12; }
    RebalanceScreen .name { width: 12; padding: 1 0; }
    RebalanceScreen .info { width: 1fr; padding: 1 1; }
    """
    BINDINGS = [Binding("escape", "cancel", "cancel"), Binding("ctrl+s", "apply", "apply"),
                # Tab moves the focus in the app's own key loop (priority), before the keys
                # typed after it are handed on: not so, a burst's "\t0.21" sent its "0" to
                # the field being left (one read of the terminal holds the whole burst)
                Binding("tab", "app.focus_next", "next field", show=False, priority=True),
                Binding("shift+tab", "app.focus_previous", "previous field", show=False,
                        priority=True)]

    def __init__(self, rows: list[dict], plan_lines: list[str], predict) -> None:
        """rows: {slot, current, proposed, gpus, min}; predict(slot, util) -> str"""
        super().__init__()
        self.rows = rows
        self.plan_lines = plan_lines
        self.predict = predict

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(Text("gpu_util rebalancing — edit, then ctrl+s to apply", style="bold"))
            for line in self.plan_lines:
                yield Static(Text(line, style="dim"))
            for r in self.rows:
                with Horizontal():
                    yield Label(Text(r["slot"]), classes="name")
                    yield Label(f"now {r['current']:.2f} →", classes="name")
                    yield OrderedInput(value=f"{r['proposed']:.2f}", id=f"u-{r['slot']}")
                    yield Label(self.predict(r["slot"], r["proposed"]), classes="info",
                                id=f"i-{r['slot']}")
            yield Label("", id="summary")
            yield Label("", id="verdict")
            with Horizontal():
                yield Button("Apply [ctrl+s]", id="apply", variant="warning")
                yield Button("Cancel [esc]", id="cancel")

    def on_mount(self) -> None:
        self._validate()

    def values(self) -> dict[str, float | None]:
        out: dict[str, float | None] = {}
        for r in self.rows:
            raw = self.query_one(f"#u-{r['slot']}", Input).value.strip()
            try:
                out[r["slot"]] = float(raw)
            except ValueError:
                out[r["slot"]] = None
        return out

    def problems(self) -> list[str]:
        vals = self.values()
        probs = []
        per_gpu: dict[int, float] = {}
        for r in self.rows:
            v = vals[r["slot"]]
            if v is None:
                probs.append(f"{r['slot']}: not a number")
                continue
            if not 0 < v <= MAX_GPU_UTIL_PER_GPU:
                probs.append(f"{r['slot']}: outside (0, 0.95]")
            if r.get("min") is not None and v < r["min"]:
                probs.append(f"{r['slot']}: below its minimum {r['min']:.2f}")
            for g in r["gpus"]:
                per_gpu[g] = per_gpu.get(g, 0.0) + v
        for g, total in sorted(per_gpu.items()):
            if total > MAX_GPU_UTIL_PER_GPU + 1e-9:
                probs.append(f"GPU {g}: sum {total:.2f} > 0.95")
        return probs

    def _validate(self) -> None:
        probs = self.problems()
        vals = self.values()
        for r in self.rows:
            v = vals[r["slot"]]
            self.query_one(f"#i-{r['slot']}", Label).update(
                self.predict(r["slot"], v) if v is not None else "–")
        # what applying the values typed does, redrawn at every key ("no change" when
        # they are the running split: then there is nothing to apply, nothing restarts)
        current = {r["slot"]: float(r["current"]) for r in self.rows}
        typed = {k: v for k, v in vals.items() if v is not None}
        self.query_one("#summary", Label).update(Text(
            "if applied: " + (plan_words(current, typed) if not probs else "–"), style="bold"))
        verdict = self.query_one("#verdict", Label)
        if probs:
            verdict.update(Text("✖ " + "; ".join(probs), style="crit"))
        elif self.unchanged():
            verdict.update(Text("nothing to apply", style="warn"))
        else:
            verdict.update(Text("✓ valid split", style="ok"))
        self.query_one("#apply", Button).disabled = bool(probs) or self.unchanged()

    def unchanged(self) -> bool:
        """Every value typed is the one running now: applying would restart nothing."""
        current = {r["slot"]: float(r["current"]) for r in self.rows}
        vals = self.values()
        return all(v is not None for v in vals.values()) and not changes(
            current, {k: v for k, v in vals.items() if v is not None})

    def on_input_changed(self, event: Input.Changed) -> None:
        self._validate()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "apply":
            self.action_apply()
        else:
            self.dismiss(None)

    def action_apply(self) -> None:
        if self.problems() or self.unchanged():
            return
        self.dismiss({k: v for k, v in self.values().items() if v is not None})

    def action_cancel(self) -> None:
        self.dismiss(None)
