#!/usr/bin/env bash
# Run THERE (the lent GPU machine), after scripts/device/prepare.sh ran here:
#   run(command="bash scripts/device/guided_burst.sh", carry=[".device", ".gl"], timeout_s=600)
# It renders the dataset with our engine (EGL), streams the shipped student over every train and
# val clip on the machine's CPU cores (onnxruntime int8, as alaya play; the latents are cached in
# the run folder), trains the guided decoder on the GPU for what is left of BUDGET_S seconds and
# leaves in $OUT:
#   guided_decoder/model.safetensors, config.json   the EMA weights (save_pretrained, float16)
#   metrics.jsonl, metrics.png, burst.json          the run's log, curves and timings
# INIT_RUN: a run folder to continue (its checkpoints resume exactly; carry it).
# INIT: a decoder folder to start from (default the shipped one); DETAIL and DETAIL_LOSS: the detail
# term's weight and kind; FULL_RES_BLOCKS: residual blocks at full resolution. The decoder has the
# albedo gain and the sky gain (docs/flash.md, "Detail" and "Stars, surface breaks").
# Locally (a dry run of the logic on the CPU):
#   OUT=/tmp/burst PY=.venv/bin/python SKIP_WHEELS=1 DEVICE=cpu TINY=1 bash scripts/device/guided_burst.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${OUT:?OUT must name the output folder}"
PY=${PY:-python3}
BUDGET_S=${BUDGET_S:-540}
PROBE=${PROBE:-200}
BATCH=${BATCH:-64}
LR=${LR:-2e-3}
INIT=${INIT-weights/guided_decoder}
DETAIL=${DETAIL:-0.15}
DETAIL_LOSS=${DETAIL_LOSS:-relative_power}
FULL_RES_BLOCKS=${FULL_RES_BLOCKS:-1}
CLIPS=${CLIPS:-720}
WORKERS=${WORKERS:-14}
DEVICE=${DEVICE:-cuda}
DATA=${DATA:-/tmp/alaya_ds128}
RUN=${RUN:-${INIT_RUN:-/tmp/alaya_guided_run}}
if [ -n "${TINY:-}" ]; then CLIPS=6; PROBE=3; BATCH=2; BUDGET_S=${BUDGET_S_TINY:-120}; WORKERS=1; fi
t0=$(date +%s)

. scripts/device/environment.sh

$PY -m alaya.cli datagen --out "$DATA" --clips "$CLIPS" --frames 16 --size 128 --seed 1 --workers "$WORKERS" --resume
t_data=$(date +%s)
train() {
    $PY -m alaya.cli train guided-decoder --data "$DATA" --run-dir "$RUN" --out "$OUT/guided_decoder" \
        --steps "$1" --batch-size "$BATCH" --lr "$LR" --ema 0.999 --val-every 500 --ckpt-every 500 --device "$DEVICE" \
        --albedo-gain --sky-gain --full-res-blocks "$FULL_RES_BLOCKS" --detail-weight "$DETAIL" \
        --detail-loss "$DETAIL_LOSS" ${INIT:+--init "$INIT"}
}
train "$PROBE"                   # also computes the student's latents
t_probe=$(date +%s)
STEPS=$($PY - "$RUN/metrics.jsonl" "$PROBE" "$(( BUDGET_S - (t_probe - t0) - 45 ))" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
probe, seconds = int(sys.argv[2]), max(20, int(sys.argv[3]))
rate = probe / max(0.05, rows[-1]["elapsed_s"])
print(probe + max(1, int(0.9 * rate * seconds)))
PY
)
echo "probe: $PROBE steps; training to $STEPS steps"
train "$STEPS"
t_end=$(date +%s)
cp "$RUN/metrics.jsonl" "$RUN/metrics.png" "$OUT/" 2>/dev/null || true
printf '{"steps": %s, "batch_size": %s, "clips": %s, "data_s": %s, "probe_s": %s, "train_s": %s, "total_s": %s}\n' \
    "$STEPS" "$BATCH" "$CLIPS" $((t_data - t0)) $((t_probe - t_data)) $((t_end - t_probe)) $((t_end - t0)) | tee "$OUT/burst.json"
