#!/usr/bin/env bash
# Issue 18 acceptance: the wheel's main job from a fresh venv, printed as a CI log shows it (piped: 100 columns).
#
#   scripts/acceptance/wheel_main_job.sh [RECIPE ...]        # default: the quick set (`perfsuite run` with no recipe)
#
# Builds the wheel from a copy of this checkout (pip wheel --no-deps), installs it with its core dependencies
# only into a fresh venv under a temp dir, and runs `perfsuite run ARGS | cat` there, in an empty working
# directory (no recipes/ nor fixtures/ beside it: the wheel's own copies are used). Fixtures are built in
# $PERFSUITE_CACHE (default ~/.cache/perfsuite) on first use. The temp dir is removed afterwards.
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
PY=${PYTHON:-python3}
WORK=$(mktemp -d /tmp/perfsuite-wheel.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
mkdir "$WORK/src" "$WORK/run"
tar -C "$SRC" --exclude=./.git --exclude=./.venv --exclude=./results --exclude=./build --exclude='*.egg-info' \
    --exclude=__pycache__ --exclude=./perfsuite/_data -cf - . | tar -C "$WORK/src" -xf -
"$PY" -m venv "$WORK/venv"
"$WORK/venv/bin/python" -m pip install --quiet --upgrade pip
"$WORK/venv/bin/python" -m pip wheel --quiet --no-deps -w "$WORK/wheels" "$WORK/src"
"$WORK/venv/bin/python" -m pip install --quiet "$WORK"/wheels/perfsuite-*.whl
echo "installed: $(basename "$WORK"/wheels/perfsuite-*.whl) ($("$WORK/venv/bin/python" -m pip list --format=freeze | wc -l) packages)"
cd "$WORK/run"
unset PYTHONPATH COLUMNS
"$WORK/venv/bin/perfsuite" run "$@" | cat
