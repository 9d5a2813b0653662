#!/usr/bin/env bash
# Shared by infra/test and infra/bench (sourced, not run): the pinned test tools in
# .venv-test/, and starting/stopping moto_server on a free 127.0.0.1 port. Expects
# `repo_root` to be set and `set -euo pipefail` in the caller.

# Pinned test tools; bump together and rerun (the venv is refreshed when this line changes).
readonly MOTO_VERSION="5.2.5"
readonly CARGO_LAMBDA_VERSION="1.9.2"
readonly CFN_LINT_VERSION="1.58.0"
# aws-sam-cli 1.170.0 requires cfn-lint >=1.52,<1.59: keep CFN_LINT_VERSION inside that range.
readonly SAM_CLI_VERSION="1.170.0"
readonly REQUIREMENTS="moto[server]==${MOTO_VERSION} cargo-lambda==${CARGO_LAMBDA_VERSION} cfn-lint==${CFN_LINT_VERSION} aws-sam-cli==${SAM_CLI_VERSION}"
readonly VENV_DIR="${repo_root}/.venv-test"
readonly RUN_DIR="${repo_root}/.test-run"
readonly MOTO_START_SECONDS="${MOTO_START_SECONDS:-60}"

# Never reach real AWS, never ask EC2 instance metadata for anything.
export AWS_EC2_METADATA_DISABLED=true
export AWS_ACCESS_KEY_ID=test
export AWS_SECRET_ACCESS_KEY=test
export AWS_REGION=us-east-1
export AWS_DEFAULT_REGION=us-east-1
unset AWS_PROFILE AWS_SESSION_TOKEN
# The same target directory as a plain `cargo run` (./target), so the README's two commands
# share one build; CI points it outside the clone (.ci/run) to reuse builds between runs.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-${repo_root}/target}"

step() { printf '==> %s\n' "$*"; }
die() { printf 'infra/test: %s\n' "$*" >&2; exit 1; }

# bubblewrap (the node host's jail for sandboxed sessions' commands) and util-linux's
# prlimit/setpriv, from Debian's archive: the jail tests run them for real.
ensure_jail_tools() {
  if command -v bwrap >/dev/null && command -v prlimit >/dev/null && command -v setpriv >/dev/null; then
    return
  fi
  step "installing bubblewrap (apt-get install bubblewrap util-linux)"
  local sudo=""
  [[ "$(id -u)" == 0 ]] || sudo="sudo"
  $sudo apt-get install -y -q bubblewrap util-linux >/dev/null \
    || { $sudo apt-get update -q >/dev/null && $sudo apt-get install -y -q bubblewrap util-linux >/dev/null; } \
    || die "cannot install bubblewrap: run apt-get install bubblewrap"
}

ensure_test_tools() {
  ensure_jail_tools
  local stamp="${VENV_DIR}/.clawless-requirements"
  if [[ -x "${VENV_DIR}/bin/python" && -x "${VENV_DIR}/bin/moto_server" \
        && -x "${VENV_DIR}/bin/cargo-lambda" && -x "${VENV_DIR}/bin/cfn-lint" \
        && -x "${VENV_DIR}/bin/sam" && -f "$stamp" \
        && "$(cat "$stamp")" == "$REQUIREMENTS" ]]; then
    return
  fi
  step "installing test tools into .venv-test (${REQUIREMENTS})"
  local python="${PYTHON:-python3}"
  command -v "$python" >/dev/null || die "python3 not found (needed for moto_server and cargo-lambda)"
  if [[ ! -x "${VENV_DIR}/bin/python" ]]; then
    if ! "$python" -m venv "$VENV_DIR"; then
      # Debian's python3 without python3-venv: fall back to virtualenv from PyPI.
      rm -rf "$VENV_DIR"
      "$python" -m pip install --quiet --user virtualenv \
        || die "cannot create a virtualenv: install python3-venv (apt-get install python3-venv)"
      "$python" -m virtualenv --quiet "$VENV_DIR" || die "virtualenv failed to create .venv-test"
    fi
  fi
  # shellcheck disable=SC2086 # REQUIREMENTS is a list of pinned requirement specifiers
  "${VENV_DIR}/bin/python" -m pip install --quiet --disable-pip-version-check $REQUIREMENTS \
    || die "pip could not install ${REQUIREMENTS}"
  printf '%s' "$REQUIREMENTS" >"$stamp"
}

moto_pid=""
stop_moto() {
  if [[ -n "$moto_pid" ]] && kill -0 "$moto_pid" 2>/dev/null; then
    kill "$moto_pid" 2>/dev/null || true
    wait "$moto_pid" 2>/dev/null || true
  fi
  moto_pid=""
}
trap stop_moto EXIT
trap 'stop_moto; exit 130' INT
trap 'stop_moto; exit 143' TERM

free_port() {
  "${VENV_DIR}/bin/python" -c '
import socket
with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    print(s.getsockname()[1])'
}

# Answers 0 once moto serves HTTP on the port.
moto_answers() {
  "${VENV_DIR}/bin/python" -c '
import sys, urllib.request
urllib.request.urlopen("http://127.0.0.1:" + sys.argv[1] + "/", timeout=2).read()' "$1" \
    >/dev/null 2>&1
}

start_moto() {
  mkdir -p "$RUN_DIR"
  local attempt port deadline
  for attempt in 1 2 3; do
    port="$(free_port)"
    step "starting moto on 127.0.0.1:${port}"
    "${VENV_DIR}/bin/moto_server" -H 127.0.0.1 -p "$port" >"${RUN_DIR}/moto.log" 2>&1 &
    moto_pid=$!
    deadline=$((SECONDS + MOTO_START_SECONDS))
    while ((SECONDS < deadline)); do
      if ! kill -0 "$moto_pid" 2>/dev/null; then
        break # exited: most likely the port was taken meanwhile; try another one
      fi
      if moto_answers "$port"; then
        export CLAWLESS_TEST_AWS_ENDPOINT="http://127.0.0.1:${port}"
        return
      fi
      sleep 0.2
    done
    stop_moto
    printf 'moto did not answer on 127.0.0.1:%s (attempt %s); last log lines:\n' "$port" "$attempt" >&2
    tail -n 20 "${RUN_DIR}/moto.log" >&2 || true
  done
  die "could not start moto_server (log: .test-run/moto.log)"
}

# `sam validate --lint` (the SAM CLI running cfn-lint on the template) entirely offline: no
# telemetry, no check for a newer version (the SAM CLI asks PyPI at most once a week and
# records when in its config dir, so a private config dir with a check "done" in 2100 keeps it
# quiet), and a proxy on a closed loopback port catches anything else that tries HTTP.
sam_validate() {
  local sam_home="${RUN_DIR}/sam-cli"
  mkdir -p "$sam_home"
  printf '{"telemetryEnabled": false, "lastVersionCheck": 4102444800.0}\n' >"${sam_home}/metadata.json"
  SAM_CLI_TELEMETRY=0 __SAM_CLI_APP_DIR="$sam_home" \
    HTTPS_PROXY=http://127.0.0.1:9 HTTP_PROXY=http://127.0.0.1:9 NO_PROXY= \
    "${VENV_DIR}/bin/sam" validate --lint --template-file template.yaml --region "$AWS_REGION" "$@"
}
