"""``pod-console watch|wall|demo``: open the console (all through ``make_app``)."""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from console.commands import examples
from console.commands.argtypes import count, seconds

REFRESH = seconds(0, 3600, above=True)
ROTATE = seconds(1, 86400)

if TYPE_CHECKING:
    from console.config.settings import Settings
    from console.session.boot import BootPlan
    from console.session.view import ConsoleContext, StagedStart
    from console.ui.app import PodConsoleApp



def register(sub: argparse._SubParsersAction) -> None:
    w = sub.add_parser("watch", help="open the console on the configured deployment",
        **examples(
            'pod-console watch                       # the configured deployment',
            'pod-console watch --config ~/pod.yaml --refresh 5',
        ))
    w.add_argument("--config", type=Path,
                   help="the config file (default: $POD_CONSOLE_CONFIG, else "
                        "$XDG_CONFIG_HOME/pod-console/config.yaml, ~/.config by default)")
    w.add_argument("--refresh", type=REFRESH, help="refresh interval in seconds (floor 1)")
    w.set_defaults(func=cmd_watch, wall=False)

    wl = sub.add_parser("wall", help="read-only wall display (no SSH key needed)",
        **examples(
            'pod-console wall --rotate 20            # read-only, needs no SSH key',
            'pod-console wall --web 8080             # in a browser, http://127.0.0.1:8080',
            'pod-console wall --web 0.0.0.0:8080 --allow-remote --token-file ~/.wall-token',
        ))
    wl.add_argument("--config", type=Path)
    wl.add_argument("--refresh", type=REFRESH)
    wl.add_argument("--rotate", type=ROTATE, default=15.0, help="seconds per view")
    wl.add_argument("--pod-rotate", type=ROTATE, default=60.0, metavar="S",
                    help="with contexts in the config: seconds on each pod before the "
                         "next (0: stay on one)")
    _web_flags(wl)
    wl.set_defaults(func=cmd_watch, wall=True)

    d = sub.add_parser("demo", help="a living simulated deployment (no GPU, no network)",
        **examples(
            'pod-console demo                        # simulated pod, slots and RunPod; says DEMO',
            'pod-console demo --web 8080             # its wall in a browser, http://127.0.0.1:8080',
            'pod-console demo --clock-speed 60       # the pod\'s evening in a minute: palette'
            ' "traffic stops", then w',
            'pod-console demo --fleet                # three pods, three contexts: F, enter',
        ))
    d.add_argument("--wall", action="store_true", help="the demo in read-only wall mode")
    _web_flags(d)
    d.add_argument("--refresh", type=REFRESH, default=2.0,
                   help="seconds between polls of the simulated slots (default 2, floor 1)")
    d.add_argument("--rotate", type=ROTATE, default=15.0,
                   help="with --wall or --web: seconds per wall view (default 15)")
    d.add_argument("--seed", type=int, default=7,
                   help="the simulated traffic's random seed: the same seed, the same "
                        "demo (default 7)")
    d.add_argument("--attach", nargs="?", const="", default=None, type=str, metavar="FILE",
                   help="an operator console on a demo running in another terminal "
                        "(demo, demo --wall, demo --web): its palette's faults land on "
                        "that demo's pod, so its wall shows the incident (FILE: the "
                        "attach file it printed; default: the demo's state directory's)")
    d.add_argument("--fleet", action="store_true",
                   help="three simulated pods, each a context of the demo's config: F shows "
                        "them all, enter opens the console on another")
    d.add_argument("--clock-speed", type=_speed, default=1.0, metavar="N",
                   help="the pod agent's clock runs N times as fast, from six pod hours before "
                        "the scheduled stop (the stop policy in a minute)")
    d.set_defaults(func=cmd_demo)


def _speed(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 1.0 <= v <= 600.0:
        raise argparse.ArgumentTypeError("between 1 and 600")
    return v


def _web_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--web", metavar="[HOST:]PORT",
                   help="serve the wall to browsers (loopback unless --allow-remote)")
    p.add_argument("--allow-remote", action="store_true",
                   help="with --web: listen on a non-loopback address (needs --token-file)")
    p.add_argument("--token-file", type=Path,
                   help="with --web: browsers must present this token (?token=…)")
    p.add_argument("--max-sessions", type=count(1, 64), default=4,
                   help="with --web: browser sessions at once (each runs a wall process)")
    p.add_argument("--public-url",
                   help="with --web: the URL browsers use (a reverse proxy's, prefix included)")


