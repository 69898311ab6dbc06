#!/usr/bin/env python3
"""One source of truth: the Helm chart and the kustomize files make the same objects.

Renders, and compares object by object (parsed, so key order and YAML style do not count):

    helm template placement deploy/chart/placement --namespace placement-system
        against  kubectl kustomize deploy/base
    the same with --set tls.enabled=true
        against  kubectl kustomize deploy/overlays/tls

ConfigMap entries named *.yaml (the policy and experiments files) are compared as parsed YAML:
the chart renders them from values, the base from commented files. Volumes and volumeMounts are
compared as the maps they are to the API server (by name, by mountPath): a kustomize patch puts
its entries first. Annotations helm.sh/* are instructions to helm (the Namespace's
resource-policy: keep), not part of the object, and are dropped. Everything else must be equal,
in order, labels and the binder-config-<hash> name included. Any difference fails the run and is
printed as the object, the field path and both values.

    python3 scripts/chart-check.py          # helm from .tools/bin or PATH, kubectl from PATH
"""

import json
import os
import re
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHART = "deploy/chart/placement"
NAMESPACE = "placement-system"

try:
    import yaml
except ImportError:
    # PyYAML from the tools venv (scripts/install-tools.sh puts it there when the system Python
    # lacks it).
    venv_python = os.path.join(ROOT, ".tools", "venv", "bin", "python")
    if os.path.exists(venv_python) and os.path.realpath(sys.executable) != os.path.realpath(venv_python):
        os.execv(venv_python, [venv_python] + sys.argv)
    sys.exit("chart-check: needs PyYAML (python3 -c 'import yaml'); scripts/install-tools.sh installs it into .tools/venv")


def tool(name):
    local = os.path.join(ROOT, ".tools", "bin", name)
    if os.access(local, os.X_OK):
        return local
    found = shutil.which(name)
    if not found:
        sys.exit(f"chart-check: no {name} (scripts/install-tools.sh installs helm into .tools/bin)")
    return found


def run(argv):
    proc = subprocess.run(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        sys.exit(f"chart-check: {' '.join(argv)} failed (exit {proc.returncode}):\n{proc.stderr}")
    return proc.stdout


def objects(text, source):
    """The rendered objects by (apiVersion, kind, namespace, name)."""
    out = {}
    for doc in yaml.safe_load_all(text):
        if not doc:
            continue
        meta = doc.get("metadata", {})
        name = meta.get("name")
        # The hashed ConfigMap is paired by its name without the hash, so a difference in its data
        # shows as the data's (and the name's) difference.
        if doc.get("kind") == "ConfigMap" and re.fullmatch(r"binder-config-[a-z0-9]{10}", name or ""):
            name = "binder-config-<hash>"
        key = (doc.get("apiVersion"), doc.get("kind"), meta.get("namespace", ""), name)
        if key in out:
            sys.exit(f"chart-check: {source} renders {key_text(key)} twice")
        out[key] = normalize(doc)
    return out


# Lists the API server merges by a key (listType=map): their order carries no meaning.
MAP_LISTS = {"volumes": "name", "volumeMounts": "mountPath"}


def normalize(obj):
    """Embedded YAML files of ConfigMaps parsed, so comments and style do not count; map-lists
    sorted by their key; helm's own annotations dropped."""
    meta = obj.get("metadata") or {}
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if not k.startswith("helm.sh/")}
    meta = {k: v for k, v in meta.items() if k != "annotations"}
    if annotations:
        meta["annotations"] = annotations
    obj = dict(obj, metadata=meta)
    if isinstance(obj, dict) and obj.get("kind") == "ConfigMap":
        data = dict(obj.get("data") or {})
        for name, text in data.items():
            if name.endswith((".yaml", ".yml")):
                data[name] = {"<parsed YAML>": yaml.safe_load(text)}
        obj = dict(obj, data=data)
    return sort_map_lists(obj)


def sort_map_lists(v):
    if isinstance(v, dict):
        out = {}
        for k, x in v.items():
            x = sort_map_lists(x)
            if k in MAP_LISTS and isinstance(x, list) and all(isinstance(e, dict) for e in x):
                x = sorted(x, key=lambda e: str(e.get(MAP_LISTS[k])))
            out[k] = x
        return out
    if isinstance(v, list):
        return [sort_map_lists(x) for x in v]
    return v


def key_text(key):
    api, kind, ns, name = key
    return f"{kind} {ns + '/' if ns else ''}{name} ({api})"


def differences(path, a, b, out):
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b), key=str):
            p = f"{path}.{k}" if path else str(k)
            if k not in a:
                out.append(f"{p}: only in the chart: {short(b[k])}")
            elif k not in b:
                out.append(f"{p}: missing from the chart (kustomize: {short(a[k])})")
            else:
                differences(p, a[k], b[k], out)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            differences(f"{path}[{i}]", x, y, out)
    elif a != b or type(a) is not type(b):
        out.append(f"{path}: kustomize {short(a)}, chart {short(b)}")


def short(v):
    text = json.dumps(v, sort_keys=True)
    return text if len(text) <= 200 else text[:200] + "..."


def compare(label, kustomize_dir, helm_args):
    helm, kubectl = tool("helm"), tool("kubectl")
    base = objects(run([kubectl, "kustomize", kustomize_dir]), kustomize_dir)
    chart = objects(run([helm, "template", "placement", CHART, "--namespace", NAMESPACE] + helm_args), CHART)
    problems = []
    for key in sorted(set(base) | set(chart), key=str):
        if key not in chart:
            problems.append(f"{key_text(key)}: made by {kustomize_dir}, not by the chart")
        elif key not in base:
            problems.append(f"{key_text(key)}: made by the chart, not by {kustomize_dir}")
        else:
            diffs = []
            differences("", base[key], chart[key], diffs)
            problems += [f"{key_text(key)}: {d}" for d in diffs]
    what = f"helm template {CHART} {' '.join(helm_args)}".rstrip() + f" vs kubectl kustomize {kustomize_dir}"
    if problems:
        print(f"chart-check: {label}: {what}: {len(problems)} difference(s):")
        for p in problems:
            print("  " + p)
        return False
    print(f"chart-check: {label}: {what}: the same {len(base)} objects")
    return True


def main():
    ok = compare("default values", "deploy/base", [])
    ok = compare("TLS", "deploy/overlays/tls", ["--set", "tls.enabled=true"]) and ok
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
