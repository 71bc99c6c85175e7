#!/usr/bin/env bash
# The device check of apnet_pyg: on a machine with one NVIDIA GPU and
# whatever torch and PyG it has (no network), within DEVICE_CHECK_BUDGET
# seconds (default 420; the first call also compiles Triton's kernels), it
# runs in priority order:
#   env          the machine, the versions, WordNet     -> env.txt
#   cuda-tests   the CUDA tier of the Triton kernels:
#                pytest -m cuda tests/nn/test_triton_propagation.py
#                                                       -> cuda-tests.txt
#   targets      issue 54's targets in one process
#                (python -m benchmarks propagation --targets): 1M nodes x
#                degree 10 at F = 64 and 256 in float32, bfloat16 and
#                float16, the kernel alone and the layer, forward and
#                forward+backward, floor fractions, peak memory, CUDA
#                graphs; the WordNet noun graph at F = 64 with the pattern
#                cached and rebuilt, against AGNNConv; the autotuned
#                configurations            -> targets.md (+ its log), and
#                results/<gpu>/targets.csv, targets.md, targets.png
#   awa2-recipe  the paper's AWA2 recipe end to end (selection and final
#                run), apnet-zsl train --compile on CUDA, on simulated
#                features; its wall clock, or the projection of an
#                interrupted run        -> awa2-recipe.txt, and
#                results/<gpu>/awa2_recipe.md, awa2_recipe.csv
#   suite        the whole test suite, pytest -v -rfE (one line per test,
#                so a run cut short still names its failures): its CPU
#                tests in parallel shards (2 threads each) on the half of
#                the cores the recipe leaves (taskset), while the recipe
#                runs, then its CUDA tier
#                                                       -> suite.txt
# and, named with --only, the older steps: propagation (the grid, in
# float32, bfloat16 and float16), train-speed, profile, train-compile.
# Each step runs under its own timeout (a share of what is left of the
# budget), so that one hang cannot take the others' time. A step that
# fails is recorded (env.txt ends with every step's status) and the next
# one runs; the exit status is 1 if any step failed. The benchmark results
# land in benchmarks/results/<gpu>/ in the committed formats; the files
# this run wrote there are also in OUTDIR/results.tar (<gpu>/...). OUTDIR
# gets at most 8 files.
#
# Usage: scripts/device_check.sh [--allow-cpu] [--only STEP,...] OUTDIR
#   --allow-cpu  run on the CPU, with tiny sizes (a smoke test of this
#                script; results go to a temporary folder, not results/)
#   --only       run these steps only (env always runs)
# Environment: PYTHON (default python3), DEVICE_CHECK_BUDGET (seconds in
# all, default 420), DEVICE_CHECK_SUITE (the suite's folder or one test
# file, default tests; the CPU smoke test names a small one).
#
# The run, from the repository root of a checkout with the WordNet graph
# cached (mkdir -p .device-cache && cp ~/.cache/apnet_pyg/
# wordnet30_noun_graph.pt .device-cache/, once) and, for the WordNet
# tests, an nltk wheel in .whl/ (pip download --no-deps nltk -d .whl; it
# travels untracked):
#   run(command="DEVICE_CHECK_BUDGET=420 scripts/device_check.sh $OUT",
#       carry=[".device-cache"], timeout_s=480)
# Expected: env ~25 s, cuda-tests <= 120 s (it compiles ~100 kernel
# variants on a fresh machine), targets <= 150 s (its --budget, cap - 40 s,
# stops starting measurements), then the recipe and the suite's CPU shards
# together on what is left but 45 s, the suite's CUDA tier in those 45 s:
# with 420 s the recipe is cut (its record projects the whole from the
# epochs it ran) and the suite may be. The recipe alone, whole (its target:
# <= 10 minutes):
#   run(command="DEVICE_CHECK_BUDGET=590 scripts/device_check.sh
#       --only awa2-recipe $OUT", timeout_s=600)
#
# WordNet is read through nltk. Where nltk is missing, the
# script installs .whl/nltk-*.whl if the repository holds one. The WordNet
# noun graph is read from .device-cache/wordnet30_noun_graph.pt if present;
# without it, or without nltk, the WordNet parts are skipped with the
# reason printed.
set -u