def cmd_watch(args: argparse.Namespace) -> int:
    if getattr(args, "web", None):
        return cmd_web_wall(args)
    from console.config.config_file import no_config_found

    why = no_config_found(args.config)
    if why is not None:
        print(why, file=sys.stderr)
        return 1
    from console.session.boot import plan

    boot = plan(args.config, args.refresh)
    if boot is None:  # the fast reading was not sure: validate first, then open
        ctx = full_context(args.config, args.refresh, args.wall)
        if ctx is None:
            return 1
        ctx.rotate_s = getattr(args, "rotate", 15.0)
        ctx.pod_rotate_s = getattr(args, "pod_rotate", 0.0) if args.wall else 0.0
        start: ConsoleContext | StagedStart = ctx
    else:
        # the first poll begins here, and its requests are answered while Textual and
        # the screens load below (``console/session/first_poll.py``)
        start = staged_start(boot, args.config, args.refresh, args.wall,
                             getattr(args, "rotate", 15.0))
    from console.ui.app import make_app

    app = make_app(start, wall=args.wall)
    code = run_console(app)
    from console.session.view import SwitchRequest

    if code == 0 and isinstance(app.return_value, SwitchRequest):
        reopen_on(app.return_value.context)  # does not return
    return code


def run_console(app: PodConsoleApp) -> int:
    """Run the console; its exit status. An unexpected end — an exception the error
    boundary could not survive, or one out of Textual itself — leaves a crash report
    (traceback, time, version) in the state directory and is never status 0."""
    import traceback

    from console.ui.crash import write_crash_report

    try:
        app.run()
    except Exception:
        app.crash = app.crash or traceback.format_exc()
    if app.crash is None:
        return int(app.return_code or 0)
    state_dir = app.error_boundary.state_dir()
    path = write_crash_report(state_dir, app.crash)
    where = f"crash report: {path}" if path is not None else \
        f"(no crash report: {state_dir} is not writable)"
    print(f"pod-console ended unexpectedly; {where}\n"
          f"{app.crash.strip().splitlines()[-1]}", file=sys.stderr)
    return int(app.return_code or 1) or 1


def without_context(argv: list[str]) -> list[str]:
    """The command line minus its ``--context`` (both spellings)."""
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a == "--context":
            skip = True
        elif not a.startswith("--context="):
            out.append(a)
    return out


def reopen_on(context: str) -> None:
    """The same console command on another context, in this process's place (the
    terminal, a web wall's session, stay the same; nothing of the old pod's state
    carries over)."""
    import os

    argv = [sys.executable, "-m", "console.cli", *without_context(sys.argv[1:]),
            "--context", context]
    sys.stdout.flush()
    os.execv(sys.executable, argv)


def cmd_web_wall(args: argparse.Namespace, config: Path | None = None,
                 before_serving: Callable[[], None] | None = None) -> int:
    """Check the web flags, then serve; ``before_serving`` runs once they are known good
    (the demo starts its deployment there, not for a command line that is refused)."""
    from console.ui import web_wall

    try:
        host, port = web_wall.parse_listen(args.web)
        token = web_wall.read_token(args.token_file)
        web_wall.check_exposure(host, args.allow_remote, token)
        if args.max_sessions < 1:
            raise web_wall.WebWallError("--max-sessions must be at least 1")
        import textual_serve  # noqa: F401 — the optional dependency, asked for here

        web_wall.check_library()
    except web_wall.WebWallError as exc:
        print(f"pod-console: {exc}", file=sys.stderr)
        return 2
    except ImportError:
        print("pod-console --web needs textual-serve: pip install 'pod-console[web]'",
              file=sys.stderr)
        return 2
    if before_serving is not None:
        before_serving()
    command = web_wall.session_command(config or args.config, args.refresh, args.rotate)
    web_wall.make_server(command, host, port, token, args.max_sessions, args.public_url,
                         refresh_s=sessions_refresh(config or args.config,
                                                    args.refresh)).serve()
    return 0


def sessions_refresh(config: Path | None, refresh: float | None) -> float:
    """The refresh a web wall's sessions poll at (the scrape relay keeps each answer for
    a little less): ``--refresh``, else the config's, else the default."""
    if refresh is not None:
        return refresh
    from console.config.settings import ConfigError, Settings, load_settings

    try:
        return load_settings(config).refresh_s
    except (ConfigError, OSError, ValueError):
        return float(Settings.model_fields["refresh_s"].default)


def full_context(config: Path | None, refresh: float | None, wall: bool) -> ConsoleContext | None:
    from console.config.settings import ConfigError
    from console.session.context import make_context
    from console.session.deployment import DeploymentError

    try:
        ctx = make_context(load_validated(config, refresh), read_only=wall)
        ctx.config = config
        return ctx
    except (ConfigError, DeploymentError) as exc:
        print(f"pod-console: {exc}", file=sys.stderr)
        return None


