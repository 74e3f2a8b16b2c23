"""deploy/kubernetes/ and the Dockerfile, offline: every manifest against the Kubernetes JSON schemas
(kubernetes-validate's bundled ones, strict: an unknown field fails), then what the schemas cannot
see: the flags each container runs parse with gavel-ng's own CLI, ports agree between Service,
probes and flags, the token Secret is mounted where --token-file points, workers pick their nodes
by GPU product and offer the GPUs they request, and the image runs as the user the pods expect."""

from __future__ import annotations

import base64
import json
import posixpath
import re
import tomllib
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
KUBE = ROOT / "deploy" / "kubernetes"
KUBERNETES_VERSION = "1.30.0"          # the oldest Kubernetes the manifests are checked against
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
GPU_COUNT_LABEL = "nvidia.com/gpu.count"
# flags the manifests pass whose implementation is another branch's part of the same change;
# once it has landed, the parser check below covers them too

def kustomization() -> dict:
    return yaml.safe_load((KUBE / "kustomization.yaml").read_text())


def generated_secrets() -> list[dict]:
    """The Secrets kustomization.yaml's secretGenerator makes (with a stand-in value: the token
    file is written at deploy time and is not in git)."""
    out = []
    for gen in kustomization().get("secretGenerator", []):
        keys = [f.split("=", 1)[0] if "=" in f else posixpath.basename(f) for f in gen.get("files", [])]
        keys += [lit.split("=", 1)[0] for lit in gen.get("literals", [])]
        out.append({"apiVersion": "v1", "kind": "Secret", "type": gen.get("type", "Opaque"),
                    "metadata": {"name": gen["name"], "namespace": kustomization()["namespace"]},
                    "data": {k: base64.b64encode(b"stand-in").decode() for k in keys}})
    return out


def documents() -> list[dict]:
    docs = []
    for name in kustomization()["resources"]:
        docs += [d for d in yaml.safe_load_all((KUBE / name).read_text()) if d is not None]
    return docs + generated_secrets()


def find(kind: str, name: str | None = None) -> list[dict]:
    return [d for d in documents() if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]


def one(kind: str, name: str | None = None) -> dict:
    (doc,) = find(kind, name)
    return doc


def flags(args: list[str]) -> dict[str, str]:
    """`--flag=value` and `--flag value` pairs of a container's args (after the subcommand)."""
    out, i = {}, 1
    while i < len(args):
        key, eq, value = args[i].partition("=")
        if not eq:
            value, i = args[i + 1], i + 1
        out[key] = value
        i += 1
    return out


def expand(value: str, container: dict) -> str:
    """Kubernetes' $(VAR) expansion in args, from the container's literal env values."""
    env = {e["name"]: e["value"] for e in container.get("env", []) if "value" in e}
    return re.sub(r"\$\((\w+)\)", lambda m: env.get(m.group(1), m.group(0)), value)


def workloads() -> list[dict]:
    return find("Deployment") + find("DaemonSet")


def container(workload: dict) -> dict:
    (c,) = workload["spec"]["template"]["spec"]["containers"]
    return c


def test_every_manifest_is_in_the_kustomization():
    listed = set(kustomization()["resources"])
    on_disk = {p.name for p in KUBE.glob("*.yaml")} - {"kustomization.yaml"}
    assert listed == on_disk


@pytest.mark.parametrize("doc", documents(), ids=lambda d: f"{d['kind']}/{d['metadata']['name']}")
def test_manifest_matches_the_kubernetes_schema(doc):
    try:
        kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)
    except kubernetes_validate.ValidationError as exc:
        pytest.fail(f"{doc['kind']}/{doc['metadata']['name']}: {exc.message} at {list(exc.path)}")


def test_the_schemas_are_strict():
    """A misspelt field must fail, or the schema test above proves little."""
    doc = json.loads(json.dumps(one("Deployment")))
    doc["spec"]["template"]["spec"]["containers"][0]["livenessProbe"]["grpcc"] = {"port": 1}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)


