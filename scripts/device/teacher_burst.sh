#!/usr/bin/env bash
# Run THERE (the lent GPU machine), after scripts/device/prepare.sh ran here:
#   run(command="bash scripts/device/teacher_burst.sh", carry=[".device", ".gl"], timeout_s=600)
# It renders the teacher's dataset with our engine on the GPU (EGL), encodes the latent cache on
# the GPU, trains the teacher (PRESET, from INIT or from scratch) there for what is left of
# BUDGET_S seconds (or MINUTES of training) and leaves in $OUT:
#   teacher/model.safetensors, teacher/config.json   the EMA weights (save_pretrained)
#   metrics.jsonl, metrics.png, burst.json            the run's log, curves and timings
# The step count is sized from a probe of PROBE steps so the cosine schedule ends in time.
# Locally (a dry run of the logic on the CPU):
#   OUT=/tmp/burst PY=.venv/bin/python SKIP_WHEELS=1 DEVICE=cpu TINY=1 bash scripts/device/teacher_burst.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${OUT:?OUT must name the output folder}"
PY=${PY:-python3}
BUDGET_S=${BUDGET_S:-540}        # the whole script's wall time (the call's limit is 600 s)
MINUTES=${MINUTES:-}             # training wall time after the probe; default: what BUDGET_S leaves
PROBE=${PROBE:-100}
PRESET=${PRESET:-base}           # base: 7.0 M parameters, stored as float16 (14 MB, as the small fp32)
BATCH=${BATCH:-64}
FRAMES=${FRAMES:-8}
LR=${LR:-4e-4}
CLIPS=${CLIPS:-240}
WORKERS=${WORKERS:-14}
DEVICE=${DEVICE:-cuda}
INIT=${INIT-}                    # e.g. weights/teacher/model.safetensors with PRESET=small; empty: from scratch
T_ONE=${T_ONE:-0.5}                # share of samples at t = 1, the regression every sample starts from
DATA=${DATA:-/tmp/alaya_ds128}
RUN=${RUN:-/tmp/alaya_teacher_run}
if [ -n "${TINY:-}" ]; then CLIPS=6; PROBE=3; BATCH=2; FRAMES=4; MINUTES=${MINUTES:-0.3}; WORKERS=1; PRESET=tiny; fi
t0=$(date +%s)

. scripts/device/environment.sh

$PY -m alaya.cli datagen --out "$DATA" --clips "$CLIPS" --frames 16 --size 128 --seed 1 --workers "$WORKERS" --resume
t_data=$(date +%s)

train() {
    $PY -m alaya.cli train teacher --data "$DATA" --run-dir "$RUN" --out "$OUT/teacher" --preset "$PRESET" \
        ${INIT:+--init "$INIT"} --steps "$1" --batch-size "$BATCH" --frames "$FRAMES" --lr "$LR" --ema 0.999 \
        --t-mean 0.5 --one-step-t "$T_ONE" --text-noise 0.5 --pixel-weighting 0.5 --val-every 500 \
        --ckpt-every 1000 \
        --device "$DEVICE" --store-half ${BF16---bf16}
}
train "$PROBE"                   # also builds the latent cache
t_probe=$(date +%s)
if [ -z "$MINUTES" ]; then           # what is left, less a minute for restarting and saving
    MINUTES=$($PY -c "print(max(0.5, ($BUDGET_S - ($t_probe - $t0) - 60) / 60))")
fi
STEPS=$($PY - "$RUN/metrics.jsonl" "$PROBE" "$MINUTES" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
probe, minutes = int(sys.argv[2]), float(sys.argv[3])
rate = probe / max(0.05, rows[-1]["elapsed_s"])          # steps per second, warm-up included (a floor:
                                                        # a fast probe must not size an endless run)
print(probe + max(1, int(0.92 * rate * minutes * 60)))
PY
)
echo "probe: $PROBE steps; training to $STEPS steps in about $MINUTES min"
train "$STEPS"
t_end=$(date +%s)
cp "$RUN/metrics.jsonl" "$RUN/metrics.png" "$OUT/" 2>/dev/null || true
$PY - "$OUT/burst.json" <<PY
import json, sys
json.dump({"steps": $STEPS, "minutes": $MINUTES, "batch_size": $BATCH, "frames": $FRAMES, "preset": "$PRESET", "init": "$INIT",
           "clips": $CLIPS, "data_s": $t_data - $t0, "probe_s": $t_probe - $t_data,
           "train_s": $t_end - $t_probe, "total_s": $t_end - $t0}, open(sys.argv[1], "w"), indent=1)
PY
cat "$OUT/burst.json"