usage="usage: scripts/device_check.sh [--allow-cpu] [--only STEP,...] OUTDIR"
STEPS="env cuda-tests targets awa2-recipe suite propagation train-speed"
STEPS="$STEPS profile train-compile"
DEFAULT_STEPS="env cuda-tests targets awa2-recipe suite"
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
[ -n "$only" ] || only=$DEFAULT_STEPS

PYTHON=${PYTHON:-python3}
BUDGET=${DEVICE_CHECK_BUDGET:-420}
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
wanted() { case " $only " in *" $1 "*) ;; *) return 1 ;; esac; }
record() { echo "$*" | tee -a "$status_file"; }

# cap_for SECONDS: SECONDS, or what is left of the budget once RESERVE
# seconds are kept for the steps after this one.
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
    record_status "$name" "$rc" "$cap" "$(( $(date +%s) - begin ))" "$log"
    return "$rc"
}

# record_status NAME RC CAP SECONDS LOG
record_status() {
    local name=$1 rc=$2 cap=$3 took=$4 log=$5
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
}

# ---------------------------------------------------------------------------
# env: the machine, the package's dependencies, WordNet
# ---------------------------------------------------------------------------
env_log="$outdir/env.txt"
{
    echo "# device check, $(date -u '+%Y-%m-%d %H:%M UTC'), device $DEVICE"
    commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
    echo "repository: $REPO (commit $commit)"
    echo "steps: $only (budget $BUDGET s)"
    command -v nvidia-smi >/dev/null && nvidia-smi \
        --query-gpu=name,memory.total,driver_version --format=csv,noheader
} >"$env_log" 2>&1

if [ "$DEVICE" = cpu ]; then
    # A smoke test of the script: WordNet is left to the machine's setup.
    echo "WordNet: not checked (--allow-cpu)" >>"$env_log"
elif ! "$PYTHON" -c 'import nltk' 2>/dev/null; then
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
if [ "$DEVICE" = cuda ] && ! "$PYTHON" -c '
from apnet_pyg.graph import load_wordnet
load_wordnet()' >>"$env_log" 2>&1; then
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
         "($(echo "$why" | tail -n 1)); carry" \
         ".device-cache/wordnet30_noun_graph.pt" >>"$env_log"
fi
timeout 60 "$PYTHON" - >>"$env_log" 2>&1 <<'EOF'
from apnet_pyg.environment import describe_environment
import torch
device = 'cuda' if torch.cuda.is_available() else 'cpu'
for key, value in describe_environment(device).items():
    print(f'{key}: {value}')
EOF
# Whether a forked process can use CUDA: the grid's workers (propagation
# step) spawn theirs where not.
if [ "$DEVICE" = cuda ] && wanted propagation; then
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
    out_flags=(--out "$results")
else
    results="$work/results"
    out_flags=(--out "$results")
fi
mkdir -p "$results"
echo "benchmark results: $results" >>"$env_log"
CORES=$(nproc 2>/dev/null || echo 2)

# ---------------------------------------------------------------------------
# (a) the CUDA tier of the Triton kernels
# ---------------------------------------------------------------------------
# The suite runs last, with the time left: at least this much.
if wanted suite; then RESERVE=60; fi
if wanted awa2-recipe; then RESERVE=$(( RESERVE + 60 )); fi
if wanted cuda-tests; then
    if [ "$DEVICE" = cuda ]; then
        marker=(-m cuda)
    else  # A smoke test: the tests that need no device.
        marker=(-k "floor_bytes or kernel_bytes or launch_configuration")
    fi
    # A fresh machine compiles every kernel variant the tests launch.
    run_step cuda-tests "$(cap_for 120)" "$outdir/cuda-tests.txt" \
        "$PYTHON" -m pytest "${marker[@]}" -v -rfE -p no:cacheprovider \
        tests/nn/test_triton_propagation.py
