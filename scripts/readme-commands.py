#!/usr/bin/env python3
"""Runs every command README.md gives a new user, read from the README itself.

Commands are the lines of its ```sh blocks (a trailing `# comment` dropped) and the `$ ` lines of
its other blocks; its ```python blocks are programs. Each is matched to one rule below, which says
how it runs here (with small sizes where it takes them) or why it cannot, and the run fails on a
command no rule knows: a command added to the README gets a rule, so the README cannot break
unseen. Commands that need a cluster run against $E2E_KUBECONFIG (scripts/e2e-cluster.sh sets it)
and are skipped, saying so, without it.

    python3 scripts/readme-commands.py            # run them
    python3 scripts/readme-commands.py --list     # what would run, and how
    python3 scripts/readme-commands.py --only kubectl   # only the commands matching a regex
"""

import argparse
import os
import re
import shlex
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@dataclass
class Command:
    line: int
    text: str
    kind: str  # "sh" or "python"
    shown: list = field(default_factory=list)  # output lines the README shows after a `$ ` line


def readme_commands(path):
    """The README's commands, in order."""
    out = []
    lines = open(path, encoding="utf-8").read().splitlines()
    i = 0
    while i < len(lines):
        fence = re.match(r"^```(\w*)\s*$", lines[i])
        if not fence:
            i += 1
            continue
        lang, start = fence.group(1), i + 1
        j = start
        while j < len(lines) and not lines[j].startswith("```"):
            j += 1
        body = lines[start:j]
        if lang == "sh":
            for k, raw in enumerate(body):
                text = re.sub(r"\s+#\s.*$", "", raw).strip()
                if text and not text.startswith("#"):
                    out.append(Command(start + k + 1, text, "sh"))
        elif lang == "python":
            out.append(Command(start + 1, "\n".join(body), "python"))
        elif lang in ("", "console", "text"):
            current = None
            for k, raw in enumerate(body):
                if raw.startswith("$ "):
                    current = Command(start + k + 1, raw[2:].strip(), "sh")
                    out.append(current)
                elif current is not None:
                    current.shown.append(raw)
        i = j + 1
    return out


# --- rules: (pattern, how) -----------------------------------------------------------------------
# `how` gets (command, context) and returns (argv or None, note). None: not run, the note says why.

SMALL_SIMULATION = ["--nodes", "300", "--pods", "1000"]


def cluster():
    return os.environ.get("E2E_KUBECONFIG", "")


def run_test_sh(cmd, ctx):
    return None, "the test command itself: this run is it"


def run_simulate(cmd, ctx):
    argv = shlex.split(cmd.text)
    if not any(a.startswith("--nodes") or a.startswith("--pods") for a in argv):
        argv += SMALL_SIMULATION
    return ["bash", "-c", shlex.join(argv)], "small sizes: " + " ".join(SMALL_SIMULATION)


def run_in_home(cmd, ctx):
    # `~` is a temporary HOME so nothing of the user's is written; its ~/.local/bin goes on PATH
    # for the commands after it (kubectl finds its plugins there).
    os.makedirs(os.path.join(ctx["home"], ".local", "bin"), exist_ok=True)
    return ["bash", "-c", cmd.text], "HOME=" + ctx["home"]


def run_kubectl_apply(cmd, ctx):
    if not cluster():
        return None, "needs a cluster: E2E_KUBECONFIG is not set"
    # As written (a server-side dry run cannot create the namespace the other objects need), then
    # deleted again: the test cluster is left as it was.
    path = cmd.text.split()[-1]
    script = f"set -e; trap 'kubectl delete -k {path} --ignore-not-found --wait=false >/dev/null' EXIT; {cmd.text}"
    return ["bash", "-c", script], "on $E2E_KUBECONFIG, deleted afterwards"


def run_helm_install(cmd, ctx):
    # helm from .tools/bin (scripts/install-tools.sh builds it). With a cluster: the install as a
    # server-side dry run (helm validates every object against the API server, installs nothing);
    # without one: rendered and checked against the chart's schema, client-side.
    helm = os.path.join(ROOT, ".tools", "bin", "helm")
    if not os.access(helm, os.X_OK):
        return None, "needs helm in .tools/bin (scripts/install-tools.sh)"
    argv = shlex.split(cmd.text)
    argv[0] = helm
    if cluster():
        return argv + ["--dry-run=server"], "helm install --dry-run=server on $E2E_KUBECONFIG"
    return argv + ["--dry-run=client"], "helm install --dry-run=client: rendered, no cluster"


