#!/usr/bin/env bash
# The issue-15 measurement: `kiln bench` over 9 shapes for each of the MLP, the encoder layer
# and the conv net with a dynamic image size (bench/vs_ort/make_models.py makes them), tiered
# policy, 1 thread. Each table's first/spec column is a shape's first call over its
# specialized p50; tier-0 p50 over specialized p50 is the generic tier's cost.
#   usage: bash bench/tiers.sh KILN MODELS_DIR [extra kiln bench flags]
set -euo pipefail
kiln=${1:?kiln binary}
models=${2:?folder of make_models.py output}
shift 2
bench() {
  echo "== $1"
  local model=$1 shapes=$2
  shift 2
  "$kiln" bench "$models/$model.onnx" --shapes "$shapes" --threads 1 --iters 30 "$@"
}
bench mlp "x=1x784;x=7x784;x=3x784;x=2x784;x=16x784;x=32x784;x=64x784;x=100x784;x=256x784" "$@"
bench encoder "x=1x16x256;x=1x5x256;x=2x9x256;x=3x7x256;x=1x32x256;x=2x24x256;x=1x64x256;x=4x16x256;x=1x128x256" "$@"
bench dynamic_conv "x=1x3x224x224;x=1x3x17x23;x=1x3x32x32;x=1x3x48x80;x=1x3x64x64;x=1x3x96x128;x=1x3x120x160;x=1x3x200x120;x=1x3x160x160" "$@"