fi

# ---------------------------------------------------------------------------
# (b) issue 54's targets
# ---------------------------------------------------------------------------
if wanted targets; then
    if [ "$DEVICE" = cuda ]; then
        sizes=($WORDNET)
        cap=$(cap_for 150)
    else  # Tiny, the kernels under Triton's interpreter.
        sizes=(--quick --min-runs 1 --min-time 0)
        cap=$(cap_for 120)
    fi
    log="$work/targets.log"
    : >"$log"
    touch "$work/targets.start"
    # --budget: no measurement starts after it (the files are written),
    # before the step's timeout would kill the run.
    interpret=0
    [ "$DEVICE" = cpu ] && interpret=1
    run_step targets "$cap" "$log" env TRITON_INTERPRET=$interpret \
        "$PYTHON" -m benchmarks propagation --device "$DEVICE" --targets \
        "${sizes[@]}" --budget $(( cap > 60 ? cap - 40 : cap / 2 + 1 )) \
        "${out_flags[@]}"
    fresh() { [ "$1" -nt "$work/targets.start" ]; }
    { fresh "$results/targets.md" && cat "$results/targets.md"
      printf '\n## Console log\n\n```\n'; cat "$log"; printf '```\n'
    } >"$outdir/targets.md"
fi

# ---------------------------------------------------------------------------
# (c) the paper's AWA2 recipe, and (d) the suite's CPU tests beside it
# ---------------------------------------------------------------------------
# The suite's CPU tests in SHARDS parallel pytest processes (files dealt
# by size), two threads each, on the cores the recipe does not use.
# With taskset and 8 cores or more, the recipe runs on the first half of
# the cores (its compilation uses them) and the shards on the other half,
# at the same time; else the shards run after it, on every core.
recipe_pin=()
shard_pin=()
shard_cores=""
if command -v taskset >/dev/null && [ "$CORES" -ge 8 ] && wanted suite &&
        wanted awa2-recipe; then
    half=$(( CORES / 2 ))
    shard_cores="$half-$(( CORES - 1 ))"
    recipe_pin=(taskset -c "0-$(( half - 1 ))")
    shard_pin=(taskset -c "$shard_cores")
fi
suite_log="$outdir/suite.txt"
SHARDS=0
if wanted suite; then
    # Two threads a shard, on the cores they may use.
    usable=$CORES
    [ -z "$shard_cores" ] || usable=$(( CORES / 2 ))
    SHARDS=$(( usable >= 4 ? usable / 2 : 1 ))
    "$PYTHON" - "$SHARDS" "$work" "${DEVICE_CHECK_SUITE:-tests}" <<'EOF'
import glob, os, sys
count, work, root = int(sys.argv[1]), sys.argv[2], sys.argv[3]
files = [root] if os.path.isfile(root) else glob.glob(
    os.path.join(root, '**', 'test_*.py'), recursive=True)
files.sort(key=lambda f: (-os.path.getsize(f), f))
shards, sizes = [[] for _ in range(count)], [0] * count
for name in files:
    i = sizes.index(min(sizes))
    shards[i].append(name)
    sizes[i] += os.path.getsize(name)
for i, names in enumerate(shards):
    # A shard's files folder by folder: pytest 9.1 loses a folder's
    # conftest.py fixtures for its files named after another folder's.
    names.sort(key=lambda name: (os.path.dirname(name), name))
    with open(f'{work}/shard-{i}.txt', 'w') as f:
        f.write('\n'.join(names) + '\n')