def load_validated(config: Path | None, refresh: float | None) -> Settings:
    from console.commands.pod_cmd import apply_current_pod
    from console.config.settings import load_settings

    settings = load_settings(config, refresh_s=refresh)
    apply_current_pod(settings)
    return settings


def staged_start(boot: BootPlan, config: Path | None, refresh: float | None, wall: bool,
                 rotate_s: float) -> StagedStart:
    """First frame from the boot plan; the validated context follows in a thread. The
    first poll starts at once, in a thread of its own (``first_poll.py``)."""
    from console.model.history import History
    from console.session.first_poll import FirstPoll
    from console.sources.collect.poller import DeploymentPoller

    history = History(boot.history_s, boot.refresh_s)
    poller = DeploymentPoller(
        boot.profile_name, boot.targets, prometheus_url=boot.prometheus_url,
        window_s=boot.window_s, timeout_s=boot.request_timeout_s, api_key=boot.api_key,
        history=history, prom_selector=boot.prom_selector)
    first = FirstPoll(poller)
    from console.session.view import ConsoleView, StagedStart

    view = ConsoleView(profile_name=boot.profile_name, targets=boot.targets, read_only=wall,
                       demo=boot.demo, refresh_s=boot.refresh_s,
                       plot_refresh_s=boot.plot_refresh_s, rotate_s=rotate_s,
                       theme=boot.theme)

    def finish(poller: DeploymentPoller, history: History) -> ConsoleContext:
        from console.session.context import make_context
        from console.ui.widgets import plot_widgets  # noqa: F401 — imported here, off the UI thread

        ctx = make_context(load_validated(config, refresh), read_only=wall, poller=poller,
                           history=history)
        ctx.rotate_s = rotate_s
        ctx.config = config
        return ctx

    return StagedStart(view=view, poller=poller, history=history, finish=finish,
                       first_poll=first)


def demo_context(demo, refresh_s: float = 2.0, wall: bool = False, stop_demo_on_exit=True,
                 context: str | None = None):
    """A console context on a running demo deployment (a new one per app); with
    ``--fleet``, on ``context``'s pod (default: the first), its config the demo's own
    file of three contexts, as the fleet (``F``) reads it."""
    from console.session.context import make_context

    settings = demo.settings(refresh_s, context)
    pid = settings.pod.machine_id or demo.pod_id
    ctx = make_context(settings, read_only=wall, transport=demo.transport_for(pid),
                       transport_factory=demo.provision_transport,
                       runpod_base=demo.emulator.base_url, demo=demo,
                       provision_cfg=demo.provision_config(), probe_interval_s=30)
    if demo.fleet:
        import os

        ctx.config = demo.write_config(refresh_s)
        # the fleet's collector reads the demo's RunPod as any context's: from the
        # environment, never the file
        os.environ.update(demo.session_env())
    if not stop_demo_on_exit:
        ctx.on_exit = [f for f in ctx.on_exit if f != demo.stop]
    return ctx


def build_demo(seed: int = 7, refresh_s: float = 2.0, wall: bool = False,
               workdir: Path | None = None, startup_s: float = 4.0,
               clock_speed: float = 1.0, fleet: bool = False):
    """Start the demo deployment and return (demo, context): used by the CLI, tests, screenshots."""
    from console.demo.deployment import DemoDeployment

    demo = DemoDeployment(workdir=workdir, seed=seed, startup_s=startup_s,
                          clock_speed=clock_speed, fleet=fleet)
    demo.start()
    # with --fleet, the demo outlives one console: enter on another pod opens the next
    return demo, demo_context(demo, refresh_s, wall, stop_demo_on_exit=not fleet)


def cmd_demo(args: argparse.Namespace) -> int:
    """The demo in this terminal. Every process it starts (the pod agent, its simulated
    slots, the exporter) stops when it ends, however it ends: q, SIGTERM, SIGHUP (the
    console quits on those), a crash (the ``finally``), a signal before the console is
    up (turned into an exit that runs the ``finally``)."""
    if args.attach is not None:
        return demo_attach(args)
    if args.web:
        return demo_web_wall(args)
    from console.demo.deployment import DemoDeployment
    from console.session.view import SwitchRequest
    from console.ui.app import make_app

    print("starting the demo deployment (simulated pod" + ("s" if args.fleet else "")
          + ", real agent)…", file=sys.stderr)
    demo = DemoDeployment(seed=args.seed, clock_speed=args.clock_speed, fleet=args.fleet)
    with exit_on_signals():
        try:
            demo.start()
            demo.write_attach(args.refresh)  # for an operator's console beside a wall
            # the demo outlives the console (with --fleet, enter on another pod opens the
            # next): it stops below, once the terminal is back, saying what it stops
            ctx = demo_context(demo, args.refresh, args.wall, stop_demo_on_exit=False)
            while True:
                ctx.rotate_s = args.rotate
                app = make_app(ctx, wall=args.wall)
                code = run_console(app)
                # the fleet's enter: the console again, on that context's pod of the demo
                result = app.return_value
                if code != 0 or not (isinstance(result, SwitchRequest)
                                     and result.context in demo.contexts):
                    break
                ctx = demo_context(demo, args.refresh, args.wall, stop_demo_on_exit=False,
                                   context=result.context)
        finally:
            with signals_held():  # a second signal must not cut the clean-up short
                demo._stop_all(say=_say)
    return code


