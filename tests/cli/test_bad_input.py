"""House rule 4: bad input to EVERY command is one line on stderr and exit 2, never a traceback.

The real ``python -m perfsuite`` runs a table of bad inputs across all commands: bad numbers (zero,
negative, NaN, words), empty strings, missing files, a directory where a file is expected, a regular
file where a directory is expected, a path under a regular file, and unwritable outputs. The tests run
as root, for whom ``chmod`` does not make a directory read-only: "unwritable" here is a regular file in
place of a directory, a path under a regular file, or (where the kernel refuses even root) ``/sys``.
Every case runs through :func:`perfsuite.cli.main` in-process (cheap); a subset with at least one case
per command and every kind of OSError also runs as the real ``python -m perfsuite``, four at a time.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from perfsuite.harness import ModeSpec, Recipe, run_recipe

#: placeholders replaced per test directory
FILE, DIR, EMPTY, GARBAGE, RESULT, MISSING = "@FILE", "@DIR", "@EMPTY", "@GARBAGE", "@RESULT", "@MISSING"
#: the workspace root itself (files of the bounded-input cases: recipes, documents, traces, a session)
WS = "@WS"
#: a dashboard of the workspace's results
SITE = ["dashboard", DIR, "-o", "site"]
#: where even root cannot create anything (sysfs): a genuinely unwritable directory
SYS = "/sys/perfsuite-cannot-write-here"

CASES: list[tuple[str, list[str]]] = [
    # run (SPEC M4, M7, M8)
    ("run-samples-0", ["run", "idle-control", "--samples", "0"]),
    ("run-samples-negative", ["run", "idle-control", "--samples", "-1"]),
    ("run-samples-word", ["run", "idle-control", "--samples", "six"]),
    ("run-samples-nan", ["run", "idle-control", "--samples", "nan"]),
    ("run-warmup-negative", ["run", "idle-control", "--warmup", "-1"]),
    ("run-isolation-bogus", ["run", "idle-control", "--isolation", "bogus"]),
    ("run-empty-recipe", ["run", ""]),
    ("run-unknown-recipe", ["run", "no-such-recipe"]),
    ("run-output-dir-empty", ["run", "idle-control", "--output-dir", ""]),
    ("run-output-dir-file", ["run", "idle-control", "--output-dir", FILE]),
    ("run-output-dir-under-file", ["run", "idle-control", "--output-dir", f"{FILE}/sub"]),
    ("run-output-dir-sysfs", ["run", "idle-control", "--samples", "1", "--output-dir", SYS]),
    ("run-work-dir-file", ["run", "idle-control", "--work-dir", FILE]),
    ("run-work-dir-sysfs", ["run", "idle-control", "--samples", "1", "--work-dir", SYS]),
    ("run-phase-dir-file", ["run", "idle-control", "--phase", "--phase-dir", FILE]),
    ("run-record-trace-dir", ["run", "idle-control", "--record-trace", DIR]),
    ("run-session-file", ["run", "idle-control", "--session", FILE]),
    ("run-resume-empty", ["run", "--resume", ""]),
    ("run-resume-missing", ["run", "--resume", MISSING]),
    ("run-resume-dir", ["run", "--resume", DIR]),
    ("run-resume-garbage", ["run", "--resume", GARBAGE]),
    # demo
    ("demo-onto-file", ["demo", FILE]),
    ("demo-under-file", ["demo", f"{FILE}/sub"]),
    ("demo-sysfs", ["demo", SYS]),
    ("demo-record-trace-dir", ["demo", "--record-trace", DIR]),
    # fixtures (SPEC M6)
    ("fixtures-no-action", ["fixtures"]),
    ("fixtures-bad-action", ["fixtures", "bogus"]),
    ("fixtures-unknown", ["fixtures", "build", "no-such-fixture"]),
    ("fixtures-path-no-name", ["fixtures", "path"]),
    ("fixtures-info-empty", ["fixtures", "info", ""]),
    ("fixtures-cache-is-file", ["@ENV:PERFSUITE_CACHE=@FILE", "fixtures", "build", "synthetic-6000"]),
    ("fixtures-cache-sysfs", [f"@ENV:PERFSUITE_CACHE={SYS}", "fixtures", "path", "synthetic-6000"]),
    ("cache-clear-not-a-cache", ["@ENV:PERFSUITE_CACHE=@FILE", "cache", "clear"]),  # nothing removed
    # crashcheck (SPEC section 7)
    ("crashcheck-jobs-0", ["crashcheck", "--jobs", "0"]),
    ("crashcheck-jobs-negative", ["crashcheck", "--jobs", "-2"]),
    ("crashcheck-max-states-0", ["crashcheck", "--max-states", "0"]),
    ("crashcheck-show-negative", ["crashcheck", "--show", "-1"]),
    ("crashcheck-kill-0", ["crashcheck", "--kill", "0"]),
    ("crashcheck-seed-word", ["crashcheck", "--seed", "x"]),
    ("crashcheck-keep-file", ["crashcheck", "--keep", FILE]),
    ("crashcheck-workload-bogus", ["crashcheck", "--workload", "bogus"]),
    ("crashcheck-corrupt-max-cases-0", ["crashcheck", "--corrupt", "--max-cases", "0"]),
    ("crashcheck-corrupt-and-kill", ["crashcheck", "--corrupt", "--kill", "3"]),
    ("crashcheck-corrupt-not-a-session", ["crashcheck", "--corrupt", "--workload", "transcript"]),
    # session repair
    ("session-no-action", ["session"]),
    ("session-repair-missing", ["session", "repair", MISSING]),
    ("session-repair-file", ["session", "repair", FILE]),
    ("session-repair-empty-dir", ["session", "repair", EMPTY]),
    ("session-repair-garbage", ["session", "repair", GARBAGE]),
    ("session-repair-generation-of-nothing", ["session", "repair", EMPTY, "--generation", "7"]),
    # report, evidence, compare, history, bars, dashboard (SPEC section 5)
    ("report-nothing", ["report"]),
    ("report-missing", ["report", MISSING]),
    ("report-empty-string", ["report", ""]),
    ("report-garbage", ["report", GARBAGE]),
    ("report-empty-dir", ["report", EMPTY]),
    ("report-phase-dir-file", ["report", RESULT, "--phase", "--phase-dir", FILE]),
    ("evidence-missing", ["evidence", MISSING]),
    ("evidence-dir", ["evidence", EMPTY]),
    ("evidence-garbage", ["evidence", GARBAGE]),
    ("evidence-alpha-nan", ["evidence", RESULT, "--alpha", "nan"]),
    ("evidence-alpha-2", ["evidence", RESULT, "--baseline", RESULT, "--alpha", "2"]),
    ("evidence-factor-0", ["evidence", RESULT, "--baseline", RESULT, "--factor", "0"]),
    ("compare-missing", ["compare", MISSING, MISSING]),
    ("compare-garbage", ["compare", GARBAGE, RESULT]),
    ("compare-factor-nan", ["compare", RESULT, RESULT, "--factor", "nan"]),
    ("compare-alpha-negative", ["compare", RESULT, RESULT, "--alpha", "-1"]),
    ("compare-pairing-missing", ["compare", DIR]),  # one argument: an A/B output directory (the pairing)
    ("compare-gate-bogus", ["compare", RESULT, RESULT, "--gate", "bogus"]),
    # ab: the cwd of these cases is not a git repository
    ("ab-samples-0", ["ab", "HEAD", "--samples", "0"]),
    ("ab-seed-word", ["ab", "HEAD", "--seed", "x"]),
    ("ab-empty-base", ["ab", ""]),
    ("ab-unknown-recipe", ["ab", "HEAD", "-r", "no-such-recipe"]),
    ("ab-factor-nan", ["ab", "HEAD", "--factor", "nan"]),
    ("ab-output-dir-file", ["ab", "HEAD", "--output-dir", FILE]),
    ("ab-not-a-repository", ["ab", "HEAD", "-r", "idle-control"]),
    ("ab-env-bogus", ["ab", "HEAD", "--env", "bogus"]),
    # bisect and init (U): the same cwd, no repository and no package
    ("bisect-not-a-repository", ["bisect", "HEAD~1", "HEAD", "-r", "idle-control"]),
    ("bisect-empty-good", ["bisect", "", "HEAD"]),
    ("bisect-samples-0", ["bisect", "HEAD~1", "HEAD", "--samples", "0"]),
    ("init-no-package", ["init"]),
    ("init-bad-package", ["init", "--package", "not-a-name"]),
    ("init-dir-file", ["init", "--dir", FILE]),
    ("history-missing", ["history", MISSING]),
    ("history-file", ["history", FILE]),
    ("history-penalty-negative", ["history", DIR, "--penalty", "-1"]),
    ("history-penalty-nan", ["history", DIR, "--penalty", "nan"]),
    ("history-min-change-negative", ["history", DIR, "--min-change", "-0.1"]),
    ("history-min-change-nan", ["history", DIR, "--min-change", "nan"]),
    ("history-metric-empty", ["history", DIR, "--metric", ""]),
    ("bars-missing", ["bars", MISSING]),
    ("bars-garbage", ["bars", GARBAGE]),
    ("dashboard-missing", ["dashboard", MISSING, "-o", "site"]),
    ("dashboard-no-output", ["dashboard", DIR]),
    ("dashboard-output-file", ["dashboard", DIR, "-o", FILE]),
    ("dashboard-output-empty", ["dashboard", DIR, "-o", ""]),
    ("dashboard-output-sysfs", ["dashboard", DIR, "-o", SYS]),
    ("dashboard-store-missing", ["dashboard", "--store", MISSING, "-o", "site"]),
    ("dashboard-commit-url-no-field", ["dashboard", DIR, "-o", "site", "--commit-url", "https://x/"]),
    ("history-store-not-sqlite", ["history", "--store", GARBAGE]),
    ("history-source-and-store", ["history", DIR, "--store", GARBAGE]),
    ("history-no-source-no-store", ["history"]),
    ("history-machine-unknown", ["history", DIR, "--machine", "no-such-box"]),
    ("compare-store-missing", ["compare", "previous", "latest", "--store", MISSING]),
    # store: the results store and the results branch
    ("store-no-action", ["store"]),
    ("store-ingest-nothing", ["store", "ingest"]),
    ("store-ingest-missing", ["store", "ingest", MISSING, "--store", "s.sqlite3"]),
    ("store-ingest-garbage", ["store", "ingest", GARBAGE, "--store", "s.sqlite3"]),
    ("store-ingest-empty-dir", ["store", "ingest", EMPTY, "--store", "s.sqlite3"]),
    ("store-ingest-store-is-file", ["store", "ingest", DIR, "--store", FILE]),
    ("store-ingest-store-under-file", ["store", "ingest", DIR, "--store", f"{FILE}/s.sqlite3"]),
    ("store-ingest-store-sysfs", ["store", "ingest", DIR, "--store", f"{SYS}/s.sqlite3"]),
    ("store-info-missing", ["store", "info", "--store", MISSING]),
    ("store-info-not-sqlite", ["store", "info", "--store", FILE]),
    ("store-push-not-a-repo", ["store", "push", DIR, "--repo", EMPTY]),
    ("store-push-branch-empty", ["store", "push", DIR, "--branch", ""]),
    ("store-pull-into-file", ["store", "pull", "--into", FILE]),
    ("store-pull-not-a-repo", ["store", "pull", "--repo", EMPTY, "--into", "h"]),
    # whatif (SPEC section 6)
    ("whatif-no-source", ["whatif"]),
    ("whatif-two-sources", ["whatif", "--storm", "--unattended"]),
    ("whatif-debounce-empty", ["whatif", "--storm", "--no-costs", "--debounce", ""]),
    ("whatif-debounce-negative", ["whatif", "--storm", "--no-costs", "--debounce", "1,-1"]),
    ("whatif-debounce-nan", ["whatif", "--storm", "--no-costs", "--debounce", "nan"]),
    ("whatif-checkpoint-0", ["whatif", "--storm", "--no-costs", "--checkpoint-interval", "0"]),
    ("whatif-notify-word", ["whatif", "--storm", "--no-costs", "--notify-max", "soon"]),
    ("whatif-speed-0", ["whatif", "--storm", "--validate", "--speed", "0"]),
    ("whatif-speed-negative", ["whatif", "--storm", "--validate", "--speed", "-1"]),
    ("whatif-speed-nan", ["whatif", "--storm", "--validate", "--speed", "nan"]),
    ("whatif-validate-seconds-0", ["whatif", "--storm", "--validate", "--validate-seconds", "0"]),
    ("whatif-validate-seconds-negative", ["whatif", "--storm", "--validate", "--validate-seconds", "-5"]),
    ("whatif-seed-negative", ["whatif", "--storm", "--seed", "-1"]),
    ("whatif-trace-missing", ["whatif", "--trace", MISSING, "--no-costs"]),
    ("whatif-trace-dir", ["whatif", "--trace", DIR, "--no-costs"]),
    ("whatif-trace-garbage", ["whatif", "--trace", GARBAGE, "--no-costs"]),
    ("whatif-costs-missing", ["whatif", "--storm", "--costs", MISSING]),
    ("whatif-costs-dir", ["whatif", "--storm", "--costs", DIR]),
    ("whatif-csv-dir", ["whatif", "--storm", "--no-costs", "--csv", DIR]),
    ("whatif-csv-under-file", ["whatif", "--storm", "--no-costs", "--csv", f"{FILE}/x.csv"]),
    ("whatif-csv-sysfs", ["whatif", "--storm", "--no-costs", "--csv", f"{SYS}.csv"]),
    ("whatif-json-empty", ["whatif", "--storm", "--no-costs", "--json", ""]),
    ("whatif-plot-under-file", ["whatif", "--storm", "--no-costs", "--plot", f"{FILE}/x.png"]),
    ("whatif-save-trace-dir", ["whatif", "--storm", "--no-costs", "--save-trace", DIR]),
    # profile (SPEC section 5)
    ("profile-no-recipe", ["profile"]),
    ("profile-bad-profiler", ["profile", "idle-control", "--profiler", "nope"]),
    ("profile-repeat-0", ["profile", "idle-control", "--profiler", "py-spy", "--repeat", "0"]),
    ("profile-rate-negative", ["profile", "idle-control", "--profiler", "py-spy", "--rate", "-250"]),
    ("profile-output-dir-file", ["profile", "idle-control", "--profiler", "py-spy", "--output-dir", FILE]),
    ("profile-work-dir-file", ["profile", "idle-control", "--profiler", "py-spy", "--work-dir", FILE]),
    ("profile-empty-recipe", ["profile", "", "--profiler", "py-spy"]),
    # run conditions and sweep (SPEC M10)
    ("run-storage-unknown", ["run", "idle-control", "--storage", "floppy"]),
    ("run-storage-file-missing", ["run", "idle-control", "--storage-file", MISSING]),
    ("run-storage-file-dir", ["run", "idle-control", "--storage-file", DIR]),
    ("run-storage-file-garbage", ["run", "idle-control", "--storage-file", GARBAGE]),
    ("run-heap-word", ["run", "idle-control", "--heap", "lots"]),
    ("run-heap-negative", ["run", "idle-control", "--heap", "-1"]),
    ("sweep-no-recipe", ["sweep"]),
    ("sweep-unknown-recipe", ["sweep", "no-such-recipe"]),
    ("sweep-samples-0", ["sweep", "idle-control", "--samples", "0"]),
    ("sweep-heap-nan", ["sweep", "idle-control", "--heap", "nan"]),
    ("sweep-storage-unknown", ["sweep", "idle-control", "--storage", "nvme,floppy"]),
    ("sweep-storage-file-missing", ["sweep", "idle-control", "--storage-file", f"mine={MISSING}"]),
    ("sweep-freeze-bogus", ["sweep", "idle-control", "--freeze", "maybe"]),
    ("sweep-output-dir-file", ["sweep", "idle-control", "--output-dir", FILE]),
    ("sweep-plot-dir", ["sweep", "--report", DIR, "--plot", DIR]),
    ("sweep-report-garbage", ["sweep", "--report", GARBAGE]),
    ("sweep-report-no-sweep", ["sweep", "--report", RESULT]),
    ("evidence-dir-without-sweep", ["evidence", EMPTY]),
    # unbounded or unchecked values (and operation parameters, U): nonsense that ran the default, answered "unexpected",
    # or grew without bound
    ("run-mode-param-typo", ["run", f"{WS}/typo.toml"]),  # windw_ms = 5: ran the default window
    ("run-mode-param-ofload", ["run", f"{WS}/ofload.toml", "--session", f"{WS}/sess"]),  # ofload = "process"
    ("run-mode-param-wrong-type", ["run", f"{WS}/param-type.toml"]),
    ("run-mode-param-out-of-range", ["run", f"{WS}/param-range.toml"]),
    ("run-mode-param-unknown-on-gc-freeze", ["run", f"{WS}/user-op.toml", "--gc-freeze"]),
    ("run-heartbeat-inf", ["run", f"{WS}/inf.toml"]),
    ("run-ack-timeout-inf", ["run", f"{WS}/ack-inf.toml"]),
    ("run-settle-huge", ["run", f"{WS}/settle-huge.toml"]),
    ("run-heartbeat-tiny", ["run", f"{WS}/heartbeat-tiny.toml"]),
    ("run-recipe-samples-huge", ["run", f"{WS}/samples-huge.toml"]),  # grew to 2.1 GB in 25 s, no output
    ("run-recipe-warmup-huge", ["run", f"{WS}/warmup-huge.toml"]),
    ("run-recipe-control-windows-huge", ["run", f"{WS}/control-huge.toml"]),
    ("run-recipe-heap-huge", ["run", f"{WS}/heap-huge.toml"]),
    ("run-recipe-seed-huge", ["run", f"{WS}/seed-huge.toml"]),
    ("run-recipe-not-utf8", ["run", f"{WS}/latin1.toml"]),
    ("run-recipe-nested-deep", ["run", f"{WS}/deep.toml"]),
    ("run-recipe-unknown-key-close", ["run", f"{WS}/sampels.toml"]),
    ("run-samples-huge", ["run", "idle-control", "--samples", "1000000000000"]),
    ("run-warmup-huge", ["run", "idle-control", "--warmup", "1000000000000"]),
    ("run-seed-huge", ["run", "idle-control", "--seed", "100000000000000000000000"]),
    ("run-resume-nan", ["run", "--resume", f"{WS}/nan.json"]),
    ("run-resume-nested-deep", ["run", "--resume", f"{WS}/deep.json"]),
    ("sweep-samples-huge", ["sweep", "idle-control", "--samples", "1000000000000"]),
    ("ab-samples-huge", ["ab", "HEAD", "--samples", "1000000000000"]),
    ("ab-looks-huge", ["ab", "HEAD", "--looks", "1000000000000"]),
    ("ab-mode-param-typo", ["ab", "HEAD", "-r", f"{WS}/typo.toml"]),  # checked before any worktree is made
    ("report-nan", ["report", f"{WS}/nan.json"]),
    ("report-nested-deep", ["report", f"{WS}/deep.json"]),
    ("report-dir-nested-deep", ["report", f"{WS}/deep-dir"]),
    ("report-not-utf8", ["report", f"{WS}/latin1.json"]),
    ("compare-nested-deep", ["compare", f"{WS}/deep.json", RESULT]),
    ("evidence-nested-deep", ["evidence", f"{WS}/deep.json"]),
    ("bars-nan", ["bars", f"{WS}/nan.json"]),
    ("store-ingest-nested-deep", ["store", "ingest", f"{WS}/deep-dir", "--store", "s.sqlite3"]),
    ("dashboard-commit-url-unknown-field", [*SITE, "--commit-url", "https://x/{commit}/{sha}"]),  # KeyError
    ("dashboard-commit-url-positional", [*SITE, "--commit-url", "https://x/{commit}/{}"]),  # IndexError
    ("dashboard-commit-url-index", [*SITE, "--commit-url", "https://x/{0}/{commit}"]),
    ("dashboard-commit-url-attribute", [*SITE, "--commit-url", "https://x/{commit}/{commit.upper}"]),  # exit 0
    ("dashboard-commit-url-unbalanced", [*SITE, "--commit-url", "https://x/{commit}/{"]),
    ("whatif-trace-size-huge", ["whatif", "--trace", f"{WS}/huge-size.jsonl", "--no-costs"]),  # MemoryError
    ("whatif-trace-time-huge", ["whatif", "--trace", f"{WS}/huge-time.jsonl", "--no-costs"]),
    ("whatif-trace-nested-deep", ["whatif", "--trace", f"{WS}/deep.jsonl", "--no-costs"]),
    ("whatif-trace-nan", ["whatif", "--trace", f"{WS}/nan.jsonl", "--no-costs"]),
    ("whatif-checkpoint-interval-tiny", ["whatif", "--trace", f"{WS}/in-flight.jsonl", "--no-costs",
                                         "--checkpoint-interval", "0.0001"]),  # a million timer ticks: hung
    ("whatif-speed-tiny", ["whatif", "--storm", "--validate", "--speed", "1e-300"]),
    ("whatif-costs-nan", ["whatif", "--storm", "--costs", f"{WS}/costs-nan.json"]),
    ("whatif-costs-nested-deep", ["whatif", "--storm", "--costs", f"{WS}/deep.json"]),
    ("whatif-costs-not-utf8", ["whatif", "--storm", "--costs", f"{WS}/latin1.json"]),
    ("session-repair-generation-negative", ["session", "repair", f"{WS}/sess", "--generation", "-1"]),
    ("session-repair-generation-20-digits", ["session", "repair", f"{WS}/sess", "--generation",
                                             "99999999999999999999"]),
    ("session-repair-generation-path", ["session", "repair", f"{WS}/sess", "--generation", "objects/../HEAD"]),
    ("session-repair-generation-empty", ["session", "repair", f"{WS}/sess", "--generation", ""]),
    ("session-repair-generation-unknown-name", ["session", "repair", f"{WS}/sess", "--generation",
                                                "manifest-00000009-e1-x.json"]),
    ("crashcheck-corrupt-target-empty", ["crashcheck", "--corrupt", "--target", ""]),
    ("crashcheck-corrupt-target-no-match", ["crashcheck", "--corrupt", "--workload", "session", "--target",
                                            "no-such-path*"]),
    ("crashcheck-target-without-corrupt", ["crashcheck", "--workload", "transcript", "--target", "sess/HEAD"]),
    ("crashcheck-kill-huge", ["crashcheck", "--kill", "1000000000000"]),
    ("crashcheck-max-states-huge", ["crashcheck", "--max-states", "1000000000000"]),
    ("crashcheck-jobs-huge", ["crashcheck", "--jobs", "1000000000000"]),
    ("profile-repeat-huge", ["profile", "idle-control", "--profiler", "py-spy", "--repeat", "1000000000000"]),
    ("profile-rate-huge", ["profile", "idle-control", "--profiler", "py-spy", "--rate", "1000000000000"]),
    ("run-storage-file-inf", ["run", "idle-control", "--storage-file", f"{WS}/storage-inf.toml"]),
    ("run-storage-file-not-utf8", ["run", "idle-control", "--storage-file", f"{WS}/latin1.toml"]),
    ("run-recipe-name-is-a-path", ["run", f"{WS}/escape.toml"]),  # wrote <output-dir>/../../escaped-*.json
    ("run-recipes-env-missing", [f"@ENV:PERFSUITE_RECIPES={WS}/no-such-dir", "run", "idle-control"]),
    ("fixtures-env-missing", [f"@ENV:PERFSUITE_FIXTURES={WS}/no-such-dir", "fixtures", "list"]),
    ("fixtures-spec-param-huge", [f"@ENV:PERFSUITE_FIXTURES={WS}/specs", "fixtures", "build", "huge"]),
    ("fixtures-spec-not-utf8", [f"@ENV:PERFSUITE_FIXTURES={WS}/specs", "fixtures", "build", "latin1"]),
    ("whatif-trace-duration-huge", ["whatif", "--trace", f"{WS}/huge-duration.jsonl", "--no-costs"]),
    ("whatif-costs-negative", ["whatif", "--storm", "--costs", f"{WS}/costs-negative.json"]),
    ("run-storage-file-percentile", ["run", "idle-control", "--storage-file", f"{WS}/storage-percentile.toml"]),
    ("run-heap-nan", ["run", "idle-control", "--heap", "nan"]),
    ("run-heap-huge", ["run", "idle-control", "--heap", "1e12"]),
    ("evidence-alpha-without-baseline", ["evidence", RESULT, "--alpha", "0.01"]),  # was silently ignored
    ("compare-factor-huge", ["compare", RESULT, RESULT, "--factor", "1e308"]),  # a gate that can never fail
    ("history-metric-unknown", ["history", DIR, "--metric", "max_gap"]),  # was "0 series", exit 0
    ("run-recipe-plan-huge", ["run", f"{WS}/plan-huge.toml"]),  # 50 modes x 5000 samples: built in memory
    ("whatif-grid-huge", ["whatif", "--storm", "--no-costs", "--debounce", ",".join(map(str, range(200))),
                          "--checkpoint-interval", ",".join(map(str, range(1, 201)))]),
    ("sweep-grid-huge", ["sweep", "idle-control", "--heap", ",".join(map(str, range(20_000)))]),
    ("profile-diff-nested-deep", ["profile", "--diff", f"{WS}/deep.json", f"{WS}/deep.json"]),
    ("profile-baseline-not-utf8", ["profile", "idle-control", "--profiler", "callgrind", "--baseline",
                                   f"{WS}/latin1.json"]),
    # watch and typing (SPEC M11, M12): checked before any program starts
    ("watch-no-program", ["watch", "--duration", "5"]),
    ("watch-window-0", ["watch", "--window", "0", "--", "app.py"]),
    ("watch-duration-nan", ["watch", "--duration", "nan", "--", "app.py"]),
    ("watch-window-too-long", ["watch", "--window", "600", "--", "python", MISSING]),
    ("watch-program-missing", ["watch", "--", "python", MISSING]),
    ("watch-program-not-python", ["watch", "--", FILE]),
    ("watch-python-c", ["watch", "--", "python", "-c", "print(1)"]),
    ("watch-output-dir-file", ["watch", "--output-dir", FILE, "--", "app.py"]),
    ("watch-output-is-dir", ["watch", "--output", DIR, "--", "app.py"]),
    ("typing-missing", ["typing", MISSING]),
    ("typing-garbage", ["typing", GARBAGE]),
    ("typing-not-typing", ["typing", RESULT]),
    ("typing-target-0", ["typing", RESULT, "--target", "0"]),
    # the command itself
    ("unknown-command", ["no-such-command"]),
    ("unknown-option", ["run", "--no-such-option"]),
]


#: what the one line of the bounded-input cases names (the value, what is allowed): a validation message, never
#: "unexpected ..." (no case of the table may print that: it is the last resort for bugs)
NAMES: dict[str, tuple[str, ...]] = {
    "run-mode-param-typo": ("windw_ms", "did you mean window_ms?"),
    "run-mode-param-ofload": ("ofload", "did you mean offload?"),
    "run-mode-param-wrong-type": ("window_ms", '"fast"'),
    "run-mode-param-out-of-range": ("window_ms", "1e+12", "at most"),
    "run-mode-param-unknown-on-gc-freeze": ("--gc-freeze", "userops:Commit", "freeze_loaded"),
    "run-heartbeat-inf": ("heartbeat_ms", "inf"),
    "run-ack-timeout-inf": ("ack_timeout_s", "inf"),
    "run-settle-huge": ("settle_ms", "1e+12", "at most"),
    "run-heartbeat-tiny": ("heartbeat_ms", "1e-300", "at least"),
    "run-recipe-samples-huge": ("samples", "1000000000000", "at most"),
    "run-recipe-warmup-huge": ("warmup", "1000000000000", "at most"),
    "run-recipe-control-windows-huge": ("control_windows", "1000000000000", "at most"),
    "run-recipe-heap-huge": ("heap", "1000000000000", "at most"),
    "run-recipe-seed-huge": ("seed", "9223372036854775807", "at most"),
    "run-recipe-not-utf8": ("latin1.toml", "UTF-8"),
    "run-recipe-nested-deep": ("deep.toml", "nested"),
    "run-recipe-unknown-key-close": ("sampels", "did you mean samples?"),
    "run-samples-huge": ("--samples", "1000000000000", "at most"),
    "run-warmup-huge": ("--warmup", "1000000000000", "at most"),
    "run-seed-huge": ("--seed", "100000000000000000000000", "at most"),
    "run-resume-nan": ("nan.json", "NaN"),
    "run-resume-nested-deep": ("deep.json", "nested"),
    "sweep-samples-huge": ("--samples", "1000000000000", "at most"),
    "ab-samples-huge": ("--samples", "1000000000000", "at most"),
    "ab-looks-huge": ("--looks", "1000000000000", "at most"),
    "ab-mode-param-typo": ("windw_ms", "did you mean window_ms?"),
    "report-nan": ("nan.json", "NaN"),
    "report-nested-deep": ("deep.json", "nested"),
    "report-dir-nested-deep": ("x.json", "nested"),
    "report-not-utf8": ("latin1.json", "UTF-8"),
    "compare-nested-deep": ("deep.json", "nested"),
    "evidence-nested-deep": ("deep.json", "nested"),
    "bars-nan": ("nan.json", "NaN"),
    "store-ingest-nested-deep": ("x.json", "nested"),
    "dashboard-commit-url-unknown-field": ("--commit-url", "field {sha} is not allowed", "{commit}"),
    "dashboard-commit-url-positional": ("--commit-url", "field {} is not allowed", "{commit}"),
    "dashboard-commit-url-index": ("--commit-url", "field {0} is not allowed", "{commit}"),
    "dashboard-commit-url-attribute": ("--commit-url", "field {commit.upper} is not allowed", "{commit}"),
    "dashboard-commit-url-unbalanced": ("--commit-url", "https://x/{commit}/{", "not a URL template"),
    "whatif-trace-size-huge": ("huge-size.jsonl:1", "size", "100000000000", "at most"),
    "whatif-trace-time-huge": ("huge-time.jsonl:1", "time", "1e+300", "at most"),
    "whatif-trace-nested-deep": ("deep.jsonl:2", "nested"),
    "whatif-trace-nan": ("nan.jsonl:2", "NaN"),
    "whatif-checkpoint-interval-tiny": ("--checkpoint-interval", "0.0001"),
    "whatif-speed-tiny": ("--speed", "1e-300", "at least"),
    "whatif-costs-nan": ("costs-nan.json", "NaN"),
    "whatif-costs-nested-deep": ("deep.json", "nested"),
    "whatif-costs-not-utf8": ("latin1.json", "UTF-8"),
    "session-repair-generation-negative": ("'-1'", "generation number", "manifest"),
    "session-repair-generation-20-digits": ("'99999999999999999999'", "generation number", "manifest"),
    "session-repair-generation-path": ("'objects/../HEAD'", "generation number", "manifest"),
    "session-repair-generation-empty": ("--generation", "''"),
    "session-repair-generation-unknown-name": ("'manifest-00000009-e1-x.json'", "generation number", "manifest"),
    "crashcheck-corrupt-target-empty": ("--target", "''"),
    "crashcheck-corrupt-target-no-match": ("no-such-path*", "sess/HEAD"),
    "crashcheck-target-without-corrupt": ("--target", "--corrupt"),
    "crashcheck-kill-huge": ("--kill", "1000000000000", "at most"),
    "crashcheck-max-states-huge": ("--max-states", "1000000000000", "at most"),
    "crashcheck-jobs-huge": ("--jobs", "1000000000000", "at most"),
    "profile-repeat-huge": ("--repeat", "1000000000000", "at most"),
    "profile-rate-huge": ("--rate", "1000000000000", "at most"),
    "run-storage-file-inf": ("storage-inf.toml", "operations.fsync.ms", "inf"),
    "run-storage-file-not-utf8": ("latin1.toml", "UTF-8"),
    "run-recipe-name-is-a-path": ("escape.toml", "name", '"../../escaped"'),
    "run-recipes-env-missing": ("$PERFSUITE_RECIPES", "no-such-dir"),
    "fixtures-env-missing": ("$PERFSUITE_FIXTURES", "no-such-dir"),
    "fixtures-spec-param-huge": ("huge.toml", "params.root_messages", "at most"),
    "fixtures-spec-not-utf8": ("latin1.toml", "UTF-8"),
    "whatif-trace-duration-huge": ("huge-duration.jsonl:1", "duration_s", "at most"),
    "whatif-costs-negative": ("costs-negative.json", "kinds.registry.duration_ms", "-1"),
    "run-storage-file-percentile": ("storage-percentile.toml", "operations.fsync.points", "[101, 1]"),
    "run-heap-nan": ("--heap", "'nan'"),
    "run-heap-huge": ("--heap", "'1e12'"),
    "sweep-heap-nan": ("--heap", "'nan'"),
    "demo-sysfs": ("/sys/perfsuite-cannot-write-here",),
    "evidence-alpha-without-baseline": ("--alpha", "--baseline"),
    "compare-factor-huge": ("--factor", "1e+308", "at most 100"),
    "history-metric-unknown": ("--metric 'max_gap'", "did you mean max_gap_ms?"),
    "profile-diff-nested-deep": ("deep.json", "nested"),
    "run-recipe-plan-huge": ("plan-huge.toml", "the plan would hold", "at most 200000"),
    "whatif-grid-huge": ("40000 settings", "at most 10000"),
    "sweep-grid-huge": ("20000 settings", "at most 10000"),
    "profile-baseline-not-utf8": ("latin1.json", "UTF-8"),
}


def _materialise(root: Path, args: list[str]) -> tuple[list[str], dict[str, str]]:
    names = {FILE: root / "a-file", DIR: root / "results", EMPTY: root / "empty", GARBAGE: root / "garbage.json",
             RESULT: root / "results" / "tiny.json", MISSING: root / "missing.json"}
    env: dict[str, str] = {}
    out = []
    for arg in args:
        for key, path in names.items():
            arg = arg.replace(key, str(path))
        arg = arg.replace(WS, str(root))
        if arg.startswith("@ENV:"):
            name, _, value = arg[5:].partition("=")
            env[name] = value
            continue
        out.append(arg)
    return out, env


#: the cases also run as the real ``python -m perfsuite`` (one or more per command, and every OSError kind)
REAL = (
    "run-samples-0", "run-output-dir-file", "run-output-dir-sysfs", "run-resume-garbage", "demo-onto-file",
    "demo-sysfs", "fixtures-cache-is-file", "crashcheck-jobs-0", "report-garbage", "evidence-alpha-nan",
    "compare-missing", "ab-not-a-repository", "bisect-not-a-repository", "init-no-package",
    "history-penalty-nan", "bars-garbage", "dashboard-output-sysfs",
    "whatif-speed-0", "store-info-not-sqlite", "store-ingest-store-sysfs", "sweep-samples-0", "run-storage-unknown",
    "whatif-validate-seconds-0", "whatif-debounce-empty", "whatif-csv-sysfs", "profile-repeat-0", "unknown-command",
    "session-repair-file", "run-mode-param-typo", "run-recipe-samples-huge", "report-nested-deep",
    "whatif-trace-size-huge", "session-repair-generation-negative", "crashcheck-corrupt-target-no-match",
    "dashboard-commit-url-positional", "watch-program-missing", "typing-not-typing", "cache-clear-not-a-cache",
)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A regular file, an empty directory, a truncated document and a directory with one valid document."""
    root = tmp_path_factory.mktemp("bad-input")
    (root / "a-file").write_text("a regular file, not a directory\n")
    (root / "empty").mkdir()
    (root / "garbage.json").write_text('{"schema": 1, "status": "comp')  # truncated mid-write
    recipe = Recipe(name="tiny", modes=(ModeSpec("a", "perfsuite.workloads.basic:idle", {"window_ms": 1}),),
                    samples=2, warmup=0, isolation="inline", control_windows=1, settle_ms=0.0)
    run_recipe(recipe, output=root / "results" / "tiny.json", work_root=root / "work")
    (root / "home").mkdir()
    _issue_27_files(root)
    return root


