"""What the console sends Alertmanager (``console/session/alertmanager.py``): an alert's
label set is its identity there, the same in every session, never its changing text;
outside text reaches it as data."""

from __future__ import annotations

import datetime as dt

from console.model.alerts import Alert
from console.session.alertmanager import (
    Where,
    acked_here,
    api_alert,
    exact,
    labels_of,
    silence,
)

W = Where("rtx6000-2x", "p1", "prod")


def test_labels_name_the_alert_and_where_it_is() -> None:
    def labels(key: str, sev: str = "crit") -> dict[str, str]:
        return labels_of(Alert(key, sev, "t", "", 0.0), W)  # type: ignore[arg-type]

    base = {"profile": "rtx6000-2x", "pod": "p1", "context": "prod"}
    assert labels("down:Q27") == {**base, "alertname": "SlotDown", "severity": "critical",
                                  "slot": "Q27"}
    assert labels("kv:FLASH", "warn")["alertname"] == "SlotKvCacheHigh"
    assert labels("heat:1", "warn") == {**base, "alertname": "GpuHot",
                                        "severity": "warning", "gpu": "1"}
    xid = labels("xid:0:79:1800000000")
    assert (xid["alertname"], xid["gpu"], xid["xid"]) == ("GpuXid", "0", "79")
    # a hardware fault's key names its pod (gpu_faults): the labels as the rendered GPU
    # rules make them (the exporter's gpu index; one alert per pod, GPU and Xid code)
    assert labels("xid:0:79:1800000000@p1") == {**base, "alertname": "GpuXid",
                                                "severity": "critical", "gpu": "0",
                                                "xid": "79"}
    assert labels("ecc:1@p1")["gpu"] == "1" and labels("remapfail:3@p1")["gpu"] == "3"
    assert labels("gw-5xx:the gateway", "warn")["scope"] == "the gateway"
    # a stop somebody meant is issue 43's PodStopPlanned; one nobody here made, a WARN
    assert labels("stopped", "info") == {**base, "alertname": "PodStopPlanned",
                                         "severity": "info"}
    assert labels("stopped", "warn")["alertname"] == "PodStopped"
    assert labels("restarting:Q27", "info") == {**base, "alertname": "SlotRestarting",
                                                "severity": "info", "slot": "Q27"}
    assert labels("brand-new-thing")["alertname"] == "BrandNewThing"
    assert labels("brand-new-thing")["key"] == "brand-new-thing"


def test_the_identity_does_not_move_while_it_fires_and_text_is_data() -> None:
    a = Alert("kv:Q27", "warn", "Q27 KV p99 61% > 60%", "", 100.0, fired_at=130.0)
    b = Alert("kv:Q27", "warn", "Q27 KV p99 72% > 60%", "\x1b]52;c;cGF5bG9hZA==\x07x",
              100.0, fired_at=130.0)
    sa = api_alert(a, W, 200.0, ends_at=260.0, runbook_url="https://rb/#{alertname}")
    sb = api_alert(b, W, 202.0, ends_at=262.0)
    assert sa["labels"] == sb["labels"]  # one alert in Alertmanager, not two
    assert sa["annotations"]["runbook_url"] == "https://rb/#SlotKvCacheHigh"
    assert "\x1b" not in sb["annotations"]["description"]
    assert "\x07" not in sb["annotations"]["description"]
    assert sa["startsAt"].startswith("1970-01-01T00:02:10") and sa["endsAt"].endswith("Z")


def test_a_silence_pins_the_labels_and_shows_as_the_acknowledgement() -> None:
    a = Alert("down:Q27", "crit", "Q27 down", "", 0.0)
    body = silence(labels_of(a, W), "alice", 10.0, 3610.0)
    assert exact(body["matchers"]) == labels_of(a, W)
    assert exact([{"name": "slot", "value": "Q.*", "isRegex": True}]) is None
    am = [{"labels": {**labels_of(a, W), "job": "vllm"},  # Prometheus's copy
           "status": {"silencedBy": ["s1"]}}]
    sil = [{"id": "s1", "createdBy": "bob", "startsAt": "2027-01-15T08:00:00Z"}]
    at = dt.datetime(2027, 1, 15, 8, 0, tzinfo=dt.UTC).timestamp()
    assert acked_here(am, sil, {"down:Q27": labels_of(a, W)}) == {"down:Q27": ("bob", at)}
    assert acked_here([{**am[0], "status": {"silencedBy": []}}], sil,
                      {"down:Q27": labels_of(a, W)}) == {}
