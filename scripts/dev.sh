#!/usr/bin/env bash
# One entry point for a fresh clone:  bash scripts/dev.sh demo | test | setup
#   setup : create .venv and install tfpar-lint with its verifier and test dependencies
#   demo  : setup, lint the bundled multi-file project, then verify one flagged script on 2 logical CPU devices
#   test  : setup, then run the whole test suite (pytest-xdist: a worker per CPU, 2 to 4)
set -euo pipefail
cd "$(dirname "$0")/.."

setup() {
  local py="${PYTHON:-}"
  if [ -z "$py" ]; then
    for cand in python3.11 python3.12 python3.10 python3; do
      if command -v "$cand" >/dev/null 2>&1; then py="$cand"; break; fi
    done
  fi
  [ -n "$py" ] || { echo "dev.sh: no python3 found" >&2; exit 2; }
  if [ ! -x .venv/bin/python ]; then
    echo "dev.sh: creating .venv with $py" >&2
    "$py" -m venv .venv
  fi
  # Re-install only when the dependency declaration changed.
  local stamp=.venv/.tfpar-deps-stamp
  local want
  want="$(cat pyproject.toml scripts/dev.sh | sha256sum | cut -d' ' -f1)"
  if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    echo "dev.sh: installing dependencies (TensorFlow CPU is large; first run takes a few minutes)" >&2
    .venv/bin/python -m pip install -q --disable-pip-version-check --upgrade pip
    .venv/bin/python -m pip install -q --disable-pip-version-check -e '.[verify,dev,lsp]'
    # tf_keras (Keras 2) runs on the tensorflow-cpu installed above; its metadata asks for the full
    # `tensorflow` wheel, which would install a second copy of TensorFlow, hence --no-deps.
    .venv/bin/python -m pip install -q --disable-pip-version-check --no-deps 'tf-keras>=2.16,<2.22'
    echo "$want" > "$stamp"
  else
    .venv/bin/python -m pip install -q --disable-pip-version-check --no-deps -e . >/dev/null
  fi
}

case "${1:-}" in
  setup)
    setup ;;
  demo)
    setup
    echo "== tfpar-lint check fixtures/project/bad   (a training job split over six files: every '# expect:' line is reported, and each finding needs another file to be seen)"
    rc=0; .venv/bin/tfpar-lint check fixtures/project/bad --output-format concise || rc=$?
    [ "$rc" -le 1 ] || exit "$rc"
    echo
    echo "== tfpar-lint --verify fixtures/TFP201/bad.py fixtures/TFP201/good.py   (runs both on 2 logical CPU replicas)"
    rc=0; .venv/bin/tfpar-lint --verify fixtures/TFP201/bad.py fixtures/TFP201/good.py || rc=$?
    [ "$rc" -le 1 ] || exit "$rc"
    echo
    echo "Next: lint your code with '.venv/bin/tfpar-lint src/', verify a training script with"
    echo "'.venv/bin/tfpar-lint --verify train.py -- ARGS' (-v for the full evidence), and read a rule with"
    echo "'.venv/bin/tfpar-lint rule TFP201'; 'bash scripts/dev.sh test' runs the test suite."
    ;;
  test)
    setup
    shift || true
    # One pytest-xdist worker per CPU, at least 2 and at most 4 (each verifier test runs TensorFlow
    # processes of about 1 GB); TFPAR_TEST_WORKERS, or -n N after the command, changes it; -n 0 runs
    # in one process. loadfile keeps each test module on one worker, so a module-scoped fixture that
    # runs many TensorFlow scripts runs once; tests/conftest.py hands out the slow modules first.
    cpus=$(.venv/bin/python -c 'import os; print(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 2)')
    workers=$(( cpus < 2 ? 2 : (cpus > 4 ? 4 : cpus) ))
    exec .venv/bin/python -m pytest -q -n "${TFPAR_TEST_WORKERS:-$workers}" --dist loadfile --no-loadscope-reorder "$@" ;;
  *)
    echo "usage: bash scripts/dev.sh demo|test|setup" >&2; exit 2 ;;
esac
