#!/usr/bin/env bash
# make bench: pgbench, an independent load generator, against the same
# target three ways in one run: direct, through PgBouncer (when installed)
# and through Harbormaster's wire front, for the single-row UPDATE and the
# single-row SELECT of scripts/pgbench/ (a new literal every statement),
# interleaved REPEAT times; then harbormaster bench for the one-client
# latencies. The demo (a throwaway PostgreSQL, the embedded store) is the
# node. docs/performance.md reads its output.
#
#   make bench                       16 clients, 10 s a run, 3 repetitions
#   CLIENTS=4 SECONDS_EACH=5 REPEAT=1 make bench
#   MODE=prepared make bench         pgbench -M prepared: each statement
#                                    prepared once, bound every time
set -euo pipefail
cd "$(dirname "$0")/.."
HM=${HM:-bin/harbormaster}
CLIENTS=${CLIENTS:-16}
SECONDS_EACH=${SECONDS_EACH:-10}
REPEAT=${REPEAT:-3}
MODE=${MODE:-simple}
bindir=$(pg_config --bindir)
pgbench=$bindir/pgbench
[[ -x $pgbench ]] || { echo "make bench: pgbench not found in $bindir (Debian: apt-get install postgresql)" >&2; exit 1; }
pgbouncer=$(command -v pgbouncer || true)
[[ -z $pgbouncer && -x /usr/sbin/pgbouncer ]] && pgbouncer=/usr/sbin/pgbouncer

work=$(mktemp -d)
demo_pid=
bouncer_pid=
cleanup() {
	[[ -n $bouncer_pid ]] && kill "$bouncer_pid" 2>/dev/null && wait "$bouncer_pid" 2>/dev/null || true
	[[ -n $demo_pid ]] && kill "$demo_pid" 2>/dev/null && wait "$demo_pid" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

echo "make bench: starting the demo (a throwaway PostgreSQL and a node)..." >&2
# wait_for FILE PID LOG SECONDS WHAT: until FILE is written, while PID lives
# (else its LOG and exit), at most SECONDS.
wait_for() {
	local i
	for ((i = 0; i < $4 * 10; i++)); do
		[[ -s $1 ]] && return 0
		kill -0 "$2" 2>/dev/null || { cat "$3" >&2; exit 1; }
		sleep 0.1
	done
	echo "make bench: $5 in $4 s" >&2
	exit 1
}
"$HM" demo --dir "$work/demo" --info "$work/info.json" --listen 127.0.0.1:0 >"$work/demo.log" 2>&1 &
demo_pid=$!
wait_for "$work/info.json" "$demo_pid" "$work/demo.log" 120 "the demo wrote no --info"
info() { python3 -c "import json,sys; print(json.load(open('$work/info.json'))['$1'])"; }
direct=$(info target_dsn)
wire=$(info pg_url)
"$HM" bench --info "$work/info.json" --delegation-only >/dev/null

targets=("direct=$direct" "wire=$wire")
if [[ $MODE == prepared && -n $pgbouncer ]]; then
	# PgBouncer before 1.21 in transaction pooling loses a connection's
	# prepared statements between transactions.
	echo "make bench: -M prepared: PgBouncer's column is left out (transaction pooling and prepared statements)" >&2
	pgbouncer=
fi
if [[ -n $pgbouncer ]]; then
	# PgBouncer as harbormaster bench --pgbouncer starts it (bench.StartPgBouncer).
	"$HM" bench --info "$work/info.json" --pgbouncer "$pgbouncer" --pgbouncer-only --clients "$CLIENTS" >"$work/bouncer.url" 2>"$work/bouncer.log" &
	bouncer_pid=$!
	wait_for "$work/bouncer.url" "$bouncer_pid" "$work/bouncer.log" 10 "PgBouncer did not start"
	bouncer=$(cat "$work/bouncer.url")
	targets=("direct=$direct" "pgbouncer=$bouncer" "wire=$wire")
elif [[ $MODE != prepared ]]; then
	echo "make bench: pgbouncer is not installed (Debian: apt-get install pgbouncer); its column is left out" >&2
fi

echo "make bench: pgbench -n -M $MODE, $CLIENTS clients, $SECONDS_EACH s a run, $REPEAT repetitions, interleaved" >&2
declare -A tps
for script in update read; do
	for r in $(seq 1 "$REPEAT"); do
		for t in "${targets[@]}"; do
			name=${t%%=*}
			conn=${t#*=}
			out=$("$pgbench" -n -M "$MODE" -c "$CLIENTS" -j 2 -T "$SECONDS_EACH" -f "scripts/pgbench/$script.sql" "$conn" 2>&1) || {
				echo "$out" >&2
				exit 1
			}
			v=$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' <<<"$out" | head -1)
			failed=$(sed -n 's/^number of failed transactions: \([0-9]*\).*/\1/p' <<<"$out")
			[[ ${failed:-0} == 0 ]] || { echo "make bench: $name $script: $failed failed transactions" >&2; echo "$out" >&2; exit 1; }
			tps[$script,$name]="${tps[$script,$name]:-} $v"
			printf '%-7s %-10s run %d: %10.0f statements/s\n' "$script" "$name" "$r" "$v"
		done
	done
done
echo
printf '%-7s %-10s %s\n' workload target "statements/s (each run) and ratio to direct (mean)"
for script in update read; do
	for t in "${targets[@]}"; do
		name=${t%%=*}
		python3 - "$script" "$name" "${tps[$script,$name]}" "${tps[$script,direct]}" <<'PY'
import sys
s, n, v, d = sys.argv[1], sys.argv[2], [float(x) for x in sys.argv[3].split()], [float(x) for x in sys.argv[4].split()]
ratios = [a / b for a, b in zip(v, d)]
print(f"{s:<7} {n:<10} {' '.join(f'{x:,.0f}' for x in v):<32} ratio {sum(ratios)/len(ratios):.3f}")
PY
	done
done
echo
echo "make bench: one-client latencies and CPU per statement (harbormaster bench, over the wire front)" >&2
bargs=(--info "$work/info.json" --wire demo --no-delegation)
[[ -n $pgbouncer ]] && bargs+=(--pgbouncer "$pgbouncer")
"$HM" bench "${bargs[@]}"
