#!/usr/bin/env bash
# An ablation of one rl.py setting: the preset's RL run once per value, all from the same prepared data and
# the same SFT model (prepare.py and sft.py run once, into ABLATE_DIR/base), each run in its own out_dir, then the curves
# side by side (scripts/compare_runs.py: start/end means) and each run's steps per hour (scripts/steps_per_hour.py).
#
#   scripts/ablate.sh SETTING VALUE [VALUE ...] [-- extra rl.py arguments]
#   scripts/ablate.sh reward_norm batch group                       # = scripts/ablate_reward_norm.sh
#   scripts/ablate.sh async_rollouts False True                     # rollouts overlapping evaluation, or not
#   SEEDS="1337 1338" scripts/ablate.sh reward_norm batch group     # one run per value and seed
#   PRESET=tiny_cpu ABLATE_DIR=out/abl_check scripts/ablate.sh reward_norm batch group -- --max_steps=2   # a CPU check
#
# Environment: PRESET (tiny), ABLATE_DIR (out/ablate_SETTING; not OUT, which the GPU machine sets), SEEDS (1337),
# RESULTS (ABLATE_DIR: where SETTING.png and SETTING.txt go, e.g. RESULTS=results/tiny/h200/ablate_SETTING),
# SHARED_BUILDS (0: each run builds into a build cache of its own, RUN/build, so that steps per hour compare; 1: the
# machine's cache, where a later run finds the kernels an earlier one built: on the H200 the second of two runs drawing
# the same kernels spent 23 s evaluating against the first's 71 s, and read 2.6x the steps per hour). A run that
# already has a log is resumed (--resume=True), so the script can be re-run after an interruption; a finished run is
# left as it is.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { sed -n '2,18p' "$0"; exit 2; }
SETTING=$1; shift
values=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do values+=("$1"); shift; done
[ $# -gt 0 ] && shift  # the --
PRESET=${PRESET:-tiny}
ABLATE_DIR=${ABLATE_DIR:-out/ablate_$SETTING}
SEEDS=${SEEDS:-1337}
RESULTS=${RESULTS:-$ABLATE_DIR}
base="$ABLATE_DIR/base"
mkdir -p "$ABLATE_DIR" "$RESULTS"
# 1. the shared stages, once (each is skipped when its output exists)
[ -f "$base/db.json" ] || python prepare.py --preset="$PRESET" --out_dir="$base"
[ -f "$base/sft/config.json" ] || python sft.py --preset="$PRESET" --out_dir="$base"
# 2. one RL run per value and seed, each on a copy of the prepared folder (rl.py refuses an out_dir with a run)
curves=()
for seed in $SEEDS; do
  for v in "${values[@]}"; do
    name="${SETTING}-${v}_seed$seed"
    run="$ABLATE_DIR/$name"
    if [ ! -d "$run" ]; then
      mkdir -p "$run"
      cp -r "$base"/. "$run"/
      rm -rf "$run/rl" "$run/eval"
    fi
    resume=()
    [ -s "$run/rl/log.jsonl" ] && resume=(--resume=True)
    builds=()
    case "$run" in /*) root="$run/build" ;; *) root="$PWD/$run/build" ;; esac
    [ "${SHARED_BUILDS:-0}" = 1 ] || builds=(env CUDAL1_BUILD_ROOT="$root")
    "${builds[@]}" python rl.py --preset="$PRESET" --out_dir="$run" --"$SETTING"="$v" --seed="$seed" \
      --prepare_if_missing=False --run_evaluate=False "${resume[@]}" "$@"
    curves+=("$name=$run/rl/log.jsonl")
  done
done
# 3. the curves side by side, start/end means and steps per hour
{
  python scripts/compare_runs.py "$RESULTS/$SETTING.png" "${curves[@]}"
  python scripts/steps_per_hour.py "${curves[@]#*=}"
} | tee "$RESULTS/$SETTING.txt"
echo "wrote $RESULTS/$SETTING.png and $RESULTS/$SETTING.txt"
