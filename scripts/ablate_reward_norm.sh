#!/usr/bin/env bash
# Ablation of rl.py's reward_norm (issue 13 item 2): the tiny preset's RL run with reward_norm=batch and with
# reward_norm=group, from the same prepared data and the same SFT model (prepare.py and sft.py run once), each in its
# own out_dir, then both curves side by side (scripts/compare_runs.py) and the start/end means it prints.
#
#   scripts/ablate_reward_norm.sh                      # on the GPU machine: --preset=tiny, seed 1337, into out/ablate_reward_norm
#   SEEDS="1337 1338 1339" scripts/ablate_reward_norm.sh   # one pair of runs per seed (the curves of one seed are noisy)
#   PRESET=tiny_cpu OUT=/tmp/abl scripts/ablate_reward_norm.sh --max_steps=2   # a CPU check of the script itself
#
# Settings through the environment: PRESET (tiny), OUT (out/ablate_reward_norm), SEEDS (1337), RESULTS (OUT: where
# the PNG and the summary go; e.g. results/tiny/h200/reward_norm). Extra arguments go to both rl.py runs.
# A run that already has a log is resumed (--resume), so the script can be re-run after an interruption.
set -euo pipefail
cd "$(dirname "$0")/.."
PRESET=${PRESET:-tiny}
OUT=${OUT:-out/ablate_reward_norm}
SEEDS=${SEEDS:-1337}
RESULTS=${RESULTS:-$OUT}
base="$OUT/base"
mkdir -p "$OUT" "$RESULTS"
# 1. the shared stages, once (each is skipped when its output exists)
[ -f "$base/db.json" ] || python prepare.py --preset="$PRESET" --out_dir="$base"
[ -f "$base/sft/config.json" ] || python sft.py --preset="$PRESET" --out_dir="$base"
# 2. one RL run per setting and seed, each on a copy of the prepared folder (rl.py refuses an out_dir with a run)
curves=()
for seed in $SEEDS; do
  for norm in batch group; do
    run="$OUT/${norm}_seed$seed"
    if [ ! -d "$run" ]; then
      mkdir -p "$run"
      cp -r "$base"/. "$run"/
      rm -rf "$run/rl" "$run/eval"
    fi
    resume=()
    [ -s "$run/rl/log.jsonl" ] && resume=(--resume=True)
    python rl.py --preset="$PRESET" --out_dir="$run" --reward_norm="$norm" --seed="$seed" \
      --prepare_if_missing=False --run_evaluate=False "${resume[@]}" "$@"
    curves+=("${norm}_seed$seed=$run/rl/log.jsonl")
  done
done
# 3. the curves side by side, and the summary
python scripts/compare_runs.py "$RESULTS/reward_norm.png" "${curves[@]}" | tee "$RESULTS/reward_norm.txt"
echo "wrote $RESULTS/reward_norm.png and $RESULTS/reward_norm.txt"
