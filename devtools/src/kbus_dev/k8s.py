"""Validate deploy/k8s: ``kustomize build`` of each overlay, then ``kubeconform -strict``.

kubeconform normally downloads its schemas; here nothing outside the package registries is
reachable, so the schemas are built locally from sources the Go module proxy serves: the
Kubernetes OpenAPI document (module ``k8s.io/kubernetes``) and the CRDs of KEDA and the
Prometheus operator. Strict schemas forbid properties the API does not define, as kubeconform's
own ``-strict`` schemas do.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import yaml

from kbus_dev.servers import ensure_binary, kbus_home

KUBECONFORM = ("kubeconform", "github.com/yannh/kubeconform/cmd/kubeconform", "v0.8.0")
KUSTOMIZE = ("kustomize", "sigs.k8s.io/kustomize/kustomize/v5", "v5.8.2")
KUBERNETES = ("k8s.io/kubernetes", "v1.36.3")
CRD_SOURCES = {
    ("github.com/kedacore/keda/v2", "v2.21.0"): ["config/crd/bases/keda.sh_scaledobjects.yaml"],
    ("github.com/prometheus-operator/prometheus-operator", "v0.85.0"): [
        "example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml",
        "example/prometheus-operator-crd/monitoring.coreos.com_prometheusrules.yaml",
    ],
}
OVERLAYS = ("dev", "prod")
TEMPLATE = "{{ .ResourceKind }}{{ .KindSuffix }}.json"


def _module_dir(module: str, version: str) -> Path:
    go = shutil.which("go")
    if go is None:
        raise RuntimeError("the Go toolchain is needed to fetch the Kubernetes schemas")
    out = subprocess.run(
        [go, "mod", "download", "-json", f"{module}@{version}"],
        check=True,
        capture_output=True,
        text=True,
        cwd=str(kbus_home()),
        env={**os.environ, "GOFLAGS": "-mod=mod"},
    )
    return Path(json.loads(out.stdout)["Dir"])


def _suffix(group: str, version: str) -> str:
    return f"-{group.split('.')[0]}-{version}" if group else f"-{version}"


def _strict(node: Any) -> Any:
    """Forbid unknown properties wherever an object lists its properties."""
    if isinstance(node, dict):
        node = {k: _strict(v) for k, v in node.items()}
        if (
            "properties" in node
            and "additionalProperties" not in node
            and not node.get("x-kubernetes-preserve-unknown-fields")
        ):
            node["additionalProperties"] = False
        if node.get("format") == "int-or-string" or node.get("x-kubernetes-int-or-string"):
            node.pop("type", None)
            node.pop("format", None)
            node["oneOf"] = [{"type": "string"}, {"type": "integer"}]
        return node
    if isinstance(node, list):
        return [_strict(v) for v in node]
    return node


def _loosen_quantities(definitions: dict[str, Any]) -> None:
    # Quantities are written as numbers as often as strings.
    quantity = "io.k8s.apimachinery.pkg.api.resource.Quantity"
    if quantity in definitions:
        definitions[quantity] = {"oneOf": [{"type": "string"}, {"type": "number"}]}


def build_schemas(target: Path) -> Path:
    """Write one strict schema per kind (core and CRDs) into ``target``."""
    target.mkdir(parents=True, exist_ok=True)
    swagger = json.loads((_module_dir(*KUBERNETES) / "api/openapi-spec/swagger.json").read_text())
    definitions = _strict(swagger["definitions"])
    _loosen_quantities(definitions)
    for name, schema in swagger["definitions"].items():
        for gvk in schema.get("x-kubernetes-group-version-kind", []):
            path = target / f"{gvk['kind'].lower()}{_suffix(gvk['group'], gvk['version'])}.json"
            # Standalone: the kind's definition with every definition it refers to.
            needed = {n: definitions[n] for n in _closure(name, definitions)}
            path.write_text(json.dumps({"$ref": f"#/definitions/{name}", "definitions": needed}))
    for (module, version), files in CRD_SOURCES.items():
        root = _module_dir(module, version)
        for file in files:
            _write_crd(yaml.safe_load((root / file).read_text()), target)
    return target


def _closure(name: str, definitions: dict[str, Any]) -> set[str]:
    seen: set[str] = set()
    todo = [name]
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        todo.extend(_refs(definitions[current]))
    return seen


def _refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        found = [node["$ref"].rsplit("/", 1)[-1]] if isinstance(node.get("$ref"), str) else []
        return found + [r for v in node.values() for r in _refs(v)]
    if isinstance(node, list):
        return [r for v in node for r in _refs(v)]
    return []


def _write_crd(crd: dict[str, Any], target: Path) -> None:
    group = crd["spec"]["group"]
    kind = crd["spec"]["names"]["kind"]
    for version in crd["spec"]["versions"]:
        schema = _strict(version["schema"]["openAPIV3Schema"])
        schema.setdefault("properties", {})
        schema["properties"]["metadata"] = {"type": "object"}
        path = target / f"{kind.lower()}{_suffix(group, version['name'])}.json"
        path.write_text(json.dumps(schema))


def schema_dir() -> Path:
    """The cached schemas, built on first use (again when the sources change)."""
    sources = hashlib.sha256(repr((KUBERNETES, CRD_SOURCES)).encode()).hexdigest()[:12]
    target = kbus_home() / "k8s-schemas" / f"{KUBERNETES[1]}-strict-{sources}"
    if not (target / "deployment-apps-v1.json").is_file():
        build_schemas(target)
    return target


def validate(root: Path = Path("deploy/k8s")) -> list[str]:
    """Build every overlay and validate it; returns one summary line per overlay."""
    kubeconform = ensure_binary(*KUBECONFORM)
    kustomize = ensure_binary(*KUSTOMIZE)
    schemas = schema_dir()
    summaries = []
    for overlay in OVERLAYS:
        built = subprocess.run(
            [str(kustomize), "build", str(root / "overlays" / overlay)],
            check=True,
            capture_output=True,
            text=True,
        )
        result = subprocess.run(
            [
                str(kubeconform),
                "-strict",
                "-summary",
                "-output",
                "text",
                "-schema-location",
                str(schemas / TEMPLATE),
                "-",
            ],
            input=built.stdout,
            capture_output=True,
            text=True,
        )
        if result.returncode != 0:
            raise RuntimeError(f"overlay {overlay} is invalid:\n{result.stdout}{result.stderr}")
        summaries.append(f"{overlay}: {result.stdout.strip()}")
    return summaries


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kbus_dev k8s")
    parser.add_argument("--root", type=Path, default=Path("deploy/k8s"))
    args = parser.parse_args(argv)
    for line in validate(args.root):
        print(line)
    return 0
