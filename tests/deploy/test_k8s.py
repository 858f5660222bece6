"""deploy/k8s builds with kustomize and passes kubeconform -strict (core, KEDA, Prometheus)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from kbus_dev.k8s import validate
from kbus_runtime.runner import GRACE_S, STUCK_S
from kbus_runtime.settings import StoreSettings

ROOT = Path(__file__).resolve().parents[2]


def test_every_overlay_is_valid() -> None:
    summaries = validate(ROOT / "deploy" / "k8s")
    assert len(summaries) == 2
    for line in summaries:
        assert "Invalid: 0, Errors: 0" in line
        assert "Valid: 0," not in line


def test_the_validator_rejects_what_kubernetes_would(tmp_path: Path) -> None:
    tree = tmp_path / "k8s"
    shutil.copytree(ROOT / "deploy" / "k8s", tree)
    deployments = tree / "base" / "deployments.yaml"
    docs = list(yaml.safe_load_all(deployments.read_text()))
    docs[0]["spec"]["template"]["spec"]["containers"][0]["imagePullPolicyy"] = "Always"
    deployments.write_text(yaml.safe_dump_all(docs))
    with pytest.raises(RuntimeError, match="imagePullPolicyy"):
        validate(tree)
    scaled = tree / "base" / "autoscaling.yaml"
    scaled.write_text(scaled.read_text().replace("minReplicaCount: 1", "minReplicaCount: one", 1))
    deployments.write_text((ROOT / "deploy/k8s/base/deployments.yaml").read_text())
    with pytest.raises(RuntimeError, match="ScaledObject"):
        validate(tree)


def test_prod_replicates_streams_and_every_stage_scales_on_its_backlog() -> None:
    import subprocess

    from kbus_dev.k8s import KUSTOMIZE
    from kbus_dev.servers import ensure_binary

    built = subprocess.run(
        [str(ensure_binary(*KUSTOMIZE)), "build", str(ROOT / "deploy/k8s/overlays/prod")],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    resources = list(yaml.safe_load_all(built))
    config = next(r for r in resources if r["kind"] == "ConfigMap")
    assert config["data"]["KBUS_STREAM_REPLICAS"] == "3"
    assert config["data"]["KBUS_WEAVIATE_REPLICATION_FACTOR"] == "3"
    hosts = StoreSettings(hosts=config["data"]["KBUS_WEAVIATE_HOSTS"]).nodes()
    assert [n.host.split(".")[0] for n in hosts] == ["weaviate-0", "weaviate-1", "weaviate-2"]
    scaled = {
        r["spec"]["scaleTargetRef"]["name"]: r["spec"]["triggers"][0]["metadata"]
        for r in resources
        if r["kind"] == "ScaledObject"
    }
    # Each stage scales on what waits for it, whichever consumers take it (fair share).
    assert {k: v["query"] for k, v in scaled.items()} == {
        "kbus-ingestor": 'max(kbus_stage_pending{stage="ingestor"})',
        "kbus-generator": 'max(kbus_stage_pending{stage="generator"})',
        "kbus-embedder": 'max(kbus_stage_pending{stage="embedder"})',
        "kbus-searcher-indexer": 'max(kbus_stage_pending{stage="indexer"})',
    }
    hpas = {
        r["spec"]["scaleTargetRef"]["name"]
        for r in resources
        if r["kind"] == "HorizontalPodAutoscaler"
    }
    assert hpas == {"kbus-gateway", "kbus-searcher-query", "kbus-reranker"}
    assert {
        v["minReplicaCount"] for v in (r["spec"] for r in resources if r["kind"] == "ScaledObject")
    } == {2}
    for deployment in (r for r in resources if r["kind"] == "Deployment"):
        assert deployment["spec"]["replicas"] >= 2, deployment["metadata"]["name"]
        assert deployment["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
        pod = deployment["spec"]["template"]["spec"]
        # Kubernetes sends SIGKILL only after the service would have ended itself.
        assert pod["terminationGracePeriodSeconds"] > GRACE_S + STUCK_S
        container = pod["containers"][0]
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
        assert container["readinessProbe"]["httpGet"]["path"] == "/health"
        assert container["resources"]["limits"]
    weaviate_clients = {
        r["metadata"]["name"]
        for r in resources
        if r["kind"] == "Deployment"
        and r["spec"]["template"]["metadata"]["labels"].get("kbus.dev/weaviate-client") == "true"
    }
    assert weaviate_clients == {"kbus-searcher-indexer", "kbus-searcher-query"}


def test_each_pod_uses_its_own_nats_user_and_inbox() -> None:
    """Every workload but the console, which holds no NATS user: each of its requests connects
    as the credential its bearer token carries."""
    from kbus_dev.natsauth import SERVICES, inbox

    secret = yaml.safe_load((ROOT / "deploy/k8s/base/nats-users-secret.yaml").read_text())
    assert set(secret["stringData"]) == set(SERVICES)
    docs = [
        d for d in yaml.safe_load_all((ROOT / "deploy/k8s/base/deployments.yaml").read_text()) if d
    ]
    jobs = [d for d in yaml.safe_load_all((ROOT / "deploy/k8s/base/setup-job.yaml").read_text())]
    for workload in docs + jobs:
        env = {e["name"]: e for e in workload["spec"]["template"]["spec"]["containers"][0]["env"]}
        if workload["metadata"]["name"] == "kbus-console":
            assert not any("NATS" in name for name in env), env
            continue
        spec = workload["spec"]["template"]["spec"]
        if workload["kind"] == "Job":  # runs once: its credentials read at its start
            user = env["KBUS_NATS_CREDENTIALS"]["valueFrom"]["secretKeyRef"]["key"]
        else:  # a mounted file, read again for its renewals (docs/security.md)
            [volume] = [v for v in spec["volumes"] if v["name"] == "nats-user"]
            [item] = volume["secret"]["items"]
            [mount] = [m for m in spec["containers"][0]["volumeMounts"] if m["name"] == "nats-user"]
            assert volume["secret"]["secretName"] == "kbus-nats-users"
            path = f"{mount['mountPath']}/{item['path']}"
            assert env["KBUS_NATS_CREDENTIALS_FILE"]["value"] == path
            assert "KBUS_NATS_CREDENTIALS" not in env
            user = item["key"]
        assert user in SERVICES
        assert env["KBUS_INBOX_PREFIX"]["value"] == inbox(user)


def test_nothing_is_provisioned_per_tenant_but_its_account(tmp_path: Path) -> None:
    """nats-auth writes the accounts and credentials (a tenant is its account's JWT and its
    credentials, nothing in the server's configuration); the setup job takes no tenant list."""
    from kbus_dev.natsauth import main as nats_auth

    nats_auth(["--out", str(tmp_path), "--credential", "acme", "--credential", "b=globex:x"])
    assert not list(tmp_path.glob("tenants*"))
    assert sorted(p.name for p in tmp_path.glob("account-*")) == [
        "account-KBUS.jwt",
        "account-SYS.jwt",
        "account-acme.jwt",
        "account-globex.jwt",
    ]
    conf = (tmp_path / "auth.conf").read_text()
    assert "acme" not in conf
    assert "globex" not in conf
    [job] = list(yaml.safe_load_all((ROOT / "deploy/k8s/base/setup-job.yaml").read_text()))
    command = job["spec"]["template"]["spec"]["containers"][0]["command"]
    assert command == ["python", "-m", "kbus_searcher.jobs.setup"]
