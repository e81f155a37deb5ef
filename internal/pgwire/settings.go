package pgwire

import (
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
	pg "github.com/pganalyze/pg_query_go/v6"

	"github.com/harbormaster-dev/harbormaster/internal/sqlcheck"
)

// settings are the session settings the front answers itself. Governed
// statements run with the target's settings, which the operator fixes
// (search_path, timeouts); a client may only set what changes nothing
// about them, or what only tightens them.
type settings struct {
	facts sessionFacts
	vals  map[string]string
	// reported are the ones sent as ParameterStatus, which drivers expect.
	reported map[string]bool
	// defaults are the values RESET restores: the server's, with the
	// startup message's applied, as in PostgreSQL.
	defaults map[string]string
}

// sessionFacts are what a session knows of itself when it starts. None of
// it is read from the target: the version is the front's, the search path
// and the limits are the operator's, which the Pilot pins for every
// statement, so two targets that differ only outside the agent's bound
// give the same facts (DESIGN.md invariant 10).
type sessionFacts struct {
	version   string // server_version, as the ParameterStatus says
	principal string
	target    string
	// searchPath is the search path the target's Pilot pins (its
	// catalog's, which the delegations' bounds record); nil: not known
	// yet (a remote Pilot whose catalog was never read).
	searchPath []string
	// limits are the operator's timeouts for the target; nil: they are
	// set in the config of the target's own Pilot process, unknown here.
	limits *Timeouts
}

// Settings whose value the front knows but a client may not change
// (SET of them is refused), besides the reported ones.
const (
	maxIdentifierLength = "63" // NAMEDATALEN - 1
	isolationLevel      = "read committed"
)

func newSettings(f sessionFacts, startup map[string]string) (*settings, *wireError) {
	s := &settings{facts: f, vals: map[string]string{
		"server_version":                f.version,
		"server_version_num":            versionNum(f.version),
		"server_encoding":               "UTF8",
		"client_encoding":               "UTF8",
		"datestyle":                     "ISO, MDY",
		"intervalstyle":                 "postgres",
		"integer_datetimes":             "on",
		"standard_conforming_strings":   "on",
		"timezone":                      "UTC",
		"application_name":              "",
		"is_superuser":                  "off",
		"session_authorization":         f.principal,
		"default_transaction_read_only": "off",
		"in_hot_standby":                "off",
		"extra_float_digits":            "1",
		"client_min_messages":           "notice",
		"bytea_output":                  "hex",
		"max_identifier_length":         maxIdentifierLength,
		// The Pilot pins read committed for every statement's transaction.
		"transaction_isolation":         isolationLevel,
		"default_transaction_isolation": isolationLevel,
		"transaction_read_only":         "off",
		// No transaction is held open between statements, so none is
		// ever idle in one: no limit, unless the operator sets one.
		"idle_in_transaction_session_timeout": "0",
	}, reported: map[string]bool{"server_version": true, "server_encoding": true, "client_encoding": true, "datestyle": true,
		"intervalstyle": true, "integer_datetimes": true, "standard_conforming_strings": true, "timezone": true,
		"application_name": true, "is_superuser": true, "session_authorization": true,
		"default_transaction_read_only": true, "in_hot_standby": true}}
	if f.searchPath != nil {
		s.vals["search_path"] = searchPathText(f.searchPath)
	}
	if f.limits != nil {
		s.vals["statement_timeout"] = millisText(f.limits.Statement.Milliseconds())
		s.vals["lock_timeout"] = millisText(f.limits.Lock.Milliseconds())
		s.vals["idle_in_transaction_session_timeout"] = millisText(f.limits.IdleInTransaction.Milliseconds())
	}
	s.defaults = maps.Clone(s.vals)
	if werr := s.applyStartup(startup); werr != nil {
		return nil, werr
	}
	s.defaults = maps.Clone(s.vals)
	return s, nil
}