@pytest.mark.parametrize("kind", ["Deployment", "DaemonSet"])
def test_args_parse_with_the_cli(kind):
    from gavel_ng.cli import build_parser

    parser = build_parser()
    workloads = find(kind)
    assert workloads
    for w in workloads:
        c = container(w)
        args = parser.parse_args([expand(a, c) for a in c["args"]])
        assert args.command == ("scheduler" if kind == "Deployment" else "worker"), c["args"]


def test_scheduler_is_one_replica_replaced_not_rolled():
    d = one("Deployment", "gavel-ng-scheduler")
    assert d["spec"]["replicas"] == 1
    assert d["spec"]["strategy"] == {"type": "Recreate"}


def probe_ports(c: dict) -> set[int]:
    ports = set()
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        if probe in c:
            assert set(c[probe]) & {"grpc", "httpGet", "tcpSocket", "exec"} == {"grpc"}, probe
            ports.add(c[probe]["grpc"]["port"])
    return ports


@pytest.mark.parametrize("kind", ["Deployment", "DaemonSet"])
def test_probes_are_grpc_on_the_port_the_args_name(kind):
    for w in find(kind):
        c = container(w)
        assert "livenessProbe" in c and "readinessProbe" in c, w["metadata"]["name"]
        port = int(flags(c["args"])["--port"])
        assert probe_ports(c) == {port}
        assert {"name": "grpc", "containerPort": port} in c["ports"]


def test_service_ports_agree_with_the_scheduler():
    c = container(one("Deployment", "gavel-ng-scheduler"))
    f = flags(c["args"])
    named = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert named == {"grpc": int(f["--port"]), "metrics": int(f["--metrics-port"])}
    svc = one("Service", "gavel-ng-scheduler")
    assert svc["spec"]["selector"].items() <= one("Deployment")["spec"]["template"]["metadata"]["labels"].items()
    ports = {p["name"]: p for p in svc["spec"]["ports"]}
    assert set(ports) == {"grpc", "metrics"}
    for name, p in ports.items():
        assert p["targetPort"] in (name, named[name])
    for ds in find("DaemonSet"):   # workers dial the Service's gRPC port
        assert flags(container(ds)["args"])["--scheduler"] == f"gavel-ng-scheduler:{ports['grpc']['port']}"


@pytest.mark.parametrize("kind", ["Deployment", "DaemonSet"])
def test_token_secret_is_mounted_as_the_token_file(kind):
    secret_names = {s["metadata"]["name"]: set(s["data"]) for s in find("Secret")}
    for w in find(kind):
        c, spec = container(w), w["spec"]["template"]["spec"]
        path = flags(c["args"])["--token-file"]
        mounts = [m for m in c["volumeMounts"] if m["mountPath"] == posixpath.dirname(path)]
        assert len(mounts) == 1 and mounts[0].get("readOnly"), path
        (volume,) = [v for v in spec["volumes"] if v["name"] == mounts[0]["name"]]
        secret = volume["secret"]
        assert secret["secretName"] in secret_names
        key = posixpath.basename(path)
        stored = secret_names[secret["secretName"]]
        keys = {i["path"]: i["key"] for i in secret.get("items", [])} or {k: k for k in stored}
        assert key in keys
        # readable by the pod's user: owner root, group fsGroup
        assert secret.get("defaultMode", 0o644) & 0o040 and spec["securityContext"]["fsGroup"]


