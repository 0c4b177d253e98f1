#!/usr/bin/env bash
# The reward_norm ablation: rl.py's tiny preset with reward_norm=batch and reward_norm=group from the
# same prepared data and SFT model, curves side by side (scripts/ablate.sh does the work; same environment variables).
#
#   scripts/ablate_reward_norm.sh                                    # on the GPU machine, into out/ablate_reward_norm
#   SEEDS="1337 1338 1339" RESULTS=results/tiny/h200/reward_norm scripts/ablate_reward_norm.sh
#   PRESET=tiny_cpu ABLATE_DIR=out/abl_check scripts/ablate_reward_norm.sh --max_steps=2   # a CPU check of the script
exec "$(dirname "$0")/ablate.sh" reward_norm batch group -- "$@"
