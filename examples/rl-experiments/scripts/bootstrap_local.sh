#!/usr/bin/env bash
# Set up this experiment repo for local work: the rl-harness library checked out beside it
# (../rl-harness), installed editable through [tool.uv.sources], then `uv sync`.
#
#   scripts/bootstrap_local.sh [uv sync options, e.g. --offline]
#
# RL_HARNESS_URL: where to clone the library from when ../rl-harness is missing (a git URL
# or a local path, so it works offline). Inside the library's own checkout (the bundled copy
# under examples/) this repo is a uv workspace member: the script syncs the workspace instead.
set -euo pipefail

# Forks: set this to your lab's library remote so RL_HARNESS_URL becomes optional. It is
# empty here on purpose: the library has no public home yet, and a guessed URL would fail
# later and more confusingly than the clear error below.
DEFAULT_RL_HARNESS_URL=""
PATH_SOURCE='rl-harness = { path = "../rl-harness", editable = true }'

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
LIBRARY_DIR="$(dirname "$REPO_ROOT")/rl-harness"
PYPROJECT="$REPO_ROOT/pyproject.toml"

die() { echo "bootstrap_local: error: $*" >&2; exit 2; }

is_library() { [ -f "$1/pyproject.toml" ] && grep -q '^name = "rl-harness"' "$1/pyproject.toml"; }

if uv --version >/dev/null 2>&1; then
    UV=(uv)
elif python3 -m uv --version >/dev/null 2>&1; then
    UV=(python3 -m uv)
else
    die "uv not found: install it (https://docs.astral.sh/uv/) or run 'python3 -m pip install uv'"
fi

TOP="$(git -C "$REPO_ROOT" rev-parse --show-toplevel 2>/dev/null || true)"
if [ -n "$TOP" ] && [ "$TOP" != "$REPO_ROOT" ] && is_library "$TOP"; then
    echo "bootstrap_local: bundled in the rl-harness checkout $TOP; syncing its workspace"
    cd "$TOP"
    "${UV[@]}" sync "$@"
    exit 0
fi

if [ ! -e "$LIBRARY_DIR" ]; then
    URL="${RL_HARNESS_URL:-$DEFAULT_RL_HARNESS_URL}"
    [ -n "$URL" ] || die "$LIBRARY_DIR is missing: set RL_HARNESS_URL to the library's git URL or local path"
    echo "bootstrap_local: cloning rl-harness from $URL into $LIBRARY_DIR"
    git clone --quiet "$URL" "$LIBRARY_DIR" || die "cloning $URL failed (set RL_HARNESS_URL)"
fi
is_library "$LIBRARY_DIR" || die "$LIBRARY_DIR exists but is not an rl-harness checkout"

# The bundled copy declares a workspace source; standalone, the library is a path source.
if grep -q '^rl-harness = { *workspace *= *true *}' "$PYPROJECT"; then
    sed -E "s|^rl-harness = \{ *workspace *= *true *\}.*|$PATH_SOURCE|" "$PYPROJECT" \
        > "$PYPROJECT.tmp"
    mv "$PYPROJECT.tmp" "$PYPROJECT"
    echo "bootstrap_local: pyproject.toml now installs rl-harness from ../rl-harness (commit it)"
fi
grep -q '^rl-harness = { *path *=' "$PYPROJECT" \
    || die "pyproject.toml has no rl-harness path source under [tool.uv.sources]; add: $PATH_SOURCE"

cd "$REPO_ROOT"
"${UV[@]}" sync "$@"
echo "bootstrap_local: ready. Try: uv run rl-harness experiments.example_study.smoke.experiment --smoke"
