"""``pod-console doctor``: what is wrong with this set-up, check by check, and what to do.

Every check has a stable id (``ssh.hostkey``, ``gateway.key``…), its own time limit of
three seconds at most, and one result: ``ok``, ``warn``, ``fail`` or ``skip`` (it does not
apply here: no gateway configured, the agent runs locally), with one sentence and the
next step. They run concurrently through the console's own parts — the SSH transport and
agent client, the slot probe, the Prometheus and gateway clients, the GPU metrics source,
the smoke test's checks — so the doctor sees what the console sees. What two checks both
need (one SSH login, one ``status --json``, one probe of each slot) is asked once and
shared; a check that runs out of time does not cancel it for the others.

No Textual here: the CLI prints the report, the console shows it.
"""

from console.session.doctor.report import DoctorReport, Finding
from console.session.doctor.run import CHECKS, IDS, MAX_TIMEOUT_S, load, open_for, run_doctor

__all__ = ["CHECKS", "IDS", "MAX_TIMEOUT_S", "DoctorReport", "Finding", "load", "open_for",
           "run_doctor"]
