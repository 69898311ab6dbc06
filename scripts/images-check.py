#!/usr/bin/env python3
"""Checks the OCI images scripts/images.sh made, then runs them.

    python3 scripts/images-check.py [--images DIR] [--version V] [--allow-unstripped]

For each of scheduler-service and binder-agent, read straight from the OCI layout (no tool in
between): the config (os/arch, user 65532:65532, entrypoint, command, exposed ports, the
org.opencontainers.image.* labels), and the one layer's files: the binary (stripped, unless
--allow-unstripped), the libraries it loads, the CA bundle, passwd/group; no shell and nothing
else. Prints each image's size.

Then it runs them as a container runtime would: `umoci unpack` turns each image into a runtime
bundle (its config.json made from the image's config) and runc, or crun, starts it (host network,
so the test reaches it): the decision service must answer the gRPC health check as uid 65532, the
binder must run a small `simulate` to the end. Where no runtime can run a container here (not
root, no runtime, a kernel or cgroup setup it refuses), it says exactly why, and instead runs each
binary from the image's root filesystem through the image's own dynamic loader and libraries.
"""

import argparse
import gzip
import hashlib
import io
import json
import os
import pathlib
import shutil
import socket
import struct
import subprocess
import sys
import tarfile
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
LABELS = ["title", "description", "version", "revision", "created", "source", "url", "licenses"]
IMAGES = {
    "scheduler-service": {
        "cmd": ["--listen=0.0.0.0:50051", "--metrics-listen=0.0.0.0:9464"],
        "ports": {"50051/tcp", "9464/tcp"},
    },
    "binder-agent": {"cmd": ["run"], "ports": {"10251/tcp"}},
}
# Files an image may hold besides its binary and shared libraries.
FIXED = {"etc/passwd", "etc/group", "etc/ssl/certs/ca-certificates.crt"}
SHELLS = {"sh", "bash", "dash", "ash", "busybox", "zsh"}


class Failure(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Failure(msg)


def blob(layout, digest):
    algo, _, hexd = digest.partition(":")
    data = (layout / "blobs" / algo / hexd).read_bytes()
    check(hashlib.sha256(data).hexdigest() == hexd, f"{layout}: blob {digest} does not match its digest")
    return data


def elf_sections(data):
    """Section names of a 64-bit little-endian ELF file."""
    check(data[:4] == b"\x7fELF" and data[4] == 2 and data[5] == 1, "not a 64-bit little-endian ELF")
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    headers = [struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize) for i in range(shnum)]
    strtab_off, strtab_size = headers[shstrndx][4], headers[shstrndx][5]
    strtab = data[strtab_off : strtab_off + strtab_size]
    return {strtab[h[0] : strtab.index(b"\0", h[0])].decode() for h in headers}