def run_explain(cmd, ctx):
    if not cluster():
        return None, "needs a cluster: E2E_KUBECONFIG is not set"
    script = (
        "set -e; trap 'bash scripts/explain-demo.sh down >/dev/null 2>&1' EXIT; "
        "bash scripts/explain-demo.sh down >/dev/null 2>&1 || true; "
        "bash scripts/explain-demo.sh up >/dev/null; " + cmd.text
    )
    return ["bash", "-c", script], "on scripts/explain-demo.sh's cluster (up, then down)"


def run_python(cmd, ctx):
    if not cluster():
        return None, "needs a cluster: E2E_KUBECONFIG is not set"
    python = os.path.join(ROOT, ".tools", "pyclients", "bin", "python")
    if not os.path.exists(python):
        return None, "needs the Python client's venv (.tools/pyclients, made by scripts/clients-test.sh)"
    return [python, "-c", cmd.text], "the Python client's venv, on $E2E_KUBECONFIG"


RULES = [
    (r"^(E2E_KUBECONFIG=\S+ |scripts/e2e-cluster\.sh )?scripts/test\.sh$", run_test_sh),
    (r"^cargo run (--release )?-p binder-agent -- simulate\b", run_simulate),
    (r"^cargo build .*-p binder-agent --bin kubectl-placement && cp \S+ ~/\.local/bin/?$", run_in_home),
    (r"^kubectl apply -k deploy/\S+$", run_kubectl_apply),
    (r"^helm install \S+ deploy/chart/\S+( (-n|--namespace) \S+| --create-namespace)*$", run_helm_install),
    (r"^kubectl placement explain \S+", run_explain),
]


def rule_for(cmd):
    if cmd.kind == "python":
        return run_python
    for pattern, how in RULES:
        if re.search(pattern, cmd.text):
            return how
    return None


def shown_lines_missing(cmd, output):
    """The lines the README shows after the command that the run did not print: only its first
    line (deterministic whatever else the cluster holds) is required."""
    want = [l for l in cmd.shown if l.strip()][:1]
    got = output.splitlines()
    return [l for l in want if l not in got]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--readme", default=os.path.join(ROOT, "README.md"))
    ap.add_argument("--list", action="store_true", help="say what would run and how, run nothing")
    ap.add_argument("--only", metavar="REGEX", help="run only the commands matching REGEX (the others are listed as skipped)")
    args = ap.parse_args()

    commands = readme_commands(args.readme)
    if not commands:
        sys.exit("readme-commands: no command found in " + args.readme)
    home = tempfile.mkdtemp(prefix="placement-readme-home.")
    env = dict(os.environ, HOME=home, PATH=os.path.join(home, ".local", "bin") + os.pathsep + os.environ["PATH"])
    if cluster():
        env["KUBECONFIG"] = cluster()
    # Cargo and rustup stay where they are although HOME moves.
    real_home = os.path.expanduser("~")
    env.setdefault("CARGO_HOME", os.environ.get("CARGO_HOME", os.path.join(real_home, ".cargo")))
    env.setdefault("RUSTUP_HOME", os.environ.get("RUSTUP_HOME", os.path.join(real_home, ".rustup")))
    ctx = {"home": home}

    unknown = [c for c in commands if rule_for(c) is None]
    for c in unknown:
        print(f"README.md:{c.line}: no rule runs `{c.text}`: add one to scripts/readme-commands.py")
    if unknown:
        sys.exit(1)

    ran = skipped = failed = 0
    for c in commands:
        argv, note = rule_for(c)(c, ctx)
        if args.only and not re.search(args.only, c.text):
            argv, note = None, f"not matching --only {args.only}"
        label = c.text if c.kind == "sh" else "python block"
        if argv is None:
            print(f"\n--- README.md:{c.line}: {label}\n    skipped: {note}")
            skipped += 1
            continue
        print(f"\n--- README.md:{c.line}: {label}\n    ({note})", flush=True)
        if args.list:
            continue
        proc = subprocess.run(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        tail = proc.stdout.splitlines()[-25:]
        print("\n".join("    " + l for l in tail))
        missing = shown_lines_missing(c, proc.stdout) if proc.returncode == 0 else []
        if proc.returncode != 0:
            print(f"    FAILED: exit {proc.returncode}")
            failed += 1
        elif missing:
            print("    FAILED: the README shows lines the command did not print:")
            print("\n".join("      " + l for l in missing))
            failed += 1
        else:
            ran += 1
    if args.list:
        return
    print(f"\nreadme-commands: {ran} passed, {failed} failed, {skipped} skipped")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
