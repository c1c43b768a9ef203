# Sourced by the set-up scripts: make (or reuse) the project's virtual environment
# and install the pinned dependencies into it. VENV overrides the location.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${VENV:-$root/.venv}"
python="${PYTHON:-python3}"
extras="${1:-}"
if [ ! -x "$venv/bin/python" ]; then
  "$python" -m venv "$venv"
fi
stamp="$venv/.blastrate-installed${extras:+-$extras}"
if [ ! -f "$stamp" ] || [ "$root/pyproject.toml" -nt "$stamp" ] || [ "$root/constraints.txt" -nt "$stamp" ]; then
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
    -c "$root/constraints.txt" -e "$root${extras:+[$extras]}"
  touch "$stamp"
fi
# The dense matrices here are small (hundreds of states), where BLAS threads only add
# contention with the server's own workers: on a loaded 2-core host they turned a 4 ms
# eigen-decomposition into a second. One BLAS thread per process, unless told otherwise.
export OPENBLAS_NUM_THREADS="${OPENBLAS_NUM_THREADS:-1}"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