def inspect(layout, name, version, allow_unstripped):
    spec = IMAGES[name]
    index = json.loads((layout / "index.json").read_text())
    refs = [m for m in index["manifests"] if m.get("annotations", {}).get("org.opencontainers.image.ref.name") == version]
    check(len(refs) == 1, f"{name}: {len(refs)} manifests tagged {version} in {layout}/index.json")
    manifest = json.loads(blob(layout, refs[0]["digest"]))
    config = json.loads(blob(layout, manifest["config"]["digest"]))
    arch = {"x86_64": "amd64", "aarch64": "arm64"}[os.uname().machine]
    check(config["os"] == "linux" and config["architecture"] == arch, f"{name}: platform {config['os']}/{config['architecture']}")
    c = config["config"]
    check(c.get("User") == "65532:65532", f"{name}: runs as {c.get('User')!r}, not 65532:65532")
    check(c.get("Entrypoint") == [f"/usr/local/bin/{name}"], f"{name}: entrypoint {c.get('Entrypoint')}")
    check(c.get("Cmd") == spec["cmd"], f"{name}: command {c.get('Cmd')}, expected {spec['cmd']}")
    check(set(c.get("ExposedPorts", {})) == spec["ports"], f"{name}: exposed ports {c.get('ExposedPorts')}")
    labels = c.get("Labels", {})
    for label in LABELS:
        value = labels.get(f"org.opencontainers.image.{label}", "")
        check(value, f"{name}: label org.opencontainers.image.{label} missing or empty")
    check(labels["org.opencontainers.image.version"] == version, f"{name}: version label {labels['org.opencontainers.image.version']}")
    check(labels["org.opencontainers.image.title"] == name, f"{name}: title label")

    check(len(manifest["layers"]) == 1, f"{name}: {len(manifest['layers'])} layers, expected one")
    layer = blob(layout, manifest["layers"][0]["digest"])
    files, binary = {}, None
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(layer))) as tar:
        for member in tar.getmembers():
            path = member.name.lstrip("./")
            base = path.rsplit("/", 1)[-1]
            check(base not in SHELLS, f"{name}: the image holds a shell: /{path}")
            if member.isfile():
                files[path] = member
                if path == f"usr/local/bin/{name}":
                    binary = tar.extractfile(member).read()
            elif member.issym() or member.islnk():
                check(base not in SHELLS, f"{name}: /{path} links to a shell")
    check(binary is not None, f"{name}: no /usr/local/bin/{name} in the layer")
    for path, member in files.items():
        if path == f"usr/local/bin/{name}" or path in FIXED:
            continue
        check(".so" in path.rsplit("/", 1)[-1] and (path.startswith("lib") or path.startswith("usr/lib")),
              f"{name}: unexpected file /{path} (only the binary, its libraries, {sorted(FIXED)})")
        check(member.mode & 0o4000 == 0, f"{name}: /{path} is setuid")
    check(any("libc.so" in p for p in files), f"{name}: no libc in the image")
    check(any("ld-linux" in p for p in files), f"{name}: no dynamic loader in the image")
    sections = elf_sections(binary)
    stripped = not ({".symtab", ".debug_line", ".debug_info"} & sections)
    check(stripped or allow_unstripped, f"{name}: the binary is not stripped (sections {sorted(sections & {'.symtab', '.debug_line', '.debug_info'})})")
    unpacked = sum(m.size for m in files.values())
    print(f"images-check: {name}:{version}: {len(files)} files, layer {len(layer) / 2**20:.1f} MiB compressed, "
          f"{unpacked / 2**20:.1f} MiB unpacked, binary {len(binary) / 2**20:.1f} MiB"
          f"{'' if stripped else ' (not stripped: --allow-unstripped)'}; user 65532:65532, no shell, labels set")
    return {"layer": len(layer), "unpacked": unpacked, "binary": len(binary)}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def grpcurl():
    path = os.environ.get("GRPCURL") or shutil.which("grpcurl") or str(ROOT / ".tools/bin/grpcurl")
    check(os.path.exists(path), "no grpcurl (scripts/install-tools.sh installs it; or set GRPCURL)")
    return path


def wait_serving(port, proc_alive):
    deadline = time.time() + 30
    last = ""
    while time.time() < deadline:
        r = subprocess.run([grpcurl(), "-plaintext", "-max-time", "2", f"127.0.0.1:{port}", "grpc.health.v1.Health/Check"],
                           capture_output=True, text=True)
        if r.returncode == 0 and '"SERVING"' in r.stdout:
            return
        last = (r.stdout + r.stderr).strip()
        check(proc_alive(), "the decision service exited before it answered")
        time.sleep(0.3)
    raise Failure(f"the decision service did not answer the gRPC health check as SERVING: {last}")


def runtimes():
    """The container runtimes to try, or why none can be."""
    if os.geteuid() != 0:
        return [], "not root: runc and crun need root (or a user namespace setup) to start a container"
    if not shutil.which("umoci"):
        return [], "no umoci to unpack the image into a runtime bundle"
    found = [p for p in (shutil.which("runc"), shutil.which("crun")) if p]
    return found, None if found else "neither runc nor crun is installed"


def unpack(layout, version, bundle):
    subprocess.run(["umoci", "unpack", "--image", f"{layout}:{version}", str(bundle)], check=True, capture_output=True)
    cfg_path = bundle / "config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg["process"]["terminal"] = False
    # The host's network: the test reaches the service on 127.0.0.1.
    cfg["linux"]["namespaces"] = [n for n in cfg["linux"]["namespaces"] if n["type"] != "network"]
    return cfg_path, cfg