// versionNum is server_version_num for a version: 15.0 is 150000, 9.6.3
// 90603.
func versionNum(v string) string {
	var n [3]int
	parts := strings.SplitN(v, ".", 3)
	for i, p := range parts {
		end := 0
		for end < len(p) && p[end] >= '0' && p[end] <= '9' {
			end++
		}
		n[i], _ = strconv.Atoi(p[:end])
		if end < len(p) {
			break
		}
	}
	if n[0] >= 10 {
		return strconv.Itoa(n[0]*10000 + n[1])
	}
	return strconv.Itoa(n[0]*10000 + n[1]*100 + n[2])
}

// searchPathText is a search path as SHOW shows it, each schema quoted as
// the Pilot quotes it when it pins the path.
func searchPathText(path []string) string {
	q := make([]string, len(path))
	for i, p := range path {
		q[i] = sqlcheck.QuoteIdent(p)
	}
	return strings.Join(q, ", ")
}

// startupParams are startup parameters that are no setting, or whose
// value the front has taken already (client_encoding is checked at
// login; TimeZone is UTC, which the ParameterStatus tells the client).
var startupParams = map[string]bool{"user": true, "database": true, "replication": true, "fallback_application_name": true,
	"client_encoding": true, "timezone": true}

// applyStartup applies the startup message's settings as SET would, and
// refuses one SET would refuse: a client that asks at startup for a
// setting (options=-c default_transaction_read_only=on, a
// statement_timeout) must not get a session without it and no word of
// it.
func (s *settings) applyStartup(startup map[string]string) *wireError {
	names := make([]string, 0, len(startup))
	for k := range startup {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		name, v := strings.ToLower(k), startup[k]
		switch {
		case startupParams[name], strings.HasPrefix(name, "_pq_."):
		case name == "options":
			opts, err := startupOptions(v)
			if err != nil {
				return err
			}
			for _, o := range opts {
				if err := s.startupSet(o[0], o[1]); err != nil {
					return err
				}
			}
		default:
			if err := s.startupSet(name, v); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *settings) startupSet(name, value string) *wireError {
	name = strings.ReplaceAll(strings.ToLower(name), "-", "_")
	args := []*pg.Node{pg.MakeAConstStrNode(value, -1)}
	if name == "search_path" {
		// A list, as PostgreSQL reads the text of a list setting.
		schemas, ok := splitIdentifiers(value)
		if !ok {
			return fatal(stateInvalidParameter, fmt.Sprintf("startup parameter search_path: invalid list syntax in %q", value))
		}
		args = args[:0]
		for _, sc := range schemas {
			args = append(args, pg.MakeAConstStrNode(sc, -1))
		}
	}
	_, err := s.setOne(&pg.VariableSetStmt{Kind: pg.VariableSetKind_VAR_SET_VALUE, Name: name, Args: args})
	if err != nil {
		err.Fatal = true
		err.Message = "startup parameter " + name + ": " + err.Message
	}
	return err
}

// splitIdentifiers reads a list of identifiers as PostgreSQL reads a list
// setting's text (SplitIdentifierString): separated by commas, each
// double-quoted (kept as written, "" a quote) or not (folded to lower
// case).
func splitIdentifiers(v string) ([]string, bool) {
	var out []string
	i := 0
	skip := func() {
		for i < len(v) && (v[i] == ' ' || v[i] == '\t' || v[i] == '\n' || v[i] == '\r') {
			i++
		}
	}
	for {
		skip()
		var id strings.Builder
		if i < len(v) && v[i] == '"' {
			i++
			for {
				if i >= len(v) {
					return nil, false
				}
				if v[i] == '"' {
					if i+1 < len(v) && v[i+1] == '"' {
						id.WriteByte('"')
						i += 2
						continue
					}
					i++
					break
				}
				id.WriteByte(v[i])
				i++
			}
			if id.Len() == 0 {
				return nil, false
			}
		} else {
			start := i
			for i < len(v) && v[i] != ',' && v[i] != ' ' && v[i] != '\t' && v[i] != '\n' && v[i] != '\r' {
				i++
			}
			if i == start {
				return nil, false
			}
			id.WriteString(strings.ToLower(v[start:i]))
		}
		out = append(out, id.String())
		skip()
		if i == len(v) {
			return out, true
		}
		if v[i] != ',' {
			return nil, false
		}
		i++
	}
}

// startupOptions reads the options startup parameter (what PGOPTIONS
// holds): -c NAME=VALUE or --NAME=VALUE, separated by spaces, a
// backslash escaping the next character. Any other command-line switch
// is refused.
func startupOptions(v string) ([][2]string, *wireError) {
	var args []string
	var cur strings.Builder
	started := false
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c == '\\' && i+1 < len(v):
			i++
			cur.WriteByte(v[i])
			started = true
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			if started {
				args, started = append(args, cur.String()), false
				cur.Reset()
			}
		default:
			cur.WriteByte(c)
			started = true
		}
	}
	if started {
		args = append(args, cur.String())
	}
	var out [][2]string
	for i := 0; i < len(args); i++ {
		a := args[i]
		var kv string
		switch {
		case a == "-c" && i+1 < len(args):
			i++
			kv = args[i]
		case strings.HasPrefix(a, "-c"):
			kv = a[2:]
		case strings.HasPrefix(a, "--"):
			kv = a[2:]
		default:
			return nil, fatal(stateFeature, fmt.Sprintf("startup option %q is not supported: only -c NAME=VALUE of a setting this server takes", a))
		}
		name, value, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, fatal(stateSyntax, fmt.Sprintf("startup option %q has no value: -c NAME=VALUE", a))
		}
		out = append(out, [2]string{name, value})
	}
	return out, nil
}

