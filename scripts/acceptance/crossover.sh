#!/bin/sh
# Acceptance measurement of issue 20 (SPEC M10): the crossover tables of mailbox-delivery and
# root-checkpoint over every built-in storage profile, three live-heap sizes, with and without the
# engine's freeze_loaded setting (gc.freeze() after a session opens). One command, re-runnable:
#
#     sh scripts/acceptance/crossover.sh                      # 2 recipes x 5 profiles x 3 heaps x 2 = 60 settings
#     SAMPLES=3 WARMUP=0 sh scripts/acceptance/crossover.sh   # a quicker look (about half the time)
#     CLUSTER="--scheduler tcp://HOST:8786" sh scripts/acceptance/crossover.sh   # the same grid on a Dask cluster
#     CLUSTER="--cluster local" RECIPES=mailbox-delivery STORAGE=nvme HEAP=0 FREEZE=off SAMPLES=1 WARMUP=0 \
#         sh scripts/acceptance/crossover.sh                  # the smoke run of the cluster path (one setting)
#
# On a cluster (issue 32) every setting is one task: all its samples and its idle control run on one
# worker, at most one setting per host at a time, and the host is recorded in each document
# ("placement"); with N hosts the grid takes about 1/N of the time. An embedded LocalCluster measures
# one setting at a time on this machine, like the default.
#
# Bounded in time: every setting is one `perfsuite run` of the recipe (6 samples per mode alternated,
# 1 warm-up, 6 idle-control windows, process isolation, no allocation pass); on 2 cores a setting
# takes about 0.5-1 min (heap 1e6 and the 27 MB fixture are the slow ones): the whole script took
# 1931 s (32 min) with CLUSTER="--cluster local" on 2 cores at load average 5-7 (format 2, three modes
# per recipe); 3103 s (52 min) at load 10 with format 1 and two modes. It prints, per
# recipe, the crossover table, the plot's path and the evidence
# paragraph; documents go to $OUT/<sweep id>/ (default results/local/crossover, git-ignored).
# Storage latency is simulated from the sourced profiles in perfsuite/workloads/storage_profiles/.
set -eu
PY=${PYTHON:-python3}
OUT=${OUT:-results/local/crossover}
SAMPLES=${SAMPLES:-6}
WARMUP=${WARMUP:-1}
# grid order matters for "the first setting that misses": cheapest durable publication first
STORAGE=${STORAGE:-nvme,ebs-gp3,sata-ssd,nfs,hdd}
HEAP=${HEAP:-0,1e5,1e6}
FREEZE=${FREEZE:-both}
RECIPES=${RECIPES:-mailbox-delivery root-checkpoint}
CLUSTER=${CLUSTER:-}
mkdir -p "$OUT"
start=$(date +%s)
for recipe in $RECIPES; do
    before=$(ls "$OUT")
    # shellcheck disable=SC2086 # CLUSTER is two words (--cluster local, --scheduler ADDRESS) or none
    "$PY" -m perfsuite sweep "$recipe" --storage "$STORAGE" --heap "$HEAP" --freeze "$FREEZE" \
        --samples "$SAMPLES" --warmup "$WARMUP" --output-dir "$OUT" $CLUSTER
    for dir in $(ls "$OUT"); do
        case " $(echo $before) " in *" $dir "*) ;; *) [ -d "$OUT/$dir" ] && "$PY" -m perfsuite evidence "$OUT/$dir" ;; esac
    done
done
echo "crossover: $(( $(date +%s) - start )) s"