EOF
fi
start_cpu_suite() {
    # The CPU tests until the budget's end, less the CUDA tier's share.
    local reserve=5 cap i
    [ "$DEVICE" = cuda ] && reserve=45
    cap=$(( BUDGET - $(elapsed) - reserve ))
    [ "$SHARDS" -gt 0 ] && [ "$cap" -ge 20 ] || return 0
    date +%s >"$work/suite.begin"
    for i in $(seq 0 $(( SHARDS - 1 ))); do
        if [ ! -s "$work/shard-$i.txt" ] || [ -z "$(tr -d '\n' \
                <"$work/shard-$i.txt")" ]; then
            echo 0 >"$work/suite-$i.rc"  # No file dealt to it.
            : >"$work/suite-$i.txt"
            continue
        fi
        ( OMP_NUM_THREADS=2 MKL_NUM_THREADS=2 timeout -s INT -k 10 "$cap" \
              ${shard_pin[@]+"${shard_pin[@]}"} "$PYTHON" -m pytest -v \
              -rfE -p no:cacheprovider -m "not cuda" \
              --basetemp="$work/tmp-$i" $(cat "$work/shard-$i.txt") \
              >"$work/suite-$i.txt" 2>&1
          echo $? >"$work/suite-$i.rc" ) &
    done
}

