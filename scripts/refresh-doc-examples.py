#!/usr/bin/env python3
"""Rewrite the output of every example in README.md and docs/walkthrough.md
with what the binary prints now: each `console` block line `$ handshakes …`
(or `$ cargo run --release -- …`, with `\\` continuations) that is followed
by output, as tests/docs.rs reads them. Run from the project's root after
`cargo build --release`; review the diff (`git diff README.md docs/`)
before committing — the prose around an example may need the same change.

Usage: scripts/refresh-doc-examples.py [FILE...]
"""
import subprocess
import sys

BIN = "target/release/handshakes"


def args_of(command):
    words = command.split()
    if words[:1] == ["handshakes"]:
        return words[1:]
    if words[:4] == ["cargo", "run", "--release", "--"]:
        return words[4:]
    return None


def refresh(path):
    lines = open(path, encoding="utf-8").read().split("\n")
    out, k, in_console, changed = [], 0, False, 0
    while k < len(lines):
        line = lines[k]
        if line.startswith("```"):
            in_console = line == "```console" and not in_console
            out.append(line)
            k += 1
            continue
        if not (in_console and line.startswith("$ ")):
            out.append(line)
            k += 1
            continue
        command_lines = [line]
        command = line[2:]
        k += 1
        while command.endswith("\\") and k < len(lines):
            command = command[:-1] + " " + lines[k].strip()
            command_lines.append(lines[k])
            k += 1
        out.extend(command_lines)
        shown = []
        while k < len(lines) and not lines[k].startswith("$ ") and not lines[k].startswith("```"):
            shown.append(lines[k])
            k += 1
        args = args_of(command)
        if args is None or not shown:
            out.extend(shown)
            continue
        got = subprocess.run([BIN] + args, capture_output=True, text=True, check=True).stdout
        got = got.rstrip("\n").split("\n")
        changed += got != shown
        out.extend(got)
    open(path, "w", encoding="utf-8").write("\n".join(out))
    return changed


def main():
    files = sys.argv[1:] or ["README.md", "docs/walkthrough.md"]
    for f in files:
        print(f"{f}: {refresh(f)} example(s) changed", file=sys.stderr)


if __name__ == "__main__":
    main()
