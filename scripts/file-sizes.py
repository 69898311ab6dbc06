#!/usr/bin/env python3
"""No Rust source file of the workspace over 1,000 lines (every line of the file counted).

Walks the `*.rs` files git knows (tracked or not ignored) and fails naming every one over the limit,
test files left out: `*_tests.rs` and `tests.rs` (a module's tests in a file of their own), and
every file under a `tests` directory (integration tests, and the placement-tests crate in tests/).
"""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIMIT = 1000


def is_test(rel):
    parts = rel.split("/")
    name = parts[-1]
    return name.endswith("_tests.rs") or name == "tests.rs" or "tests" in parts[:-1]


def files():
    out = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "--", "*.rs"],
        cwd=ROOT, check=True, capture_output=True, text=True,
    ).stdout
    return sorted(f for f in out.splitlines() if os.path.isfile(os.path.join(ROOT, f)))


def main():
    over = []
    for rel in files():
        if is_test(rel):
            continue
        with open(os.path.join(ROOT, rel), encoding="utf-8") as fh:
            n = sum(1 for _ in fh)
        if n > LIMIT:
            over.append((rel, n))
    for rel, n in over:
        print(f"over {LIMIT} lines: {rel}: {n} lines")
    if over:
        return 1
    print(f"no source file over {LIMIT} lines (test files left out)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