def _recipe(root: Path, name: str, body: str, mode: str = 'operation = "perfsuite.workloads.basic:idle"\n') -> None:
    """A one-mode recipe (inline, one sample, no warm-up: cheap, should it ever run); ``body`` lines replace
    those defaults or add keys."""
    keys = {"samples": "1", "warmup": "0", "isolation": '"inline"', "settle_ms": "0", "control_windows": "1"}
    for line in filter(None, body.splitlines()):
        key, _, value = line.partition(" = ")
        keys[key] = value
    text = "".join(f"{key} = {value}\n" for key, value in keys.items())
    (root / f"{name}.toml").write_text(text + "[modes.a]\n" + mode)


def _issue_27_files(root: Path) -> None:
    """What the bounded-input cases read: recipes with one bad value each, documents, traces, a session."""
    import json

    from perfsuite.engine import Message, Session

    idle = 'operation = "perfsuite.workloads.basic:idle"\n'
    _recipe(root, "typo", "", idle + "windw_ms = 5\n")
    _recipe(root, "ofload", 'fixture = "synthetic-6000"',
            'operation = "perfsuite.workloads.engine:checkpoint"\npath = "sync"\nofload = "process"\n')
    _recipe(root, "param-type", "", idle + 'window_ms = "fast"\n')
    _recipe(root, "param-range", "", idle + "window_ms = 1e12\n")
    (root / "userops.py").write_text(
        "from perfsuite.harness import Param\n"
        "class Commit:\n"
        "    parameters = {'records': Param(int, 1, minimum=1, maximum=100)}\n"
        "    def __init__(self, ctx):\n        pass\n"
        "    def submit(self, ack):\n        ack(None)\n")
    _recipe(root, "user-op", "", 'operation = "userops:Commit"\n')
    for name, body in (("inf", "heartbeat_ms = inf"), ("ack-inf", "ack_timeout_s = inf"),
                       ("settle-huge", "settle_ms = 1e12"), ("heartbeat-tiny", "heartbeat_ms = 1e-300"),
                       ("samples-huge", "samples = 1000000000000"), ("warmup-huge", "warmup = 1000000000000"),
                       ("control-huge", "control_windows = 1000000000000"), ("heap-huge", "heap = 1000000000000"),
                       ("seed-huge", "seed = 9223372036854775807")):
        _recipe(root, name, body, idle)
    _recipe(root, "sampels", "sampels = 3", idle)
    (root / "latin1.toml").write_bytes('name = "caf\u00e9"\n[modes.a]\noperation = "x:y"\n'.encode("latin-1"))
    (root / "deep.toml").write_text("a = " + "[" * 200_000 + "]" * 200_000 + "\n")
    document = json.loads((root / "results" / "tiny.json").read_text())
    document["modes"]["a"]["samples"][0]["max_gap_ms"] = float("nan")
    (root / "nan.json").write_text(json.dumps(document))  # NaN: what json.dumps writes by default
    deep = "[" * 200_000 + "]" * 200_000
    (root / "deep.json").write_text(deep)
    (root / "deep-dir").mkdir()
    (root / "deep-dir" / "x.json").write_text(deep)
    (root / "latin1.json").write_bytes('{"schema": 1, "caf\u00e9": 1}'.encode("latin-1"))
    event = {"time": 0.5, "session": "s", "conversation": "root", "kind": "message", "size": 10}
    (root / "huge-size.jsonl").write_text(json.dumps({**event, "size": 100_000_000_000}) + "\n")
    (root / "huge-time.jsonl").write_text(json.dumps({**event, "time": 1e300}) + "\n")
    (root / "deep.jsonl").write_text(json.dumps(event) + "\n" + deep + "\n")
    (root / "nan.jsonl").write_text(json.dumps(event) + "\n" + json.dumps({**event, "size": float("nan")}) + "\n")
    (root / "in-flight.jsonl").write_text("".join(json.dumps({**event, **e}) + "\n" for e in (
        {"time": 0.0, "kind": "request-start", "size": 0}, {"time": 0.5}, {"time": 100.0, "kind": "request-end"})))

    (root / "storage-inf.toml").write_text('name = "mine"\nsource = "a guess"\n[operations.fsync]\nkind = "fixed"\n'
                                           'ms = inf\nsource = "a guess"\n')
    _recipe(root, "escape", 'name = "../../escaped"', idle)
    _recipe(root, "plan-huge", "samples = 5000", idle + "".join(f"[modes.m{i}]\n{idle}" for i in range(49)))
    (root / "specs").mkdir()
    (root / "specs" / "huge.toml").write_text('generator = "synthetic-session"\nseed = 1\n[params]\n'
                                              "root_messages = 1000000000000\n")
    (root / "specs" / "latin1.toml").write_bytes('description = "caf\u00e9"\n'.encode("latin-1"))
    (root / "huge-duration.jsonl").write_text(
        json.dumps({"format": "perfsuite-trace", "version": 1, "duration_s": 1e15}) + "\n" + json.dumps(event) + "\n")
    kind = {"allocated_bytes": 1, "peak_bytes": 1, "bytes_written": 1, "staged_bytes": 1, "duration_ms": 1.0}
    (root / "costs-negative.json").write_text(json.dumps({"schema": 1, "kinds": {
        "registry": {**kind, "duration_ms": -1}, "checkpoint": kind, "mail": kind}}))
    (root / "costs-nan.json").write_text(json.dumps({"schema": 1, "kinds": {  # json.dumps writes NaN
        "registry": {**kind, "duration_ms": float("nan")}, "checkpoint": kind, "mail": kind}}))
    (root / "storage-percentile.toml").write_text(
        'name = "mine"\nsource = "a guess"\n[operations.fsync]\nkind = "quantiles"\npoints = [[0, 1], [101, 1]]\n'
        'source = "a guess"\n')
    session = Session.open(root / "sess", create=True)
    for i in range(2):
        session.add_message("root", Message("user", f"t{i}", 0.0))
        session.checkpoint()
    session.close()


