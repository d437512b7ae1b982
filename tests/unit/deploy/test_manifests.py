"""deploy/: the systemd unit and the Kubernetes Deployment agree with Baton's settings."""

from __future__ import annotations

import configparser
from pathlib import Path

import yaml

from core.config import Settings

DEPLOY = Path(__file__).resolve().parents[3] / "deploy"


def _unit() -> configparser.ConfigParser:
    unit = configparser.ConfigParser(strict=False, interpolation=None)
    unit.optionxform = str  # type: ignore[assignment,method-assign]
    unit.read(DEPLOY / "systemd" / "baton.service")
    return unit


def test_systemd_restarts_a_crash_but_not_a_configuration_error_and_waits_out_the_grace() -> None:
    service = _unit()["Service"]
    assert service["ExecStart"].endswith("baton run")  # not supervised: systemd sees each crash
    assert service["Restart"] == "on-failure" and service["RestartPreventExitStatus"] == "2"
    assert service["EnvironmentFile"] == "/etc/baton/baton.env"
    grace = Settings.model_fields["shutdown_grace"].default
    assert float(service["TimeoutStopSec"]) >= grace + 5
    assert service["NoNewPrivileges"] == "yes" and service["ProtectSystem"] == "strict"


def test_kubernetes_probes_the_one_http_port_and_gives_more_than_the_shutdown_grace() -> None:
    deployment = yaml.safe_load((DEPLOY / "kubernetes" / "deployment.yaml").read_text())
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert container["command"] == ["baton", "run"]
    assert pod["terminationGracePeriodSeconds"] >= float(env["BATON_SHUTDOWN_GRACE"]) + 5
    port = int(env["BATON_WEB_PORT"])
    assert env["BATON_WEB_HOST"] == "0.0.0.0"
    assert [p["containerPort"] for p in container["ports"] if p["name"] == "http"] == [port]
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        assert container[probe]["httpGet"]["port"] == "http", probe
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert not {"BATON_HEALTH_PORT", "BATON_HEALTH_HOST", "BATON_SLACK_PORT"} & set(env)  # refused at start
    secret = yaml.safe_load((DEPLOY / "kubernetes" / "secret.example.yaml").read_text())
    assert container["envFrom"] == [{"secretRef": {"name": secret["metadata"]["name"]}}]
    for key in secret["stringData"]:  # every key is a setting Baton reads
        assert key.removeprefix("BATON_").lower() in Settings.model_fields, key