// displayName is how PostgreSQL spells a reported setting.
var displayName = map[string]string{"datestyle": "DateStyle", "intervalstyle": "IntervalStyle", "timezone": "TimeZone"}

func statusName(k string) string {
	if d, ok := displayName[k]; ok {
		return d
	}
	return k
}

func (s *settings) statuses() []*pgproto3.ParameterStatus {
	var names []string
	for k := range s.reported {
		names = append(names, k)
	}
	sort.Strings(names)
	out := make([]*pgproto3.ParameterStatus, 0, len(names))
	for _, k := range names {
		out = append(out, &pgproto3.ParameterStatus{Name: statusName(k), Value: s.vals[k]})
	}
	return out
}

// set answers one or more SET/RESET statements.
func (s *settings) set(tree *pg.ParseResult) (*result, *wireError) {
	res := &result{}
	// All or none, as PostgreSQL's implicit transaction: a refused one
	// undoes those before it.
	before := maps.Clone(s.vals)
	for _, st := range tree.Stmts {
		v := st.Stmt.GetVariableSetStmt()
		r, err := s.setOne(v)
		if err != nil {
			s.vals = before
			return nil, err
		}
		res.statuses = append(res.statuses, r.statuses...)
		res.tag = r.tag
	}
	return res, nil
}

// resetAll is RESET ALL: every setting back to its session default.
func (s *settings) resetAll() *result {
	res := &result{tag: "RESET"}
	for _, k := range slices.Sorted(maps.Keys(s.defaults)) {
		d := s.defaults[k]
		if s.vals[k] == d {
			continue
		}
		s.vals[k] = d
		if s.reported[k] {
			res.statuses = append(res.statuses, &pgproto3.ParameterStatus{Name: statusName(k), Value: d})
		}
	}
	return res
}

