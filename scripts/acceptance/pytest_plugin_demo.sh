#!/usr/bin/env bash
# Issue 18 acceptance: the README's pytest plugin example, run; then a failing comparison against that run.
#
#   scripts/acceptance/pytest_plugin_demo.sh
#
# In a temp dir: the README's example as test_perf.py, `pytest --perfsuite-dir base`; then the same file with
# the flush writing twice the bytes (a planted cost regression), compared with --perfsuite-compare base
# --perfsuite-compare-fail: the session must fail (exit 1). Uses this checkout's perfsuite (PYTHONPATH) and
# the interpreter in $PYTHON (default: python3) with pytest and the report extra installed.
set -uo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
PY=${PYTHON:-python3}
WORK=$(mktemp -d /tmp/perfsuite-pytest.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"
"$PY" - "$SRC/README.md" <<'PYEOF' > test_perf.py
import re, sys
section = open(sys.argv[1], encoding="utf-8").read().split("## pytest: measure your own code", 1)[1]
print(re.search(r"```python\n(.*?)```", section, re.S).group(1), end="")
PYEOF
export PYTHONPATH=$SRC
PLUGIN=(-p perfsuite.pytest_plugin -p no:cacheprovider)
export PYTEST_DISABLE_PLUGIN_AUTOLOAD=1  # the same with or without the entry point installed
echo "\$ cat test_perf.py"; cat test_perf.py
echo "\$ pytest --perfsuite-dir base"
"$PY" -m pytest "${PLUGIN[@]}" -q --perfsuite-dir base; echo "exit $?"
sed -i 's/"bytes_written": 4096/"bytes_written": 8192/' test_perf.py
echo "\$ sed -i 's/\"bytes_written\": 4096/\"bytes_written\": 8192/' test_perf.py   # a planted cost regression"
echo "\$ pytest --perfsuite-dir new --perfsuite-compare base --perfsuite-compare-fail"
"$PY" -m pytest "${PLUGIN[@]}" -q --perfsuite-dir new --perfsuite-compare base --perfsuite-compare-fail
echo "exit $?"
