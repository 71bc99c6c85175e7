#!/usr/bin/env bash
# The device check of apnet_pyg: on a machine with one NVIDIA GPU and
# whatever torch and PyG it has (no network), within 8 minutes, it runs
#   env          the machine, the versions, and whether a process forked
#                after the benchmarks' imports can use CUDA
#                (python -m benchmarks.cuda_fork)          -> env.txt
#   cuda-tests   python -m pytest -m cuda -q                 -> cuda-tests.txt
#   propagation  the propagation benchmark on CUDA: the WordNet noun graph,
#                random 100k nodes x degree 16 and 1M nodes x degree 10,
#                F = 256 and 64, APNetConv (paper: sparse and Triton
#                kernels; defaults; message passing), AGNNConv, GATConv
#                              -> propagation.csv, propagation.md (+ its log)
#   train-speed  python -m benchmarks train_step --device cuda
#                                                            -> train-speed.txt
#   profile      python -m benchmarks profile --device cuda  -> profile.txt
#   train-compile  python -m benchmarks compiled_training --device cuda:
#                the whole training command, eager and --compile
#                                                  -> train-compile.txt
#   suite        python -m pytest -v with the time left: one line per
#                test, so a run cut short still names its failures
#                                                            -> suite.txt
# each under its own timeout, so that one hang cannot take the others' time.
# A step that fails is recorded (env.txt ends with every step's status) and
# the next one runs; the exit status is 1 if any step failed. The benchmark
# results land in benchmarks/results/<gpu>/ in the committed format
# (README.md, propagation.csv, plots, train_step.md, profile.md); the files
# this run wrote there are also in OUTDIR/results.tar (<gpu>/...).
#
# Usage: scripts/device_check.sh [--allow-cpu] [--only STEP,...] OUTDIR
#   --allow-cpu  run on the CPU, with tiny sizes (a smoke test of this
#                script; results go to a temporary folder, not results/)
#   --only       run these steps only (env always runs)
# Environment: PYTHON (default python3), DEVICE_CHECK_BUDGET (seconds in
# all, default 480).
#
# WordNet is read through nltk. Where nltk is missing, the
# script installs .whl/nltk-*.whl if the repository holds one (carried:
# pip download --no-deps nltk -d .whl). The WordNet noun graph is read from
# .device-cache/wordnet30_noun_graph.pt if present (carried; a copy of
# ~/.cache/apnet_pyg/wordnet30_noun_graph.pt, which any run here builds);
# without it, or without nltk, the WordNet parts are skipped with the
# reason printed.
set -u

usage="usage: scripts/device_check.sh [--allow-cpu] [--only STEP,...] OUTDIR"
STEPS="env cuda-tests propagation train-speed profile train-compile suite"
allow_cpu=0
only=""
outdir=""
while [ $# -gt 0 ]; do
    case "$1" in
        --allow-cpu) allow_cpu=1 ;;
        --only)
            if [ $# -lt 2 ]; then
                echo "error: --only needs a list of steps; $usage" >&2
                exit 2
            fi
            only=$(echo "$2" | tr ',' ' ')
            shift ;;
        -h|--help) echo "$usage"; exit 0 ;;
        -*) echo "error: unknown option '$1'; $usage" >&2; exit 2 ;;
        *)
            if [ -n "$outdir" ]; then
                echo "error: one OUTDIR only (got '$outdir' and '$1');" \
                     "$usage" >&2
                exit 2
            fi
            outdir=$1 ;;
    esac
    shift
done
[ -n "$outdir" ] || { echo "error: OUTDIR missing; $usage" >&2; exit 2; }
for step in $only; do
    case " $STEPS " in
        *" $step "*) ;;
        *) echo "error: --only: unknown step '$step' (steps: $STEPS)" >&2
           exit 2 ;;
    esac
done

PYTHON=${PYTHON:-python3}
BUDGET=${DEVICE_CHECK_BUDGET:-480}
START=$(date +%s)
REPO=$(cd "$(dirname "$0")/.." && pwd)
cd "$REPO" || exit 1
export PYTHONUNBUFFERED=1
export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}"

# Refuse a machine without a GPU before anything is written.
if "$PYTHON" -c 'import sys, torch
sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    DEVICE=cuda
elif [ "$allow_cpu" = 1 ]; then
    DEVICE=cpu
else
    echo "error: torch sees no CUDA device here ($PYTHON): this script" \
         "checks a GPU machine; --allow-cpu runs it on the CPU with tiny" \
         "sizes" >&2
    exit 1
fi

if ! mkdir -p "$outdir"; then
    echo "error: cannot create OUTDIR '$outdir'" >&2
    exit 1
fi
outdir=$(cd "$outdir" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
touch "$work/start"
status_file="$work/status"
: >"$status_file"
failed=0

elapsed() { echo $(( $(date +%s) - START )); }
wanted() {
    [ -z "$only" ] || case " $only " in *" $1 "*) ;; *) return 1 ;; esac
}
record() { echo "$*" | tee -a "$status_file"; }