func (s *settings) setOne(v *pg.VariableSetStmt) (*result, *wireError) {
	name := strings.ToLower(v.Name)
	tag := "SET"
	var value string
	reset := false
	switch v.Kind {
	case pg.VariableSetKind_VAR_RESET_ALL:
		return s.resetAll(), nil
	case pg.VariableSetKind_VAR_RESET, pg.VariableSetKind_VAR_SET_DEFAULT:
		if v.Kind == pg.VariableSetKind_VAR_RESET {
			tag = "RESET"
		}
		d, ok := s.defaults[name]
		if !ok {
			return nil, s.unsupportedSet(name)
		}
		value, reset = d, true
	case pg.VariableSetKind_VAR_SET_VALUE:
		var parts []string
		for _, a := range v.Args {
			parts = append(parts, constString(a))
		}
		value = strings.Join(parts, ", ")
	case pg.VariableSetKind_VAR_SET_MULTI:
		return nil, &wireError{Code: stateFeature, Message: "transaction characteristics cannot be set: each statement runs in its own governed transaction"}
	default:
		return nil, s.unsupportedSet(name)
	}
	up := strings.ToUpper(strings.TrimSpace(value))
	switch name {
	case "application_name":
		if len(value) > 63 {
			value = value[:63]
		}
	case "extra_float_digits", "client_min_messages":
		// No effect: values are rendered at full precision, and the front
		// sends no notices.
	case "client_encoding":
		if !isUTF8(value) {
			return nil, errorf(stateInvalidParameter, fmt.Sprintf("client_encoding %q is not supported: use UTF8", value))
		}
		value = "UTF8"
	case "datestyle":
		if !reset && !isoMDY(up) {
			return nil, errorf(stateInvalidParameter, "only DateStyle ISO, MDY is supported: the Pilot reads and writes dates so")
		}
		value = "ISO, MDY"
	case "timezone":
		if !reset && !utcZone(v.Args) {
			return nil, &wireError{Code: stateInvalidParameter, Message: fmt.Sprintf("only TimeZone UTC is supported: times are sent in UTC (%q is not UTC)", value),
				Hint: "SET TIME ZONE 'UTC' (or Etc/UTC, GMT, an offset of 0)"}
		}
		value = "UTC"
	case "intervalstyle":
		if up != "POSTGRES" {
			return nil, errorf(stateInvalidParameter, "only IntervalStyle postgres is supported")
		}
		value = "postgres"
	case "standard_conforming_strings":
		if up != "ON" && up != "TRUE" && up != "1" {
			return nil, errorf(stateInvalidParameter, "standard_conforming_strings is always on")
		}
		value = "on"
	case "bytea_output":
		if up != "HEX" {
			return nil, errorf(stateInvalidParameter, "only bytea_output hex is supported")
		}
		value = "hex"
	case "session_authorization":
		// The session is its agent's: it may name itself, no one else.
		if value != s.facts.principal {
			return nil, errorf(stateInsufficientPrivilege, fmt.Sprintf("permission denied to set session authorization %q: this session is %s's", value, s.facts.principal))
		}
	case "search_path":
		if !reset {
			if werr := s.checkSearchPath(v.Args); werr != nil {
				return nil, werr
			}
		}
	case "statement_timeout", "lock_timeout", "idle_in_transaction_session_timeout":
		if !reset {
			var werr *wireError
			if value, werr = s.checkTimeout(name, value); werr != nil {
				return nil, werr
			}
		}
	default:
		return nil, s.unsupportedSet(name)
	}
	if _, ok := s.vals[name]; !ok {
		// A setting the session does not know (a limit set in a remote
		// Pilot's own config).
		return nil, s.unsupportedSet(name)
	}
	s.vals[name] = value
	res := &result{tag: tag}
	if s.reported[name] {
		res.statuses = append(res.statuses, &pgproto3.ParameterStatus{Name: statusName(name), Value: value})
	}
	return res, nil
}