def test_cluster_config_loads_and_names_every_worker_type(tmp_path):
    from gavel_ng.runtime.config import ClusterConfig

    d = one("Deployment", "gavel-ng-scheduler")
    c, spec = container(d), d["spec"]["template"]["spec"]
    path = flags(c["args"])["--cluster-config"]
    (mount,) = [m for m in c["volumeMounts"] if m["mountPath"] == posixpath.dirname(path)]
    (volume,) = [v for v in spec["volumes"] if v["name"] == mount["name"]]
    cm = one("ConfigMap", volume["configMap"]["name"])
    (tmp_path / "cluster.json").write_text(cm["data"][posixpath.basename(path)])
    config = ClusterConfig.load(tmp_path / "cluster.json")
    config.check()
    types = {flags(container(ds)["args"])["--gpu-type"] for ds in find("DaemonSet")}
    assert types == set(config.worker_types)

    # checkpoints on the ReadWriteMany claim, mounted at the same path by the scheduler and every worker
    for w in workloads():
        wc, wspec = container(w), w["spec"]["template"]["spec"]
        mounts = [m for m in wc["volumeMounts"] if (config.checkpoint_root + "/").startswith(m["mountPath"] + "/")]
        assert len(mounts) == 1, w["metadata"]["name"]
        (volume,) = [v for v in wspec["volumes"] if v["name"] == mounts[0]["name"]]
        claim = one("PersistentVolumeClaim", volume["persistentVolumeClaim"]["claimName"])
        assert claim["spec"]["accessModes"] == ["ReadWriteMany"]
    state = flags(c["args"])["--state"]
    (mount,) = [m for m in c["volumeMounts"] if m["mountPath"] == state]
    (volume,) = [v for v in spec["volumes"] if v["name"] == mount["name"]]
    assert one("PersistentVolumeClaim", volume["persistentVolumeClaim"]["claimName"])


def test_each_worker_daemonset_is_one_gpu_product_and_offers_what_it_requests():
    products = set()
    for ds in find("DaemonSet"):
        c, spec = container(ds), ds["spec"]["template"]["spec"]
        selector = spec["nodeSelector"]
        product = selector[GPU_PRODUCT_LABEL]
        assert product not in products
        products.add(product)
        env = {e["name"]: e for e in c["env"]}
        assert env["GAVEL_NG_GPU_PRODUCT"]["value"] == product
        f = {k: expand(v, c) for k, v in flags(c["args"]).items()}
        gpus = int(f["--gpus"])
        assert int(c["resources"]["limits"]["nvidia.com/gpu"]) == gpus == int(selector[GPU_COUNT_LABEL])
        assert f["--advertise"] == "$(POD_IP)"
        assert env["POD_IP"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
        labels = ds["spec"]["template"]["metadata"]["labels"]
        assert ds["spec"]["selector"]["matchLabels"].items() <= labels.items()


def test_no_two_daemonsets_select_the_same_pods():
    selectors = [frozenset(ds["spec"]["selector"]["matchLabels"].items()) for ds in find("DaemonSet")]
    for i, a in enumerate(selectors):
        for b in selectors[i + 1:]:
            assert not (a <= b or b <= a)


def dockerfile() -> str:
    return (ROOT / "Dockerfile").read_text()


def test_image_runs_gavel_ng_as_the_user_the_pods_expect():
    text = dockerfile()
    assert re.search(r'^ENTRYPOINT \["gavel-ng"\]$', text, re.M)
    (user,) = re.findall(r"^USER (\d+)(?::(\d+))?$", text, re.M)
    for w in workloads():
        ctx = w["spec"]["template"]["spec"]["securityContext"]
        assert ctx["runAsNonRoot"] and str(ctx["runAsUser"]) == user[0]
    exposed = {int(p) for line in re.findall(r"^EXPOSE (.+)$", text, re.M) for p in line.split()}
    ports = {p["containerPort"] for w in workloads() for p in container(w)["ports"]}
    assert ports <= exposed


def test_image_pins_the_torch_of_pyproject():
    worker = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["worker"]
    (pin,) = [d for d in worker if d.startswith("torch")]
    assert re.search(rf"^ARG TORCH_VERSION={re.escape(pin.split('==')[1])}$", dockerfile(), re.M)
    assert "ARG TORCH_INDEX=https://download.pytorch.org/whl/cpu" in dockerfile()


def test_dockerignore_keeps_what_the_image_copies():
    lines = (ROOT / ".dockerignore").read_text().splitlines()
    ignore = [line.strip() for line in lines if line.strip() and not line.startswith("#")]
    copied = {p for line in re.findall(r"^COPY (.+) \S+$", dockerfile(), re.M) for p in line.split()}
    assert ignore[0] == "*"
    assert copied <= {p.lstrip("!") for p in ignore if p.startswith("!")}
