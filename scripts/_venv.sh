# Sourced by the set-up scripts: make (or reuse) the project's virtual environment
# and install the pinned dependencies into it. VENV overrides the location.
#
# Source it with the extras as its one argument, always, "" for none:
#     source scripts/_venv.sh ""      # the service
#     source scripts/_venv.sh test    # the test tools too
# `source` without arguments shares the caller's "$@": `./scripts/serve --port 9000` once
# handed "--port" to pip as the name of an extra.  Anything but extras' names is refused.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${VENV:-$root/.venv}"
python="${PYTHON:-python3}"
extras="${1-}"
if ! [[ "$extras" =~ ^[a-z][a-z0-9_-]*(,[a-z][a-z0-9_-]*)*$ || -z "$extras" ]]; then
  echo "scripts/_venv.sh: '$extras' is not a list of extras; source it as" \
    "'source scripts/_venv.sh EXTRAS' (\"\" for none)" >&2
  return 2 2>/dev/null || exit 2
fi
if [ ! -x "$venv/bin/python" ]; then
  "$python" -m venv "$venv"
fi
stamp="$venv/.blastrate-installed${extras:+-$extras}"
# A stamp is current when it is newer than both dependency files. Without extras, an
# environment installed with any extras (the test venv, say) is good enough.
current() { [ -f "$1" ] && [ ! "$root/pyproject.toml" -nt "$1" ] && [ ! "$root/constraints.txt" -nt "$1" ]; }
candidates=("$stamp")
if [ -z "$extras" ]; then
  candidates+=("$venv"/.blastrate-installed*)
fi
installed=false
for candidate in "${candidates[@]}"; do
  if current "$candidate"; then installed=true; break; fi
done
if [ "$installed" = false ]; then
  # uv (Astral's installer, pinned in constraints.txt) installs the same pins in about
  # 16 s with empty caches where pip takes 44 s on a fresh 2-core machine: most of a fresh
  # clone's first minute. pip does it when uv cannot be had (no wheel for this platform,
  # say). uv does not read pip's configuration: a mirror set for pip is passed on.
  [ -z "${PIP_INDEX_URL:-}" ] || export UV_INDEX_URL="${UV_INDEX_URL:-$PIP_INDEX_URL}"
  [ -z "${PIP_EXTRA_INDEX_URL:-}" ] ||
    export UV_EXTRA_INDEX_URL="${UV_EXTRA_INDEX_URL:-$PIP_EXTRA_INDEX_URL}"
  if "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
      -c "$root/constraints.txt" uv >/dev/null 2>&1 &&
    "$venv/bin/uv" pip install --quiet --compile-bytecode --python "$venv/bin/python" \
      -c "$root/constraints.txt" -e "$root${extras:+[$extras]}"; then
    :
  else
    echo "scripts/_venv.sh: installing with pip (uv could not be used; slower)" >&2
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
      -c "$root/constraints.txt" -e "$root${extras:+[$extras]}"
  fi
  # The project's own modules compiled too, as the installers compile the packages': the
  # editable install leaves them as sources, and where bytecode is never written
  # (PYTHONDONTWRITEBYTECODE, as on CI machines) every command compiled about a hundred
  # of them again: 0.14 s of each `blastrate` start, 0.27 s to 0.21 s for `blastrate rate`.
  # Not fatal: without it every start is only slower.
  "$venv/bin/python" -m compileall -q -j 0 "$root"/{app,datamover,host,planning,queues,srn,transport} >&2 ||
    echo "scripts/_venv.sh: compiling the project's modules failed; starts will be slower" >&2
  touch "$stamp"
fi
# SuiteSparse's AMD ordering (BSD-3) halves the engine's sparse LU time on grid-like
# chains; without it the LU route falls back to SuperLU's ordering (same answers, slower;
# srn/_ordering.py). Debian ships it as libamd3 (bookworm: libamd2). Installed when
# missing and we can, once per environment (a machine without a mirror does not wait on
# apt at every start), never fatal. `grep >/dev/null`, not `grep -q`: -q stops reading at
# the first match, and under pipefail ldconfig's SIGPIPE would then read as "missing".
if ! /sbin/ldconfig -p 2>/dev/null | grep 'libamd\.so' >/dev/null; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null && [ ! -e "$venv/.libamd-tried" ]; then
    touch "$venv/.libamd-tried"
    amd_pkg=libamd2
    if apt-cache show libamd3 >/dev/null 2>&1; then amd_pkg=libamd3; fi
    if ! amd_log="$( { DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
        --no-install-recommends "$amd_pkg" ||
      { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
        --no-install-recommends "$amd_pkg"; }; } 2>&1)"; then
      echo "scripts/_venv.sh: could not install $amd_pkg; the engine's LU route will be" \
        "slower: $(printf '%s' "$amd_log" | tail -n 1)" >&2
    fi
    unset amd_pkg amd_log
  else
    echo "scripts/_venv.sh: libamd is missing; the engine's LU route will be slower." \
      "As root: apt-get install libamd3 (or libamd2)" >&2
  fi
fi
# The dense matrices here are small (hundreds of states), where BLAS threads only add
# contention with the server's own workers: on a loaded 2-core host they turned a 4 ms
# eigen-decomposition into a second. One BLAS thread per process, unless told otherwise.
export OPENBLAS_NUM_THREADS="${OPENBLAS_NUM_THREADS:-1}"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
