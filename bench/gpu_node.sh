#!/usr/bin/env bash
# The GPU check on a GPU machine that has torch, triton and transformers but no package registry
# (docs/gpu.md): install what is carried beside the machine's own torch, build causal-conv1d for this
# card only, run `python -m bench.gpu`, and leave its JSON, page and logs in OUT.
#
#   bench/gpu_node.sh CARRY OUT [bench.gpu args...]
#
# CARRY holds the pinned pure-Python wheels (`make gpu-wheels`, installed by bench/with_pins.sh) and the sdists
# mamba_ssm-2.3.2.post1.tar.gz and causal_conv1d-1.7.0.tar.gz. GPU_CHECK_S (default 540) is the
# seconds the whole script may take: the check's --budget-s is what the build leaves, less a margin
# for the row in flight and the page. Exits with the check's status.
set -uo pipefail
if [ $# -lt 2 ] || [ ! -d "$1" ]; then
    echo "usage: $0 CARRY OUT [bench.gpu args...] (CARRY: a folder of wheels and sdists)" >&2
    exit 2
fi
carry=$(realpath "$1") out=$(realpath -m "$2")
shift 2
cd "$(dirname "$(realpath "$0")")/.." || exit 1 # the checkout: bench.gpu reads params.yaml and profiles/
site=/tmp/emergence-site build=/tmp/emergence-build
mkdir -p "$site" "$build" "$out" || exit 1
t0=$SECONDS
export PYTHONPATH="$site:$PWD/src:$PWD" PYTHONUNBUFFERED=1

# Each sdist compiles for every card its CUDA knows (nine archs under CUDA 13: many minutes);
# this card's own arch is all the check needs, so the other -gencode pairs become `pass`.
arch=$(python3 -c 'import torch; print("%d%d" % torch.cuda.get_device_capability())') || exit 1
unpack() { # sdist [cuda] -> its source folder (with cuda: its extension built for $arch only)
    local sdist=$1 src
    [ -f "$sdist" ] || { echo "gpu_node: no sdist $sdist" >&2 && return 1; }
    tar xzf "$sdist" -C "$build" || return 1
    src="$build/$(basename "$sdist" .tar.gz)"
    if [ "${2:-}" = cuda ]; then
        python3 -m bench.only_arch "$src/setup.py" "$arch" || return 1
    fi
    echo "$src"
}
install() { # source folder, seconds allowed
    MAX_JOBS=$(nproc) timeout "$2" python3 -m pip install -v --no-index --no-deps --no-build-isolation \
        --no-compile --target "$site" "$1" >>"$out/build.log" 2>&1
}
# causal-conv1d: the conv inside mamba_ssm's fused training scan (without it the model runs the
# unfused one). BUILD_S=0 skips it: its backward kernel alone outlasted 200 s on 16 cores (H200 node).
if [ "${BUILD_S:-200}" -gt 0 ]; then
    src=$(unpack "$(echo "$carry"/causal_conv1d-*.tar.gz)" cuda) &&
        CAUSAL_CONV1D_FORCE_BUILD=TRUE install "$src" "${BUILD_S:-200}"
    echo "causal-conv1d: exit $? after $((SECONDS - t0)) s" | tee -a "$out/build.log"
fi
# mamba_ssm: Mamba-2's kernels are Triton, so its CUDA extension (Mamba-1's selective scan) is not
# built; its __init__ still imports that extension, so a module of that name says what is missing.
src=$(unpack "$(echo "$carry"/mamba_ssm-*.tar.gz)") &&
    MAMBA_SKIP_CUDA_BUILD=TRUE MAMBA_FORCE_BUILD=TRUE install "$src" 120
echo "mamba_ssm (Triton only): exit $? after $((SECONDS - t0)) s" | tee -a "$out/build.log"
cat >"$site/selective_scan_cuda.py" <<'EOF'
"""Stand-in for mamba_ssm's Mamba-1 CUDA extension, not built here (MAMBA_SKIP_CUDA_BUILD): mamba_ssm's
__init__ imports it; Mamba-2 never calls it."""


def __getattr__(name):
    if name.startswith("__"):  # hasattr / inspect probes: absent, as on any module
        raise AttributeError(name)
    raise ImportError(f"selective_scan_cuda.{name}: mamba_ssm was built without its CUDA extension")
EOF

budget=$((${GPU_CHECK_S:-540} - (SECONDS - t0) - 110))
if [ "$budget" -lt 30 ]; then
    echo "gpu_node: the build left ${budget} s of GPU_CHECK_S=${GPU_CHECK_S:-540} for the check" >&2
    exit 1
fi
cp docs/bench.md "$out/bench.md"
bench/with_pins.sh "$carry" python3 -m bench.gpu --budget-s "$budget" --out "$out/gpu_check.json" --doc "$out/bench.md" "$@" 2>&1 |
    tee "$out/check.log"
rc=${PIPESTATUS[0]}
echo "gpu_node: $((SECONDS - t0)) s in all, check exit $rc"
exit "$rc"