def _check(returncode: int, stderr: str, name: str) -> None:
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert "Traceback" not in stderr, stderr[-3000:]
    assert returncode == 2, (returncode, stderr[-3000:])
    assert len(lines) == 1, stderr[-3000:]
    assert lines[0].startswith("perfsuite: error: ") and len(lines[0]) < 1000, lines[0][:2000]
    assert not lines[0].startswith("perfsuite: error: unexpected "), lines[0]  # validation speaks, not a bug
    missing = [part for part in NAMES.get(name, ()) if part not in lines[0]]
    assert not missing, (missing, lines[0])


def test_every_named_case_is_in_the_table() -> None:
    assert set(NAMES) <= {name for name, _ in CASES}


@pytest.mark.parametrize("name", [name for name, _ in CASES])
def test_bad_input_is_one_line_and_exit_2(
    name: str, workspace: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every case through :func:`perfsuite.cli.main` in this process (cheap: no interpreter start)."""
    from perfsuite.cli import main

    args, env = _materialise(workspace, dict(CASES)[name])
    monkeypatch.setenv("PERFSUITE_CACHE", str(workspace / "cache"))
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    cwd = workspace / "cwd" / name
    cwd.mkdir(parents=True)
    monkeypatch.chdir(cwd)
    monkeypatch.setattr(sys, "path", list(sys.path))
    status = main(args)
    _check(status, capsys.readouterr().err, name)


@pytest.fixture(scope="module")
def real_outcomes(workspace: Path) -> dict[str, subprocess.CompletedProcess[str]]:
    home = workspace / "home"
    base = dict(os.environ, HOME=str(home), MPLCONFIGDIR=str(home / "mpl"), PERFSUITE_CACHE=str(workspace / "cache"))

    def run(name: str) -> tuple[str, subprocess.CompletedProcess[str]]:
        args, env = _materialise(workspace, dict(CASES)[name])
        cwd = workspace / "real" / name
        cwd.mkdir(parents=True)
        proc = subprocess.run([sys.executable, "-m", "perfsuite", *args], cwd=cwd, env={**base, **env},
                              capture_output=True, text=True, timeout=300, check=False)
        return name, proc

    with ThreadPoolExecutor(max_workers=4) as pool:
        return dict(pool.map(run, REAL))


@pytest.mark.parametrize("name", REAL)
def test_real_command_bad_input_is_one_line_and_exit_2(
    name: str, real_outcomes: dict[str, subprocess.CompletedProcess[str]]
) -> None:
    """The same, through the real ``python -m perfsuite`` (a subset: one or more per command)."""
    proc = real_outcomes[name]
    _check(proc.returncode, proc.stderr, name)


def test_the_tables_cover_every_command() -> None:
    from perfsuite.cli import build_parser

    parser = build_parser()
    commands = next(a for a in parser._actions if a.dest == "command").choices

    def command(name: str) -> str:
        return next(arg for arg in dict(CASES)[name] if not arg.startswith("@ENV:"))

    assert set(commands) <= {command(name) for name, _ in CASES}
    assert set(commands) <= {command(name) for name in REAL}  # the real entry point, every command



def test_an_unexpected_exception_is_one_line_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The last resort of house rule 4: a bug's exception is one line (PERFSUITE_DEBUG=1: the traceback)."""
    from perfsuite import cli

    def broken(name: str | None, session: str | None) -> Any:
        raise ValueError("a bug\nwith a second line")

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.delenv("PERFSUITE_DEBUG", raising=False)
    assert cli.main(["run", "idle-control", "--samples", "1"], services=cli.CliServices(resolve_fixture=broken)) == 2
    err = capsys.readouterr().err
    assert _lines(err) == ["perfsuite: error: unexpected ValueError: a bug with a second line "
                           "(PERFSUITE_DEBUG=1 shows the traceback)"]


def test_a_shutil_error_list_becomes_its_first_entry_and_a_count() -> None:
    from perfsuite.cli._common import describe_error

    entries = [(f"/src/f{i}", f"/dst/f{i}", "[Errno 28] No space left on device") for i in range(500)]
    text = describe_error(shutil.Error(entries))
    assert text == "/dst/f0: [Errno 28] No space left on device (and 499 more)"
    assert describe_error(PermissionError(13, "Permission denied", "/x/y")) == "/x/y: Permission denied"


def _lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.strip()]
