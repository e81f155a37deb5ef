package pgwire

import (
	"fmt"
	"maps"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5/pgproto3"
	pg "github.com/pganalyze/pg_query_go/v6"
)

// settings are the session settings the front answers itself. Governed
// statements run with the target's settings, which the operator fixes
// (search_path, timeouts); a client may only set what changes nothing
// about them.
type settings struct {
	vals map[string]string
	// reported are the ones sent as ParameterStatus, which drivers expect.
	reported map[string]bool
	defaults map[string]string
}

func newSettings(version, principal string, startup map[string]string) *settings {
	s := &settings{vals: map[string]string{
		"server_version":                version,
		"server_encoding":               "UTF8",
		"client_encoding":               "UTF8",
		"datestyle":                     "ISO, MDY",
		"intervalstyle":                 "postgres",
		"integer_datetimes":             "on",
		"standard_conforming_strings":   "on",
		"timezone":                      "UTC",
		"application_name":              "",
		"is_superuser":                  "off",
		"session_authorization":         principal,
		"default_transaction_read_only": "off",
		"in_hot_standby":                "off",
		"extra_float_digits":            "1",
		"client_min_messages":           "notice",
		"bytea_output":                  "hex",
	}, reported: map[string]bool{"server_version": true, "server_encoding": true, "client_encoding": true, "datestyle": true,
		"intervalstyle": true, "integer_datetimes": true, "standard_conforming_strings": true, "timezone": true,
		"application_name": true, "is_superuser": true, "session_authorization": true,
		"default_transaction_read_only": true, "in_hot_standby": true}}
	s.defaults = map[string]string{}
	for k, v := range s.vals {
		s.defaults[k] = v
	}
	_ = s.applyStartup(startup) // login refused a startup it cannot apply
	return s
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
	_, err := s.setOne(&pg.VariableSetStmt{Kind: pg.VariableSetKind_VAR_SET_VALUE, Name: strings.ReplaceAll(strings.ToLower(name), "-", "_"),
		Args: []*pg.Node{pg.MakeAConstStrNode(value, -1)}})
	if err != nil {
		err.Fatal = true
		err.Message = "startup parameter " + name + ": " + err.Message
	}
	return err
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

func (s *settings) setOne(v *pg.VariableSetStmt) (*result, *wireError) {
	name := strings.ToLower(v.Name)
	tag := "SET"
	var value string
	switch v.Kind {
	case pg.VariableSetKind_VAR_RESET_ALL:
		res := &result{tag: "RESET"}
		for k, d := range s.defaults {
			if k == "application_name" || s.vals[k] == d {
				continue
			}
			s.vals[k] = d
			if s.reported[k] {
				res.statuses = append(res.statuses, &pgproto3.ParameterStatus{Name: statusName(k), Value: d})
			}
		}
		return res, nil
	case pg.VariableSetKind_VAR_RESET, pg.VariableSetKind_VAR_SET_DEFAULT:
		if v.Kind == pg.VariableSetKind_VAR_RESET {
			tag = "RESET"
		}
		d, ok := s.defaults[name]
		if !ok {
			return nil, unsupportedSet(name)
		}
		value = d
	case pg.VariableSetKind_VAR_SET_VALUE:
		var parts []string
		for _, a := range v.Args {
			parts = append(parts, constString(a))
		}
		value = strings.Join(parts, ", ")
	case pg.VariableSetKind_VAR_SET_MULTI:
		return nil, &wireError{Code: stateFeature, Message: "transaction characteristics cannot be set: each statement runs in its own governed transaction"}
	default:
		return nil, unsupportedSet(name)
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
		if !strings.Contains(up, "ISO") {
			return nil, errorf(stateInvalidParameter, "only DateStyle ISO is supported")
		}
		value = "ISO, MDY"
	case "timezone":
		if up != "UTC" && up != "ETC/UTC" && up != "GMT" && up != "0" && up != "+00" && up != "Z" {
			return nil, errorf(stateInvalidParameter, "only TimeZone UTC is supported: times are sent in UTC")
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
	default:
		return nil, unsupportedSet(name)
	}
	s.vals[name] = value
	res := &result{tag: tag}
	if s.reported[name] {
		res.statuses = append(res.statuses, &pgproto3.ParameterStatus{Name: statusName(name), Value: value})
	}
	return res, nil
}

func unsupportedSet(name string) *wireError {
	return &wireError{Code: stateFeature, Message: fmt.Sprintf("SET %s is not supported: governed statements run with the target's settings, which the operator fixes", name),
		Hint: "the front accepts application_name, extra_float_digits, client_encoding UTF8, DateStyle ISO, TimeZone UTC, IntervalStyle postgres, client_min_messages, bytea_output hex"}
}

// show answers SHOW of a setting the front keeps.
func (s *settings) show(v *pg.VariableShowStmt) (*result, *wireError) {
	name := strings.ToLower(v.Name)
	val, ok := s.vals[name]
	if !ok {
		return nil, errorf(stateUndefinedObject, fmt.Sprintf("unrecognized configuration parameter %q", v.Name))
	}
	return &result{hasRows: true, tag: "SHOW", cols: []column{{name, oidText}}, rows: [][]any{{val}}}, nil
}