# cap_for SECONDS: SECONDS, or what is left of the budget once RESERVE
# seconds are kept for the whole suite at the end.
RESERVE=0
cap_for() {
    local left=$(( BUDGET - $(elapsed) - RESERVE ))
    [ "$1" -le "$left" ] && echo "$1" || echo "$left"
}

# run_step NAME CAP LOG COMMAND...: runs COMMAND with its output in LOG for
# at most CAP seconds (cap_for), interrupted first (SIGINT: pytest and the
# benchmarks report what they have), killed 10 s later.
run_step() {
    local name=$1 cap=$2 log=$3
    shift 3
    if [ "$cap" -lt 5 ]; then
        echo "not run: the budget of $BUDGET s was spent" >>"$log"
        record "$name: NOT RUN (budget spent)"
        failed=1
        return 1
    fi
    local begin rc
    begin=$(date +%s)
    timeout -s INT -k 10 "$cap" "$@" >>"$log" 2>&1
    rc=$?
    local took=$(( $(date +%s) - begin ))
    if [ "$rc" = 0 ]; then
        record "$name: ok (${took} s)"
    elif [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
        echo "TIMED OUT after $cap s" >>"$log"
        record "$name: TIMED OUT after $cap s"
        failed=1
    else
        record "$name: FAILED (exit status $rc, ${took} s;" \
               "see $(basename "$log"))"
        failed=1
    fi
    return "$rc"
}

# ---------------------------------------------------------------------------
# env: the machine, the package's dependencies, the fork check
# ---------------------------------------------------------------------------
env_log="$outdir/env.txt"
{
    echo "# device check, $(date -u '+%Y-%m-%d %H:%M UTC'), device $DEVICE"
    commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
    echo "repository: $REPO (commit $commit)"
    command -v nvidia-smi >/dev/null && nvidia-smi \
        --query-gpu=name,memory.total,driver_version --format=csv,noheader
} >"$env_log" 2>&1

if ! "$PYTHON" -c 'import nltk' 2>/dev/null; then
    wheel=$(ls .whl/nltk-*.whl 2>/dev/null | head -n 1)
    if [ -n "$wheel" ]; then
        echo "nltk missing: installing $wheel" >>"$env_log"
        timeout 60 "$PYTHON" -m pip install -q --no-index --no-deps \
            --no-compile --target "$work/site" "$wheel" >>"$env_log" 2>&1
        export PYTHONPATH="$PYTHONPATH:$work/site"
    else
        echo "nltk missing and no .whl/nltk-*.whl: apnet_pyg runs without" \
             "it, WordNet cannot be read (its tests are skipped, the" \
             "WordNet graph needs the carried cache)" >>"$env_log"
    fi
fi
if ! "$PYTHON" -c 'from apnet_pyg.graph import load_wordnet; load_wordnet()' \
        >>"$env_log" 2>&1; then
    # The tests that read WordNet are skipped, with the reason, not failed.
    echo "WordNet unavailable: APNET_PYG_SKIP_WORDNET=1" >>"$env_log"
    export APNET_PYG_SKIP_WORDNET=1
fi
if [ -f .device-cache/wordnet30_noun_graph.pt ]; then
    export APNET_PYG_CACHE="$REPO/.device-cache"
fi
WORDNET=--no-wordnet
if [ "$DEVICE" = cpu ]; then
    echo "WordNet noun graph: skipped (--allow-cpu: tiny sizes)" >>"$env_log"
elif why=$(timeout 60 "$PYTHON" -c 'from apnet_pyg.graph.wordnet import (
    wordnet_noun_graph)
wordnet_noun_graph()' 2>&1); then
    WORDNET=""
    echo "WordNet noun graph: available" >>"$env_log"
else
    echo "WordNet noun graph: skipped, it does not load here" \
         "($(echo "$why" | tail -n 1)); carry nltk and" \
         ".device-cache/wordnet30_noun_graph.pt" >>"$env_log"
fi
timeout 60 "$PYTHON" - >>"$env_log" 2>&1 <<'EOF'
from apnet_pyg.environment import describe_environment
import torch
device = 'cuda' if torch.cuda.is_available() else 'cpu'
for key, value in describe_environment(device).items():
    print(f'{key}: {value}')
EOF
# Not a failure where a forked process cannot use CUDA: the benchmarks
# then spawn their CUDA workers. It says which import breaks forking.
if [ "$DEVICE" = cuda ]; then
    echo "## python -m benchmarks.cuda_fork" >>"$env_log"
    if timeout 60 "$PYTHON" -m benchmarks.cuda_fork >>"$env_log" 2>&1; then
        record "cuda-fork: a forked process can use CUDA"
    else
        record "cuda-fork: a forked process CANNOT use CUDA (see" \
               "env.txt); the benchmarks spawn their CUDA workers"
    fi
fi
# Where the benchmarks write: the committed folder of this GPU, or, on the
# CPU (a smoke test), a temporary one.
if [ "$DEVICE" = cuda ]; then
    results=$(timeout 60 "$PYTHON" -c '
from benchmarks.common import describe_machine, machine_slug
print(machine_slug(describe_machine("cuda")))' 2>>"$env_log")
    results="benchmarks/results/${results:-unknown}"
    out_flags=()
else
    results="$work/results"
    out_flags=(--out "$results")
fi
echo "benchmark results: $results" >>"$env_log"

# ---------------------------------------------------------------------------
# The steps: the GPU's own checks first, the whole suite with the time left
# ---------------------------------------------------------------------------
# The whole suite runs last, with the time left: at least this much.
if wanted suite; then RESERVE=30; fi
if wanted cuda-tests; then
    run_step cuda-tests "$(cap_for 75)" "$outdir/cuda-tests.txt" \
        "$PYTHON" -m pytest -m cuda -q -p no:cacheprovider
fi

if wanted propagation; then
    if [ "$DEVICE" = cuda ]; then
        sizes=(--random-graphs 100000:16 1000000:10 --features 256 64
               --methods apnet_sparse apnet_triton apnet_default apnet_mp agnn gat
               --defaults-on-all-graphs --memory-cap-gb 120 --min-time 0.2
               --time-cap 5 $WORDNET)
        cap=$(cap_for 180)
    else
        sizes=(--random-graphs 200:4 --features 16 --methods agnn
               --no-wordnet --no-cora --min-runs 1 --min-time 0)
        cap=$(cap_for 60)
    fi
    log="$work/propagation.log"
    : >"$log"
    touch "$work/propagation.start"
    # --budget: the benchmark starts no pass after it and writes its files,
    # before the step's timeout would kill it (a pass's runs are capped at
    # --time-cap seconds each).
    run_step propagation "$cap" "$log" \
        "$PYTHON" -m benchmarks propagation --device "$DEVICE" "${sizes[@]}" \
        --no-refine --quiet-wait 0 \
        --budget $(( cap > 60 ? cap - 45 : cap / 2 + 1 )) \
        ${out_flags[@]+"${out_flags[@]}"}
    # This run's files only: a refused or failed run leaves the folder's
    # earlier results, which are not this machine's.
    fresh() { [ "$1" -nt "$work/propagation.start" ]; }
    fresh "$results/propagation.csv" &&
        cp "$results/propagation.csv" "$outdir/propagation.csv"
    { fresh "$results/README.md" && cat "$results/README.md"
      printf '\n## Console log\n\n```\n'; cat "$log"; printf '```\n'
    } >"$outdir/propagation.md"
fi

if wanted train-speed; then
    if [ "$DEVICE" = cuda ]; then
        sizes=(--graphs learned none --steps 100 --warmup 10)
    else
        sizes=(--quick --steps 2 --warmup 1)
    fi
    run_step train-speed "$(cap_for 50)" "$outdir/train-speed.txt" \
        "$PYTHON" -m benchmarks train_step --device "$DEVICE" "${sizes[@]}" \
        ${out_flags[@]+"${out_flags[@]}"}
fi

if wanted profile; then
    sizes=(--quick)
    if [ "$DEVICE" = cuda ]; then sizes=(--episodes 50); fi
    run_step profile "$(cap_for 50)" "$outdir/profile.txt" \
        "$PYTHON" -m benchmarks profile --device "$DEVICE" "${sizes[@]}" \
        ${out_flags[@]+"${out_flags[@]}"}
fi

if wanted train-compile; then
    sizes=(--quick --episodes 2)
    if [ "$DEVICE" = cuda ]; then sizes=(--epochs 4 --episodes 200); fi
    run_step train-compile "$(cap_for 240)" "$outdir/train-compile.txt" \
        "$PYTHON" -m benchmarks compiled_training --device "$DEVICE" \
        "${sizes[@]}" ${out_flags[@]+"${out_flags[@]}"}
fi

if wanted suite; then
    RESERVE=0
    run_step suite "$(cap_for "$BUDGET")" "$outdir/suite.txt" \
        "$PYTHON" -m pytest -v -rfE -p no:cacheprovider
fi

# The files the benchmarks wrote in this run, in their folder's layout.
if [ -d "$results" ]; then
    written=$(cd "$results/.." && find "$(basename "$results")" -type f \
        -newer "$work/start" | sort)
    [ -z "$written" ] || tar -cf "$outdir/results.tar" -C "$results/.." \
        $written
fi
{
    echo "## steps ($(elapsed) s in all, budget $BUDGET s)"
    cat "$status_file"
} >>"$env_log"
echo "device check: $(elapsed) s; results in $outdir"
exit "$failed"
