#!/usr/bin/env python3
"""Builds the README the way a new user meets it: new crates whose Cargo.toml holds the README's
`[dependencies]` blocks, with every rust block of the README as one of their binaries.

Usage: python3 .ci/readme_crate.py [DIR]   (default target/readme-crate)

The first toml block with `[dependencies]` (the quick start's) is every example's base. A later
one adds to it, or replaces an entry of it, for the rust blocks after it up to the next `## `
heading: what a section tells its reader to add. Each set of dependencies is a crate of its
own. A block with a `fn main` is a program as it stands; any other block becomes the body of one, as
rustdoc does. Lines hidden from the rendered README the rustdoc way
(`# ...`) are compiled too. The workspace's crates stand in for the published ones
(`[patch.crates-io]`), so the crates build what this commit would publish; everything else
resolves afresh from the registry, as it would for the user.
"""

import os
import re
import subprocess
import sys
import tomllib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```", re.S | re.M)


HEADING = re.compile(r"^## ", re.M)


def blocks(readme):
    for match in FENCE.finditer(readme):
        info = [word.strip() for word in match.group(1).split(",")]
        yield info, match.group(2), readme.count("\n", 0, match.start()) + 1


def sections(readme):
    """The line numbers where each `## ` section starts."""
    return [readme.count("\n", 0, m.start()) + 1 for m in HEADING.finditer(readme)]


def value(v):
    """A dependency's TOML value, from what tomllib read."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, list):
        return "[" + ", ".join(value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {value(x)}" for k, x in v.items()) + " }"
    sys.exit(f"README.md: unexpected dependency value {v!r}")


def examples(readme):
    """Each rust block with the dependencies it is to build with."""
    starts = sections(readme)
    section = lambda line: sum(1 for start in starts if start <= line)
    base, extra = None, (None, {})
    for info, body, line in blocks(readme):
        if info[0] == "toml" and "[dependencies]" in body:
            deps = tomllib.loads(body)["dependencies"]
            if base is None:
                base = deps
            else:
                extra = (section(line), deps)
        elif info[0] == "rust" and "ignore" not in info:
            if base is None:
                sys.exit(f"README.md:{line}: a rust block before the [dependencies] block")
            deps = dict(base)
            if extra[0] == section(line):
                deps.update(extra[1])
            yield line, body, deps


def unhide(body):
    lines = []
    for line in body.splitlines():
        stripped = line.lstrip()
        if stripped == "#" or stripped.startswith("# "):
            line = line[: len(line) - len(stripped)] + stripped[2:]
        lines.append(line)
    return "\n".join(lines) + "\n"


def write_crate(out, deps, programs):
    bins = os.path.join(out, "src", "bin")
    os.makedirs(bins, exist_ok=True)
    for stale in os.listdir(bins):
        os.remove(os.path.join(bins, stale))
    with open(os.path.join(out, "Cargo.toml"), "w", encoding="utf-8") as f:
        f.write('[package]\nname = "readme_crate"\nversion = "0.0.0"\nedition = "2024"\npublish = false\n\n')
        f.write("[dependencies]\n")
        for name, v in deps.items():
            f.write(f"{name} = {value(v)}\n")
        f.write("\n[patch.crates-io]\n")
        for crate in ("plug_limit", "plug_limit_macros"):
            f.write(f'{crate} = {{ path = "{os.path.join(ROOT, crate)}" }}\n')
        # Not a member of the workspace above it.
        f.write("\n[workspace]\n")
    for line, body in programs:
        source = unhide(body)
        if not re.search(r"\bfn main\b", source):
            source = "#![allow(dead_code)]\nfn main() {\n" + source + "\n}\n"
        with open(os.path.join(bins, f"line_{line}.rs"), "w", encoding="utf-8") as f:
            f.write(f"// README.md, the rust block at line {line}.\n" + source)


def main():
    out = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "target", "readme-crate"))
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    crates = {}
    for line, body, deps in examples(readme):
        key = repr(sorted(deps.items()))
        crates.setdefault(key, (deps, []))[1].append((line, body))
    if not crates:
        sys.exit("README.md: no rust blocks")
    env = dict(os.environ, CARGO_TARGET_DIR=os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")))
    for index, (deps, programs) in enumerate(crates.values()):
        crate = os.path.join(out, f"crate_{index}")
        write_crate(crate, deps, programs)
        lines = ", ".join(str(line) for line, _ in programs)
        print(f"README.md: the rust blocks at lines {lines} as binaries of {crate}", flush=True)
        build = subprocess.run(["cargo", "build", "--bins", "--quiet"], cwd=crate, env=env)
        if build.returncode != 0:
            sys.exit(build.returncode)


if __name__ == "__main__":
    main()
