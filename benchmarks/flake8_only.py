"""Run flake8 with some installed plugin distributions unloaded.

``flake8_only.py --without tfpar-lint,TorchFix -- <flake8 args>``: flake8 runs
every installed plugin whatever ``--select`` says, so to time "flake8 +
flake8-bugbear" in an environment that also has the tfpar-lint and TorchFix
flake8 plugins, those are dropped from plugin discovery first.
"""
from __future__ import annotations

import sys


def main(argv: list[str]) -> int:
    without: set[str] = set()
    if argv[:1] == ["--without"]:
        without = {w.strip().lower().replace("_", "-") for w in argv[1].split(",") if w.strip()}
        argv = argv[2:]
    if argv[:1] == ["--"]:
        argv = argv[1:]
    from flake8.plugins import finder

    orig = finder.find_plugins

    def find_plugins(cfg, opts):
        return [p for p in orig(cfg, opts) if p.package.lower().replace("_", "-") not in without]

    finder.find_plugins = find_plugins
    from flake8.main.cli import main as flake8_main

    return flake8_main(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
