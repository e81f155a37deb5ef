package sqlcheck

import "sort"

// The allow-lists below are the only functions, operators and cast types a
// statement (or a fence or check) may use. They hold side-effect-free
// built-ins of pg_catalog. Anything else refers: docs/security.md explains
// each excluded family. Names are matched after the parser's case folding,
// unqualified or qualified with pg_catalog only.

var allowedFunctions = func() map[string]bool {
	m := map[string]bool{}
	for _, group := range [][]string{
		// Aggregates.
		{"count", "sum", "avg", "min", "max", "bool_and", "bool_or", "every", "string_agg", "array_agg",
			"json_agg", "jsonb_agg", "json_object_agg", "jsonb_object_agg", "stddev", "stddev_pop", "stddev_samp",
			"variance", "var_pop", "var_samp", "percentile_cont", "percentile_disc", "mode", "bit_and", "bit_or"},
		// Window functions.
		{"row_number", "rank", "dense_rank", "percent_rank", "cume_dist", "ntile", "lag", "lead",
			"first_value", "last_value", "nth_value"},
		// Strings.
		{"lower", "upper", "initcap", "length", "char_length", "character_length", "octet_length", "bit_length",
			"substr", "substring", "left", "right", "strpos", "position", "replace", "translate", "reverse",
			"repeat", "lpad", "rpad", "trim", "btrim", "ltrim", "rtrim", "concat", "concat_ws", "split_part",
			"starts_with", "overlay", "ascii", "chr", "md5", "sha256", "encode", "decode", "quote_literal",
			"quote_ident", "quote_nullable", "format", "regexp_replace", "regexp_match", "regexp_matches",
			"regexp_like", "regexp_count", "regexp_instr", "regexp_substr", "regexp_split_to_array",
			"string_to_array", "array_to_string", "similar_to_escape", "like_escape", "normalize", "is_normalized",
			"to_hex", "unistr"},
		// Numbers.
		{"abs", "ceil", "ceiling", "floor", "round", "trunc", "mod", "div", "power", "pow", "sqrt", "cbrt",
			"exp", "ln", "log", "log10", "sign", "greatest", "least", "width_bucket", "scale", "gcd", "lcm",
			"numeric", "int4", "int8", "float8", "pi", "degrees", "radians"},
		// Dates and times. now() and friends are stable within a transaction.
		{"now", "transaction_timestamp", "statement_timestamp", "date_trunc", "date_part", "extract", "age",
			"make_date", "make_time", "make_timestamp", "make_timestamptz", "make_interval", "to_char",
			"to_date", "to_timestamp", "to_number", "justify_days", "justify_hours", "justify_interval",
			"date_bin", "isfinite", "timezone"},
		// JSON.
		{"to_json", "to_jsonb", "json_build_object", "jsonb_build_object", "json_build_array", "jsonb_build_array",
			"json_object", "jsonb_object", "json_extract_path", "jsonb_extract_path", "json_extract_path_text",
			"jsonb_extract_path_text", "json_array_length", "jsonb_array_length", "jsonb_typeof", "json_typeof",
			"jsonb_strip_nulls", "json_strip_nulls", "jsonb_set", "jsonb_insert", "jsonb_pretty",
			"jsonb_path_exists", "jsonb_path_match", "jsonb_path_query_first", "jsonb_array_elements",
			"jsonb_array_elements_text", "json_array_elements", "json_array_elements_text", "jsonb_each",
			"jsonb_each_text", "json_each", "json_each_text", "jsonb_object_keys", "json_object_keys",
			"row_to_json", "array_to_json"},
		// Arrays and sets.
		{"array_length", "cardinality", "array_position", "array_positions", "array_append", "array_prepend",
			"array_cat", "array_remove", "array_replace", "array_lower", "array_upper", "array_ndims", "unnest",
			"generate_series", "generate_subscripts"},
		// Conditionals, comparison and misc pure functions.
		{"coalesce", "nullif", "num_nonnulls", "num_nulls", "gen_random_uuid"},
	} {
		for _, f := range group {
			m[f] = true
		}
	}
	return m
}()

// AllowedFunction reports whether a pg_catalog function name is on the
// allow-list.
func AllowedFunction(name string) bool { return allowedFunctions[name] }

// AllowedFunctions returns the allow-list, sorted (for docs and tests).
func AllowedFunctions() []string {
	out := make([]string, 0, len(allowedFunctions))
	for f := range allowedFunctions {
		out = append(out, f)
	}
	sort.Strings(out)
	return out
}

var allowedOperators = map[string]bool{
	"=": true, "<>": true, "!=": true, "<": true, ">": true, "<=": true, ">=": true,
	"+": true, "-": true, "*": true, "/": true, "%": true, "^": true, "|/": true, "||/": true, "@": true,
	"&": true, "|": true, "#": true, "~": true, "<<": true, ">>": true,
	"||": true,
	"~~": true, "!~~": true, "~~*": true, "!~~*": true, "~*": true, "!~": true, "!~*": true,
	"->": true, "->>": true, "#>": true, "#>>": true, "@>": true, "<@": true, "?": true, "?|": true, "?&": true,
	"&&": true, "#-": true, "@?": true, "@@": true,
}

// AllowedOperators returns the operator allow-list, sorted.
func AllowedOperators() []string {
	out := make([]string, 0, len(allowedOperators))
	for o := range allowedOperators {
		out = append(out, o)
	}
	sort.Strings(out)
	return out
}

// allowedTypes are the cast targets. reg* types are excluded: their input
// functions look names up in the system catalog.
var allowedTypes = map[string]bool{
	"bool": true, "boolean": true,
	"int2": true, "int4": true, "int8": true, "smallint": true, "integer": true, "int": true, "bigint": true,
	"numeric": true, "decimal": true, "float4": true, "float8": true, "real": true, "double precision": true,
	"text": true, "varchar": true, "bpchar": true, "char": true, "character": true, "character varying": true,
	"date": true, "time": true, "timetz": true, "timestamp": true, "timestamptz": true, "interval": true,
	"uuid": true, "json": true, "jsonb": true, "bytea": true, "inet": true, "cidr": true, "macaddr": true,
	"bit": true, "varbit": true, "money": true,
}

// AllowedTypes returns the cast-type allow-list, sorted.
func AllowedTypes() []string {
	out := make([]string, 0, len(allowedTypes))
	for t := range allowedTypes {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}
