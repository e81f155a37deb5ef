#!/usr/bin/env bash
# ensure-tools.sh: install what the tests need that Go modules do not bring:
# the PostgreSQL server binaries, OpenSSH's ssh-keygen (signature interop),
# node and npm, asyncpg (a wire front client), and Chromium (the console's
# browser tests).
# Quiet when everything is present. Under CI a missing tool is a failure.
set -euo pipefail
cd "$(dirname "$0")"
bash ./ensure-postgres.sh
if ! command -v ssh-keygen >/dev/null 2>&1; then
	if [[ "$(id -u)" -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
		echo "ensure-tools: installing openssh-client for ssh-keygen" >&2
		DEBIAN_FRONTEND=noninteractive apt-get update -qq
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-upgrade openssh-client >/dev/null
	fi
	command -v ssh-keygen >/dev/null 2>&1 || { echo "ensure-tools: error: ssh-keygen not found (Debian: apt-get install openssh-client)" >&2; exit 1; }
fi
# psql is a real client of the PostgreSQL wire front's tests.
if ! command -v psql >/dev/null 2>&1; then
	if [[ "$(id -u)" -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
		echo "ensure-tools: installing postgresql-client for psql" >&2
		DEBIAN_FRONTEND=noninteractive apt-get update -qq
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-upgrade postgresql-client >/dev/null
	fi
	command -v psql >/dev/null 2>&1 || { echo "ensure-tools: error: psql not found (Debian: apt-get install postgresql-client)" >&2; exit 1; }
fi
# node and npm run the MCP TypeScript client test (@modelcontextprotocol/sdk)
# and the wire front's node-postgres test (pg).
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
	if [[ "$(id -u)" -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
		echo "ensure-tools: installing nodejs and npm" >&2
		DEBIAN_FRONTEND=noninteractive apt-get update -qq
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-upgrade nodejs npm >/dev/null
	fi
	command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 || { echo "ensure-tools: error: node and npm not found (Debian: apt-get install nodejs npm)" >&2; exit 1; }
fi
# chromium runs the console's browser tests (chromedp drives it headless).
if ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1; then
	if [[ "$(id -u)" -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
		echo "ensure-tools: installing chromium" >&2
		DEBIAN_FRONTEND=noninteractive apt-get update -qq
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-upgrade chromium >/dev/null
	fi
	if ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1; then
		if [[ "${CI:-}" == "true" ]]; then
			echo "ensure-tools: error: chromium not found (Debian: apt-get install chromium)" >&2
			exit 1
		fi
		echo "ensure-tools: warning: chromium not found; the console's browser tests will skip (Debian: apt-get install chromium)" >&2
	fi
fi
# The deployment and monitoring checks: promtool (the alert rules' unit
# tests and the /metrics lint), docker compose (compose.yaml), systemd-analyze
# (the unit) and zsh (the completion script).
need_pkg() { # need_pkg COMMAND PACKAGE
	command -v "$1" >/dev/null 2>&1 && return 0
	if [[ "$(id -u)" -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
		echo "ensure-tools: installing $2 for $1" >&2
		DEBIAN_FRONTEND=noninteractive apt-get update -qq
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-upgrade --no-install-recommends "$2" >/dev/null
	fi
	command -v "$1" >/dev/null 2>&1 || { echo "ensure-tools: error: $1 not found (Debian: apt-get install $2)" >&2; exit 1; }
}
# asyncpg (Debian's, for Debian's python3) is a real client of the wire
# front's tests: it describes every statement and trusts the answer.
if ! /usr/bin/python3 -c 'import asyncpg' >/dev/null 2>&1; then
	if [[ "$(id -u)" -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
		echo "ensure-tools: installing python3-asyncpg" >&2
		DEBIAN_FRONTEND=noninteractive apt-get update -qq
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-upgrade --no-install-recommends python3-asyncpg >/dev/null
	fi
	/usr/bin/python3 -c 'import asyncpg' >/dev/null 2>&1 || { echo "ensure-tools: error: asyncpg not found for /usr/bin/python3 (Debian: apt-get install python3-asyncpg)" >&2; exit 1; }
fi
need_pkg promtool prometheus
need_pkg systemd-analyze systemd
need_pkg zsh zsh
# PgBouncer: bench --pgbouncer's proxy column (TestBenchThroughPgBouncer).
need_pkg pgbouncer pgbouncer
if ! docker compose version >/dev/null 2>&1; then
	need_pkg docker-compose docker-compose
fi
# The PostgreSQL wire front's client matrix (TestClientMatrix): Debian's
# Python client libraries (for Debian's /usr/bin/python3), the PostgreSQL
# JDBC driver and a JDK to compile its Java client. Its Node.js clients
# come from its package-lock.json (npm ci, at test time).
matrix_pkgs=(python3-psycopg2 python3-psycopg python3-asyncpg python3-sqlalchemy python3-pandas libpostgresql-jdbc-java)
missing=()
for p in "${matrix_pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
command -v javac >/dev/null 2>&1 || missing+=(default-jdk-headless)
if [[ ${#missing[@]} -gt 0 ]]; then
	if [[ "$(id -u)" -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
		echo "ensure-tools: installing ${missing[*]} for the wire front's client matrix" >&2
		DEBIAN_FRONTEND=noninteractive apt-get update -qq
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-upgrade --no-install-recommends "${missing[@]}" >/dev/null
	fi
	still=()
	for p in "${missing[@]}"; do
		if [[ "$p" == default-jdk-headless ]]; then
			command -v javac >/dev/null 2>&1 || still+=("$p")
		else
			dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || still+=("$p")
		fi
	done
	if [[ ${#still[@]} -gt 0 ]]; then
		if [[ "${CI:-}" == "true" ]]; then
			echo "ensure-tools: error: the client matrix needs ${still[*]} (Debian: apt-get install ${still[*]})" >&2
			exit 1
		fi
		echo "ensure-tools: warning: ${still[*]} not installed; the client matrix will skip those clients (Debian: apt-get install ${still[*]})" >&2
	fi
fi