if wanted suite && { ! wanted awa2-recipe || [ ${#shard_pin[@]} -gt 0 ]; }
then
    start_cpu_suite
fi

if wanted awa2-recipe; then
    recipe_log="$outdir/awa2-recipe.txt"
    RESERVE=$(wanted suite && echo 45 || echo 0)
    cap=$(cap_for 580)
    recipe_dir="$work/awa2"
    if [ "$DEVICE" = cuda ]; then
        recipe=(--device cuda --compile)
    else  # The smoke test: the fast recipe's first epoch, eager.
        recipe=(--device cpu --recipe fast --epochs 1
                --iterations-per-epoch 2 --model-selection none
                --no-baselines)
    fi
    echo "# apnet-zsl train ${recipe[*]} on simulated AWA2 (cap $cap s)" \
        >"$recipe_log"
    if [ "$cap" -lt 30 ]; then
        echo "not run: the budget of $BUDGET s was spent" >>"$recipe_log"
        record "awa2-recipe: NOT RUN (budget spent)"
        failed=1
    else
        begin=$(date +%s)
        # Every line stamped with the seconds since the start: the epochs'
        # times, and the projection of a run the cap interrupts.
        timeout -s INT -k 10 "$cap" ${recipe_pin[@]+"${recipe_pin[@]}"} \
            bash -c '
            "$1" -m apnet_pyg.zsl simulate --dataset AWA2 --out "$2" &&
            exec "$1" -m apnet_pyg.zsl train --dataset AWA2 --root "$2" \
                --out "$2/run" "${@:3}"' _ "$PYTHON" "$recipe_dir" \
            "${recipe[@]}" 2>&1 | while IFS= read -r line; do
                echo "$(( $(date +%s) - begin )) $line"
            done >>"$recipe_log"
        rc=${PIPESTATUS[0]}
        took=$(( $(date +%s) - begin ))
        "$PYTHON" - "$recipe_log" "$recipe_dir/run/metrics.json" \
            "$results" "$rc" "$took" "$cap" "$DEVICE" "${recipe[*]}" \
            >>"$recipe_log" 2>&1 <<'EOF'
# The recipe's record: the wall clock of a finished run, or the epochs an
# interrupted one reached and the projection of its whole.
import csv, json, os, re, sys
log, metrics, results, rc, took, cap, device, flags = sys.argv[1:]
epochs = {}  # phase -> [(epoch, of, seconds since start)]
for line in open(log):
    match = re.match(r'(\d+) (selection|final) epoch (\d+)/(\d+):', line)
    if match:
        t, phase, e, n = match.groups()
        epochs.setdefault(phase, []).append((int(e), int(n), int(t)))
finished = os.path.exists(metrics)
row = dict(device=device, finished=finished, wall_s=int(took),
           cap_s=int(cap), exit_status=int(rc))
lines = []
if finished:
    run = json.load(open(metrics))
    row.update(zsl_acc=round(run.get('zsl_acc') or 0.0, 2),
               h=round(run.get('gzsl_h') or 0.0, 2),
               compiled_step=run.get('compiled_step'),
               metrics_wall_s=round(run.get('wall_seconds', 0), 1))
    lines.append(f'finished in {took} s (metrics.json: '
                 f'{row["metrics_wall_s"]} s of training and evaluation); '
                 f'ZSL accuracy {row["zsl_acc"]} (simulated), GZSL H '
                 f'{row["h"]} (simulated); target <= 600 s: '
                 + ('meets the target' if int(took) <= 600
                    else 'MISSES the target'))
projected = 0.0
for phase in ('selection', 'final'):
    done = epochs.get(phase, [])
    if not done:
        row[f'{phase}_epochs'] = '0'
        continue
    # The pace over the epochs after the first (which compiles): the
    # stamps are whole seconds, too coarse for one epoch's difference.
    per_epoch = ((done[-1][2] - done[0][2]) / (done[-1][0] - done[0][0])
                 if len(done) > 1 else float(done[0][2]))
    last, total = done[-1][0], done[-1][1]
    whole = done[-1][2] + (total - last) * per_epoch
    projected = whole if phase == 'selection' else projected + whole - (
        done[0][2] - per_epoch)
    if phase == 'selection' and 'final' not in epochs:
        # The final run, not reached: as many epochs, at this pace.
        row['final_estimate_s'] = round(total * per_epoch)
    row[f'{phase}_epochs'] = f'{last}/{total}'
    row[f'{phase}_s_per_epoch'] = round(per_epoch, 2)
    lines.append(f'{phase}: {last} of {total} epochs by {done[-1][2]} s, '
                 f'{per_epoch:.2f} s an epoch after the first')
if not finished:
    row['projected_s'] = round(projected)
    lines.append(
        f'interrupted at {took} s (cap {cap} s, exit status {rc}): '
        + (f'projected whole recipe >= {projected:.0f} s (the selection '
           f'phase at its pace, the final phase '
           + ('at its pace' if 'final' in epochs else 'not reached: '
              'not counted') + ')' if epochs else 'no epoch finished')
        + (f'; with the final run at the selection\'s pace (an '
           f'estimate: it evaluates no validation task), about '
           f'{projected + row["final_estimate_s"]:.0f} s, target <= 600 s'
           if 'final_estimate_s' in row else ''))
os.makedirs(results, exist_ok=True)
columns = list(row)
with open(os.path.join(results, 'awa2_recipe.csv'), 'w', newline='') as f:
    writer = csv.DictWriter(f, fieldnames=columns)
    writer.writeheader()
    writer.writerow(row)
text = ['# The paper\'s AWA2 recipe, end to end', '',
        f'`apnet-zsl train --dataset AWA2 {flags}` (without --recipe: '
        'the paper\'s, 360 epochs, selection on validation then the final '
        'run), wall clock from the start of `apnet-zsl simulate`, on '
        'SIMULATED image features: accuracies are not benchmark results. '
        'Every figure: [awa2_recipe.csv](awa2_recipe.csv).', '']
text += [f'- {line}' for line in lines]
with open(os.path.join(results, 'awa2_recipe.md'), 'w') as f:
    f.write('\n'.join(text) + '\n')
print('\n'.join(text))
EOF
        record_status awa2-recipe "$rc" "$cap" "$took" "$recipe_log"
    fi
fi

if wanted suite; then
    # Not started beside the recipe (no taskset): now.
    [ -f "$work/suite.begin" ] || start_cpu_suite
    {
        echo "# the whole suite: pytest -v -rfE; its CPU tests in $SHARDS" \
             "shards (-m 'not cuda'${shard_cores:+, cores $shard_cores})," \
             "then its CUDA tier (-m cuda)"
    } >"$suite_log"
    shard_rc=0
    if [ -f "$work/suite.begin" ]; then
        wait  # The CPU shards (each under its own timeout).
        for i in $(seq 0 $(( SHARDS - 1 ))); do
            echo "## shard $i: $(tr '\n' ' ' <"$work/shard-$i.txt")" \
                >>"$suite_log"
            cat "$work/suite-$i.txt" >>"$suite_log"
            rc=$(cat "$work/suite-$i.rc" 2>/dev/null || echo 1)
            # 5: no test collected (every test of the shard is CUDA's).
            if [ "$rc" != 0 ] && [ "$rc" != 5 ]; then shard_rc=$rc; fi
        done
    else
        echo "CPU shards not run: the budget was spent" >>"$suite_log"
        shard_rc=124
    fi
    begin=$(cat "$work/suite.begin" 2>/dev/null || date +%s)
    RESERVE=0
    if [ "$DEVICE" = cuda ]; then
        echo "## the CUDA tier (tests/nn/test_triton_propagation.py ran" \
             "in cuda-tests)" >>"$suite_log"
        cap=$(cap_for "$BUDGET")
        if [ "$cap" -ge 5 ]; then
            timeout -s INT -k 10 "$cap" "$PYTHON" -m pytest -m cuda -v -rfE \
                -p no:cacheprovider --basetemp="$work/tmp-cuda" \
                --ignore=tests/nn/test_triton_propagation.py \
                >>"$suite_log" 2>&1
            cuda_rc=$?
        else
            echo "not run: the budget of $BUDGET s was spent" >>"$suite_log"
            cuda_rc=124
        fi
    else
        cuda_rc=0
    fi
    [ "$cuda_rc" = 5 ] && cuda_rc=0
    rc=$shard_rc
    [ "$rc" = 0 ] && rc=$cuda_rc
    record_status suite "$rc" "$BUDGET" "$(( $(date +%s) - begin ))" \
        "$suite_log"
fi

# ---------------------------------------------------------------------------
# The older steps, with --only
# ---------------------------------------------------------------------------
if wanted propagation; then
    if [ "$DEVICE" = cuda ]; then
        sizes=(--random-graphs 100000:16 1000000:10 --features 256 64
               --methods apnet_sparse apnet_sparse_cached apnet_triton
               apnet_triton_cached agnn gat --dtypes float32 bfloat16
               float16 --memory-cap-gb 120 --min-time 0.2 --time-cap 5
               $WORDNET)
        cap=$(cap_for 400)
    else
        sizes=(--random-graphs 200:4 --features 16 --methods agnn
               --no-wordnet --no-cora --min-runs 1 --min-time 0)
        cap=$(cap_for 60)
    fi
    log="$work/propagation.log"
    : >"$log"
    touch "$work/propagation.start"
    run_step propagation "$cap" "$log" \
        "$PYTHON" -m benchmarks propagation --device "$DEVICE" "${sizes[@]}" \
        --no-refine --quiet-wait 0 \
        --budget $(( cap > 60 ? cap - 45 : cap / 2 + 1 )) "${out_flags[@]}"
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
        "${out_flags[@]}"
fi

if wanted profile; then
    sizes=(--quick)
    if [ "$DEVICE" = cuda ]; then sizes=(--episodes 50); fi
    run_step profile "$(cap_for 50)" "$outdir/profile.txt" \
        "$PYTHON" -m benchmarks profile --device "$DEVICE" "${sizes[@]}" \
        "${out_flags[@]}"
fi

if wanted train-compile; then
    sizes=(--quick --episodes 2)
    if [ "$DEVICE" = cuda ]; then sizes=(--epochs 4 --episodes 200); fi
    run_step train-compile "$(cap_for 240)" "$outdir/train-compile.txt" \
        "$PYTHON" -m benchmarks compiled_training --device "$DEVICE" \
        "${sizes[@]}" "${out_flags[@]}"
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
