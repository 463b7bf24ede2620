"""A real OpenSSH server (Debian ``openssh-server``) on a loopback port, key auth only."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import procs

SSHD = "/usr/sbin/sshd"


def available() -> bool:
    return os.path.exists(SSHD) and shutil.which("ssh-keygen") is not None


@dataclass
class SshServer:
    workdir: Path
    port: int = field(default_factory=procs.free_port)
    proc: subprocess.Popen[bytes] | None = None
    extra_config: list[str] = field(default_factory=list)
    # the session environment a pod's sshd gives every command (one SetEnv line: sshd
    # keeps only the first SetEnv it reads)
    env: dict[str, str] = field(default_factory=dict)

    @property
    def client_key(self) -> Path:
        return self.workdir / "client_ed25519"

    @property
    def host_key(self) -> Path:
        return self.workdir / "ssh_host_ed25519_key"

    def _keygen(self, path: Path) -> None:
        if not path.exists():
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)],
                           check=True)

    def regenerate_host_key(self) -> None:
        for p in (self.host_key, Path(str(self.host_key) + ".pub")):
            p.unlink(missing_ok=True)
        self._keygen(self.host_key)

    def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._keygen(self.host_key)
        self._keygen(self.client_key)
        auth = self.workdir / "authorized_keys"
        auth.write_text(Path(str(self.client_key) + ".pub").read_text())
        os.chmod(auth, 0o600)
        Path("/run/sshd").mkdir(parents=True, exist_ok=True)  # privilege separation dir
        cfg = self.workdir / "sshd_config"
        cfg.write_text("\n".join([
            f"Port {self.port}", "ListenAddress 127.0.0.1", f"HostKey {self.host_key}",
            f"AuthorizedKeysFile {auth}", f"PidFile {self.workdir / 'sshd.pid'}",
            "PasswordAuthentication no", "KbdInteractiveAuthentication no", "UsePAM no",
            "StrictModes no", "PermitRootLogin prohibit-password", "LogLevel ERROR",
            "Subsystem sftp internal-sftp", "MaxSessions 20", "MaxStartups 50",
            # sshd runs each command through root's login shell, and Debian's bash sources
            # ~/.bashrc for a top-level ssh command. This machine's rc is not the pod under
            # test: here it runs `pyenv init`, whose rehash waits 60 s on a lock file that a
            # killed shell left behind (every agent command then timed out in CI). SHLVL=1
            # makes bash count the command as nested, so it reads no rc file.
            "SetEnv " + " ".join(f"{k}={v}" for k, v in {"SHLVL": "1", **self.env}.items()),
            *self.extra_config,
        ]) + "\n")
        log = self.workdir / "sshd.log"
        self.proc = procs.start([SSHD, "-D", "-e", "-f", str(cfg)], log)
        deadline = time.time() + 20
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"sshd exited: {log.read_text()[-2000:]}")
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            time.sleep(0.1)
        raise TimeoutError("sshd did not listen")

    def stop(self) -> None:
        if self.proc is not None:
            procs.stop(self.proc)
            self.proc = None

    def restart(self) -> None:
        self.stop()
        self.start()
