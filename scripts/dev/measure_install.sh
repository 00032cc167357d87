#!/usr/bin/env bash
# Install weight (issue 18 item 1): package count and installed size of a fresh venv per install target.
#
#   scripts/dev/measure_install.sh [SOURCE_DIR] [OUT_DIR]
#
# SOURCE_DIR defaults to this checkout; to measure an older commit:
#   git -C . archive COMMIT | tar -x -C /tmp/perfsuite-old && scripts/dev/measure_install.sh /tmp/perfsuite-old
# For each target it creates a fresh venv under OUT_DIR (default: a temp dir, removed afterwards), runs
# `pip install` exactly as written in the table below, and prints the number of installed distributions
# (`pip list`, pip itself included, as a fresh venv has it) and `du -sh` of the venv and its site-packages.
# Targets: "core" (`pip install SOURCE`, a regular install, what a user gets), "make run" (the install line
# of the Makefile's run target in SOURCE, read from the Makefile so old and new commits are measured as they were)
# and, where SOURCE has it, "engine" (`pip install ./packaging/engine`: perfsuite-engine alone, issue 30).
set -euo pipefail
SRC=$(cd "${1:-$(dirname "$0")/../..}" && pwd)
OUT=${2:-}
PY=${PYTHON:-python3}
cleanup=""
if [ -z "$OUT" ]; then OUT=$(mktemp -d /tmp/perfsuite-install.XXXXXX); cleanup=$OUT; fi
trap '[ -n "$cleanup" ] && rm -rf "$cleanup"' EXIT

# The pip argument(s) of `make run`: the STAMP rule's install line (old Makefiles) or RUN_SPEC (new ones).
make_run_spec() {
    local spec
    spec=$(sed -n 's/^RUN_SPEC *:\?= *//p' "$MAKEFILE" | head -1 | tr -d "'")
    if [ -z "$spec" ]; then
        spec=$(grep -m1 -- "pip install --quiet -e" "$MAKEFILE" | sed "s/.*pip install --quiet //; s/'//g")
    fi
    echo "$spec"
}

measure() {  # name, pip args...
    local name=$1; shift
    local venv="$OUT/venv-${name// /-}"
    rm -rf "$venv"
    "$PY" -m venv "$venv"
    (cd "$SRC" && "$venv/bin/python" -m pip install --quiet "$@") >"$venv.log" 2>&1 || {
        echo "$name: pip install $* failed (see $venv.log)"; tail -5 "$venv.log"; return 1; }
    local count size site
    count=$("$venv/bin/python" -m pip list --format=freeze 2>/dev/null | wc -l)
    size=$(du -sh "$venv" | cut -f1)
    site=$(du -sh "$venv"/lib/python3*/site-packages | cut -f1)
    printf '%-9s %3d packages  venv %6s  site-packages %6s   (pip install %s)\n' "$name" "$count" "$size" "$site" "$*"
}

echo "source: $SRC ($(git -C "$SRC" rev-parse --short HEAD 2>/dev/null || echo 'not a git checkout')); $("$PY" -V)"
# install from a copy: a build writes build/ and *.egg-info beside the sources
mkdir -p "$OUT/src"
tar -C "$SRC" --exclude=./.git --exclude=./.venv --exclude=./results --exclude=./build --exclude='*.egg-info' \
    --exclude=__pycache__ -cf - . | tar -C "$OUT/src" -xf -
MAKEFILE=$SRC/Makefile
SRC=$OUT/src
"$PY" -m venv "$OUT/venv-empty"
printf '%-9s %3d packages  venv %6s   (what a fresh venv holds before any install; counted in every line)\n' \
    "empty" "$("$OUT/venv-empty/bin/python" -m pip list --format=freeze 2>/dev/null | wc -l)" "$(du -sh "$OUT/venv-empty" | cut -f1)"
measure core .
# shellcheck disable=SC2046
measure "make run" $(make_run_spec)
if [ -d "$SRC/packaging/engine" ]; then measure engine ./packaging/engine; fi
