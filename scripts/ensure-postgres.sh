#!/usr/bin/env bash
# ensure-postgres.sh: make sure the PostgreSQL server binaries (initdb and
# postgres, in one directory) are installed, as internal/pgtmp needs them.
#
# Quiet and exit 0 when they are present. Otherwise, when run as root on a
# system with apt-get, install postgresql-15 (or, failing that, the
# distribution's default postgresql) and check again. Exit non-zero with a
# message on stderr when the binaries are still missing.
set -euo pipefail

has_server() {
	[[ -n "$1" && -x "$1/initdb" && -x "$1/postgres" ]]
}

find_server() {
	local dir
	if command -v pg_config >/dev/null 2>&1; then
		dir="$(pg_config --bindir 2>/dev/null || true)"
		if has_server "$dir"; then
			return 0
		fi
	fi
	for dir in /usr/lib/postgresql/*/bin; do
		if has_server "$dir"; then
			return 0
		fi
	done
	return 1
}

if find_server; then
	exit 0
fi

fail() {
	echo "ensure-postgres: error: $*" >&2
	echo "ensure-postgres: hint: install the PostgreSQL server (Debian: apt-get install postgresql-15)" >&2
	exit 1
}

if [[ "$(id -u)" -ne 0 ]]; then
	fail "PostgreSQL server binaries (initdb, postgres) not found, and installing them needs root"
fi
if ! command -v apt-get >/dev/null 2>&1; then
	fail "PostgreSQL server binaries (initdb, postgres) not found, and apt-get is not available"
fi

echo "ensure-postgres: installing the PostgreSQL server with apt-get" >&2
export DEBIAN_FRONTEND=noninteractive
if ! apt-get update -qq; then
	fail "apt-get update failed"
fi
if ! apt-get install -y -qq --no-upgrade postgresql-15 >/dev/null; then
	echo "ensure-postgres: postgresql-15 unavailable; trying the default postgresql" >&2
	apt-get install -y -qq --no-upgrade postgresql >/dev/null || fail "apt-get install postgresql failed"
fi

find_server || fail "installed PostgreSQL, but no directory holds both initdb and postgres (checked pg_config --bindir and /usr/lib/postgresql/*/bin)"
echo "ensure-postgres: PostgreSQL server installed" >&2
