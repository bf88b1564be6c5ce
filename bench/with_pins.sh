#!/usr/bin/env bash
# Run CMD on a GPU machine with the project's pinned pure-Python packages (bench/pins.py): the wheels
# in WHEELS go into a folder of their own, ahead of the machine's packages on PYTHONPATH, this checkout
# after them; CMD runs in the checkout.
#
#   bench/with_pins.sh WHEELS CMD...    (WHEELS: made here by `make gpu-wheels`)
set -uo pipefail
if [ $# -lt 2 ] || [ ! -d "$1" ]; then
    echo "usage: $0 WHEELS CMD... (WHEELS: a folder of wheels, python -m bench.pins wheels)" >&2
    exit 2
fi
wheels=$(realpath "$1")
shift
cd "$(dirname "$(realpath "$0")")/.." || exit 1
site=/tmp/emergence-pins
rm -rf "$site"
shopt -s nullglob
carried=("$wheels"/*.whl)
if [ ${#carried[@]} -gt 0 ]; then # --no-deps: the folder holds every pin the check imports
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$site" "${carried[@]}" ||
        exit 1
fi
export PYTHONPATH="$site:$PWD/src:$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
exec "$@"