def run_in_container(rt, layout, version, name, work):
    bundle = work / f"bundle-{name}-{os.path.basename(rt)}"
    cfg_path, cfg = unpack(layout, version, bundle)
    check(cfg["process"]["user"]["uid"] == 65532 and cfg["process"]["user"]["gid"] == 65532,
          f"{name}: the runtime bundle runs as {cfg['process']['user']}")
    check(cfg["process"]["args"][:1] == [f"/usr/local/bin/{name}"], f"{name}: bundle args {cfg['process']['args']}")
    cid = f"placement-images-check-{name}-{os.getpid()}"
    if name == "scheduler-service":
        port = free_port()
        cfg["process"]["args"] = [f"/usr/local/bin/{name}", f"--listen=127.0.0.1:{port}", f"--metrics-listen=127.0.0.1:{free_port()}"]
        cfg_path.write_text(json.dumps(cfg))
        # The detached container inherits the runtime's stdio: a file, not a pipe nobody closes.
        log = work / f"{name}-{os.path.basename(rt)}.log"
        with open(log, "w") as out:
            r = subprocess.run([rt, "run", "--detach", "--bundle", str(bundle), cid],
                               stdin=subprocess.DEVNULL, stdout=out, stderr=out)
        if r.returncode != 0:
            return f"{rt} could not start the container: {log.read_text().strip()[-500:]}"
        try:
            state = json.loads(subprocess.run([rt, "state", cid], capture_output=True, text=True, check=True).stdout)
            pid = state["pid"]
            wait_serving(port, lambda: os.path.exists(f"/proc/{pid}"))
            uid = next(l.split()[1] for l in open(f"/proc/{pid}/status") if l.startswith("Uid:"))
            check(uid == "65532", f"{name}: the container's process runs as uid {uid}")
            print(f"images-check: {name}: started by {os.path.basename(rt)} from its image, uid 65532, "
                  f"grpc.health.v1 SERVING on 127.0.0.1:{port}")
        finally:
            subprocess.run([rt, "kill", cid, "KILL"], capture_output=True)
            for _ in range(50):
                if subprocess.run([rt, "delete", "--force", cid], capture_output=True).returncode == 0:
                    break
                time.sleep(0.1)
    else:
        cfg["process"]["args"] = [f"/usr/local/bin/{name}", "simulate", "--nodes", "50", "--pods", "200"]
        cfg_path.write_text(json.dumps(cfg))
        r = subprocess.run([rt, "run", "--bundle", str(bundle), cid], capture_output=True, text=True, timeout=300)
        subprocess.run([rt, "delete", "--force", cid], capture_output=True)
        if r.returncode != 0 and "bound" not in r.stdout:
            return f"{rt} could not run the container (exit {r.returncode}): {(r.stderr or r.stdout).strip()[-500:]}"
        check(r.returncode == 0, f"{name}: simulate in the container failed (exit {r.returncode}): {r.stderr[-800:]}")
        print(f"images-check: {name}: `simulate --nodes 50 --pods 200` ran to the end in a container started by "
              f"{os.path.basename(rt)} from its image, as uid 65532")
    return None


def run_from_rootfs(layout, version, name, work):
    """Without a runtime: the image's binary through the image's own loader and libraries."""
    rootfs = work / f"rootfs-{name}"
    rootfs.mkdir()
    index = json.loads((layout / "index.json").read_text())
    ref = next(m for m in index["manifests"] if m.get("annotations", {}).get("org.opencontainers.image.ref.name") == version)
    manifest = json.loads(blob(layout, ref["digest"]))
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(blob(layout, manifest["layers"][0]["digest"])))) as tar:
        tar.extractall(rootfs, filter="tar")
    loader = next(p for p in rootfs.rglob("ld-linux*") if p.is_file())
    libdirs = sorted({str(p.parent) for p in rootfs.rglob("*.so*") if p.is_file()})
    base = [str(loader), "--inhibit-cache", "--library-path", ":".join(libdirs), str(rootfs / "usr/local/bin" / name)]
    if name == "scheduler-service":
        port = free_port()
        proc = subprocess.Popen(base + [f"--listen=127.0.0.1:{port}", f"--metrics-listen=127.0.0.1:{free_port()}"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            wait_serving(port, lambda: proc.poll() is None)
        finally:
            proc.kill()
            proc.wait()
        print(f"images-check: {name}: run from the image's root filesystem (its loader and libraries): "
              f"grpc.health.v1 SERVING")
    else:
        r = subprocess.run(base + ["simulate", "--nodes", "50", "--pods", "200"], capture_output=True, text=True, timeout=300)
        check(r.returncode == 0, f"{name}: simulate from the image's root filesystem failed: {r.stderr[-800:]}")
        print(f"images-check: {name}: `simulate --nodes 50 --pods 200` ran from the image's root filesystem")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--images", default=str(ROOT / "dist/images"))
    ap.add_argument("--version", default=None)
    ap.add_argument("--allow-unstripped", action="store_true")
    args = ap.parse_args()
    version = args.version
    if version is None:
        for line in (ROOT / "Cargo.toml").read_text().splitlines():
            if line.startswith("version = "):
                version = line.split('"')[1]
                break
    images = pathlib.Path(args.images)
    try:
        for name in IMAGES:
            inspect(images / name, name, version, args.allow_unstripped)
        found, why = runtimes()
        with tempfile.TemporaryDirectory() as tmp:
            work = pathlib.Path(tmp)
            for name in IMAGES:
                reasons = [why] if why else []
                ran = False
                for rt in found:
                    reason = run_in_container(rt, images / name, version, name, work)
                    if reason is None:
                        ran = True
                        break
                    reasons.append(reason)
                if not ran:
                    print(f"images-check: {name}: no container run here: {'; '.join(reasons)}")
                    run_from_rootfs(images / name, version, name, work)
    except Failure as e:
        sys.exit(f"images-check: FAILED: {e}")
    print("images-check: both images pass")


if __name__ == "__main__":
    main()
