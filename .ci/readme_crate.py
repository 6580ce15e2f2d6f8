#!/usr/bin/env python3
"""Builds the README the way a new user meets it: a new crate whose Cargo.toml is the README's
`[dependencies]` block, with every rust block of the README as one of its binaries.

Usage: python3 .ci/readme_crate.py [DIR]   (default target/readme-crate)

A block with a `fn main` is a program as it stands; any other block is a list of items and gets
an empty `fn main` after it. Lines hidden from the rendered README the rustdoc way (`# ...`)
are compiled too. The workspace's crates stand in for the published ones (`[patch.crates-io]`),
so the crate builds what this commit would publish; everything else resolves afresh from the
registry, as it would for the user.
"""

import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```", re.S | re.M)


def blocks(readme):
    for match in FENCE.finditer(readme):
        info = [word.strip() for word in match.group(1).split(",")]
        yield info, match.group(2), readme.count("\n", 0, match.start()) + 1


def dependencies(readme):
    found = [body for info, body, _ in blocks(readme) if info[0] == "toml" and "[dependencies]" in body]
    if len(found) != 1:
        sys.exit(f"README.md: expected one toml block with [dependencies], found {len(found)}")
    return found[0]


def unhide(body):
    lines = []
    for line in body.splitlines():
        stripped = line.lstrip()
        if stripped == "#" or stripped.startswith("# "):
            line = line[: len(line) - len(stripped)] + stripped[2:]
        lines.append(line)
    return "\n".join(lines) + "\n"


def main():
    out = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "target", "readme-crate"))
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    bins = os.path.join(out, "src", "bin")
    os.makedirs(bins, exist_ok=True)
    for stale in os.listdir(bins):
        os.remove(os.path.join(bins, stale))
    with open(os.path.join(out, "Cargo.toml"), "w", encoding="utf-8") as f:
        f.write('[package]\nname = "readme_crate"\nversion = "0.0.0"\nedition = "2024"\npublish = false\n\n')
        f.write(dependencies(readme))
        f.write("\n[patch.crates-io]\n")
        for crate in ("plug_limit", "plug_limit_macros"):
            f.write(f'{crate} = {{ path = "{os.path.join(ROOT, crate)}" }}\n')
        # Not a member of the workspace above it.
        f.write("\n[workspace]\n")
    count = 0
    for info, body, line in blocks(readme):
        if info[0] != "rust" or "ignore" in info:
            continue
        source = unhide(body)
        if not re.search(r"\bfn main\b", source):
            source = "#![allow(dead_code)]\n" + source + "\nfn main() {}\n"
        with open(os.path.join(bins, f"line_{line}.rs"), "w", encoding="utf-8") as f:
            f.write(f"// README.md, the rust block at line {line}.\n" + source)
        count += 1
    if count == 0:
        sys.exit("README.md: no rust blocks")
    print(f"README.md: {count} rust blocks as binaries of {out}")
    env = dict(os.environ, CARGO_TARGET_DIR=os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")))
    build = subprocess.run(["cargo", "build", "--bins", "--quiet"], cwd=out, env=env)
    sys.exit(build.returncode)


if __name__ == "__main__":
    main()