// isoMDY reports a DateStyle that keeps ISO output and month-day-year
// input, what the Pilot pins: "ISO", "ISO, MDY", "MDY", "US", ...
func isoMDY(up string) bool {
	fields := strings.FieldsFunc(up, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' })
	if len(fields) == 0 {
		return false
	}
	for _, f := range fields {
		switch f {
		case "ISO", "MDY", "US", "NONEURO", "NONEUROPEAN", "DEFAULT":
		default:
			return false
		}
	}
	return true
}

// utcZones are the time zone names equal to UTC at every instant.
var utcZones = map[string]bool{"UTC": true, "ETC/UTC": true, "GMT": true, "ETC/GMT": true, "UCT": true, "ETC/UCT": true,
	"UNIVERSAL": true, "ETC/UNIVERSAL": true, "ZULU": true, "ETC/ZULU": true, "GREENWICH": true, "ETC/GREENWICH": true,
	"GMT0": true, "ETC/GMT0": true, "GMT+0": true, "ETC/GMT+0": true, "GMT-0": true, "ETC/GMT-0": true, "UTC0": true}

// zeroOffset is an offset of zero written as hours and minutes (+00:00).
var zeroOffset = regexp.MustCompile(`^[+-]?0+(:0+){0,2}(\.0*)?$`)

// utcZone reports a SET TIME ZONE value equal to UTC: a name of UTC, a
// number of hours that is 0, or INTERVAL '+00:00' (HOUR TO MINUTE).
func utcZone(args []*pg.Node) bool {
	if len(args) != 1 {
		return false
	}
	a := args[0]
	if tc := a.GetTypeCast(); tc != nil {
		names := tc.TypeName.GetNames()
		if len(names) == 0 || names[len(names)-1].GetString_().GetSval() != "interval" {
			return false
		}
		return zeroOffset.MatchString(strings.TrimSpace(constString(tc.Arg)))
	}
	v := strings.TrimSpace(constString(a))
	if f, err := strconv.ParseFloat(v, 64); err == nil {
		return f == 0
	}
	return utcZones[strings.ToUpper(v)] || zeroOffset.MatchString(v)
}

// checkSearchPath takes SET search_path only when it names the path the
// Pilot pins: every governed statement runs with that one.
func (s *settings) checkSearchPath(args []*pg.Node) *wireError {
	var asked []string
	for _, a := range args {
		asked = append(asked, constString(a))
	}
	pinned := s.facts.searchPath
	if pinned != nil && slices.Equal(asked, pinned) {
		return nil
	}
	werr := &wireError{Code: stateFeature, Message: "SET search_path is not supported: governed statements run with the search path the operator pins for the target"}
	if pinned != nil {
		werr.Message = fmt.Sprintf("search_path is pinned to %s for this target: governed statements run with it, and SET may only name it", searchPathText(pinned))
		werr.Hint = "qualify names with their schema, or SET search_path TO " + searchPathText(pinned)
	}
	return werr
}

// checkTimeout takes a client's timeout only when it keeps the operator's
// limit for the target or tightens it, and returns it as SHOW shows it.
//
// The tighter value is the session's setting, which SHOW reports; the
// Pilot runs every statement under the operator's limit, which stays in
// force: a statement is never allowed longer than that, but it may run
// past the session's shorter one (the Pilot takes no limit per session).
// A client that needs its own deadline has its driver's, which cancels.
func (s *settings) checkTimeout(name, value string) (string, *wireError) {
	ms, werr := parseMillis(name, value)
	if werr != nil {
		return "", werr
	}
	limits := s.facts.limits
	if limits == nil {
		if name != "idle_in_transaction_session_timeout" {
			return "", s.unsupportedSet(name)
		}
		limits = &Timeouts{}
	}
	limit := map[string]time.Duration{"statement_timeout": limits.Statement, "lock_timeout": limits.Lock,
		"idle_in_transaction_session_timeout": limits.IdleInTransaction}[name].Milliseconds()
	if limit != 0 && (ms == 0 || ms > limit) {
		what := millisText(ms)
		if ms == 0 {
			what = "0 (no limit)"
		}
		return "", &wireError{Code: stateInsufficientPrivilege,
			Message: fmt.Sprintf("%s %s would loosen the operator's limit of %s for this target: a session may only keep it or set a shorter one", name, what, millisText(limit)),
			Hint:    fmt.Sprintf("SET %s TO '%s', or less", name, millisText(limit))}
	}
	return millisText(ms), nil
}

// timeUnits are the units of a setting in milliseconds, as PostgreSQL
// takes them (case matters).
var timeUnits = map[string]float64{"us": 0.001, "ms": 1, "s": 1000, "min": 60000, "h": 3600000, "d": 86400000}

var numberPrefix = regexp.MustCompile(`^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?`)

// parseMillis reads a setting in milliseconds as PostgreSQL does: a
// number, optionally a unit, rounded to a whole number of milliseconds
// within 0 .. 2147483647.
func parseMillis(name, value string) (int64, *wireError) {
	v := strings.TrimSpace(value)
	num := numberPrefix.FindString(v)
	f, err := strconv.ParseFloat(num, 64)
	unit := strings.TrimSpace(v[len(num):])
	mult, ok := timeUnits[unit]
	if unit == "" {
		mult, ok = 1, true
	}
	if num == "" || err != nil || !ok {
		werr := errorf(stateInvalidParameter, fmt.Sprintf("invalid value for parameter %q: %q", name, value))
		if num != "" && !ok {
			werr.Hint = `Valid units for this parameter are "us", "ms", "s", "min", "h", and "d".`
		}
		return 0, werr
	}
	ms := math.RoundToEven(f * mult)
	if ms < 0 || ms > math.MaxInt32 {
		return 0, errorf(stateInvalidParameter, fmt.Sprintf("%s ms is outside the valid range for parameter %q (0 .. 2147483647)", strconv.FormatFloat(ms, 'f', -1, 64), name))
	}
	return int64(ms), nil
}

// millisText is a setting in milliseconds as SHOW shows it: in the
// largest unit that holds it exactly (5s, 1500ms, 1min), 0 for none.
func millisText(ms int64) string {
	if ms == 0 {
		return "0"
	}
	for _, u := range []struct {
		name string
		n    int64
	}{{"d", 86400000}, {"h", 3600000}, {"min", 60000}, {"s", 1000}} {
		if ms%u.n == 0 {
			return strconv.FormatInt(ms/u.n, 10) + u.name
		}
	}
	return strconv.FormatInt(ms, 10) + "ms"
}

func (s *settings) unsupportedSet(name string) *wireError {
	werr := &wireError{Code: stateFeature, Message: fmt.Sprintf("SET %s is not supported: governed statements run with the target's settings, which the operator fixes", name),
		Hint: "the front accepts application_name, extra_float_digits, client_encoding UTF8, DateStyle ISO, TimeZone UTC, IntervalStyle postgres, client_min_messages, bytea_output hex, the pinned search_path, and statement_timeout, lock_timeout and idle_in_transaction_session_timeout no longer than the operator's"}
	if (name == "statement_timeout" || name == "lock_timeout") && s.facts.limits == nil {
		werr.Message = fmt.Sprintf("SET %s is not supported for this target: its limit is set in the config of its own Pilot process, which this front does not know, so it cannot tell whether yours is shorter", name)
		werr.Hint = ""
	}
	return werr
}

// show answers SHOW of a setting the front keeps. The column is named as
// PostgreSQL names the setting (TimeZone, DateStyle, transaction_isolation).
func (s *settings) show(v *pg.VariableShowStmt) (*result, *wireError) {
	name := strings.ToLower(v.Name)
	val, ok := s.vals[name]
	if !ok {
		if name == "statement_timeout" || name == "lock_timeout" || name == "search_path" {
			return nil, errorf(stateFeature, fmt.Sprintf("%s is not known at this front: the operator sets it in the target's Pilot config, which this front was not given", name))
		}
		return nil, errorf(stateUndefinedObject, fmt.Sprintf("unrecognized configuration parameter %q", v.Name))
	}
	return &result{hasRows: true, tag: "SHOW", cols: []column{{statusName(name), oidText}}, rows: [][]any{{val}}}, nil
}
