#!/bin/sh
# Ground truth on a GPU: every workload's configs (no profiler, torch.profiler,
# and the Reverie collector when REVERIE_COLLECTOR is set), then the NCCL sweep.
#
#   bench/gpu/run_all.sh OUT_DIR [resnet50] [gpt2] [dlrm] [nccl]
#   REVERIE_COLLECTOR=build/lib/libreverie-collector.so bench/gpu/run_all.sh OUT_DIR resnet50
#
# Then, on any machine with the build: python3 scripts/accuracy.py --gpu-results OUT_DIR
# See docs/internals/ground-truth.md. Reads the GPU's settings, never sets them.
set -eu
if [ $# -lt 1 ]; then
    echo "usage: $0 OUT_DIR [resnet50|gpt2|dlrm|nccl ...]" >&2
    exit 2
fi
out=$1
shift
here=$(cd "$(dirname "$0")" && pwd)
py=${PYTHON:-python3}
if ! command -v "$py" >/dev/null 2>&1; then
    echo "run_all.sh: $py not found; this needs python3 with PyTorch on a machine with an NVIDIA GPU" >&2
    exit 2
fi
if ! "$py" -c 'import torch' >/dev/null 2>&1; then
    echo "run_all.sh: PyTorch is not installed for $py; nothing measured" >&2
    exit 2
fi
if ! "$py" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' >/dev/null 2>&1; then
    echo "run_all.sh: no CUDA GPU visible to PyTorch; nothing measured" >&2
    exit 2
fi
mkdir -p "$out"
exec "$py" "$here/run_all.py" --out "$out" "$@"