def _say(text: str) -> None:
    """A line of the demo's teardown, on the terminal the console has just left."""
    with contextlib.suppress(OSError, ValueError):  # the terminal may be gone (SIGHUP)
        print(text, file=sys.stderr, flush=True)


_STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


@contextlib.contextmanager
def exit_on_signals() -> Iterator[None]:
    """SIGTERM and SIGHUP raise ``SystemExit(128+n)`` here, so ``finally`` blocks run
    (Python's default for them ends the process on the spot). The console's own
    handlers take over while it runs and quit it cleanly."""
    def leave(sig: int, _frame: object) -> None:
        raise SystemExit(128 + sig)

    before = {s: signal.signal(s, leave) for s in _STOP_SIGNALS}
    try:
        yield
    finally:
        for s, h in before.items():
            signal.signal(s, h)


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """SIGTERM, SIGHUP and SIGINT wait until the block is done."""
    held = {*_STOP_SIGNALS, signal.SIGINT}
    before = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


def demo_web_wall(args: argparse.Namespace) -> int:
    """The demo's wall in a browser: one demo deployment, here; each browser session is
    an ordinary ``pod-console wall`` process opened on it through a written config that
    says ``demo: true`` (so the page says DEMO) — the same code as a real web wall."""
    import os

    from console.demo.deployment import DemoDeployment

    demo = DemoDeployment(seed=args.seed, clock_speed=args.clock_speed,
                          fleet=getattr(args, "fleet", False))
    config: list[Path] = []

    def start() -> None:
        print("starting the demo deployment (simulated pod, real agent)…", file=sys.stderr)
        demo.start()
        config.append(demo.write_config(args.refresh))
        os.environ.update(demo.session_env())  # the sessions' environment, not their argv
        print(f"to show an incident on the wall: {attach_hint(demo.write_attach(args.refresh))}"
              " in another terminal, then its palette (ctrl+p): a slot dies, hangs, a GPU "
              "fault…", file=sys.stderr, flush=True)

    try:
        return cmd_web_wall(args, config=demo.workdir / "config.yaml", before_serving=start)
    finally:
        if config:
            demo._stop_all(say=_say)


def attach_hint(path: Path) -> str:
    """The command line that opens an operator console on the demo whose attach file is
    ``path`` (no argument where a plain ``demo --attach`` finds it)."""
    import shlex

    from console.demo.deployment import ATTACH_FILE, demo_state_dir

    if path == demo_state_dir() / ATTACH_FILE:
        return "pod-console demo --attach"
    return shlex.join(["pod-console", "demo", "--attach", str(path)])


def demo_attach(args: argparse.Namespace) -> int:
    """``demo --attach``: an operator's console on a demo another process runs (its
    wall, in a terminal or a browser, watches the same pod). Its operations reach that
    demo's agent and RunPod; its palette's faults land in that demo's files; quitting it
    stops nothing of the demo."""
    import os

    from console.config.settings import ConfigError, load_settings
    from console.demo.deployment import ATTACH_FILE, DemoDeployment, DemoNotRunning, demo_state_dir
    from console.session.context import make_context
    from console.ui.app import make_app

    path = Path(args.attach) if args.attach else demo_state_dir() / ATTACH_FILE
    try:
        demo = DemoDeployment.attached_to(path)
        info = demo.attached or {}
        os.environ.update(info["session_env"])  # the demo's RunPod, as its sessions have it
        settings = load_settings(Path(info["config"]), refresh_s=args.refresh)
    except (DemoNotRunning, ConfigError, OSError) as exc:
        print(f"pod-console: {exc}", file=sys.stderr)
        return 2
    ctx = make_context(settings, transport=demo.transport_for(demo.pod_id or ""),
                       transport_factory=demo.provision_transport,
                       runpod_base=info["session_env"]["RUNPOD_API_BASE"], demo=demo,
                       provision_cfg=demo.provision_config(), probe_interval_s=30)
    ctx.config = Path(info["config"])
    return run_console(make_app(ctx, wall=False))
