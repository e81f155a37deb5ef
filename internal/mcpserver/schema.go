package mcpserver

import "time"

// The output schemas name the fields an agent relies on and allow others,
// so that the HTTP API's JSON (which the structured content repeats) can
// grow without breaking a tool. They are written out rather than inferred
// from the Go types for the same reason.

type schema = map[string]any

func str(desc string) schema { return schema{"type": "string", "description": desc} }

func obj(required []string, props schema) schema {
	return schema{"type": "object", "properties": props, "required": required}
}

func arrayOf(items schema, desc string) schema {
	return schema{"type": []string{"array", "null"}, "items": items, "description": desc}
}

// The input schemas are written out for what struct tags cannot say:
// wait_seconds' range, and examples of every argument (JSON Schema
// "examples"), which models copy from.

func example(s schema, examples ...any) schema {
	s["examples"] = examples
	return s
}

var runSQLInputSchema = schema{
	"type": "object",
	"properties": schema{
		"target": example(str("the target database, as named in your delegations"), "shop"),
		"sql": example(str("exactly one PostgreSQL SELECT, INSERT, UPDATE or DELETE, with literal values (no $1 placeholders)"),
			"SELECT id, status FROM orders WHERE id = 3",
			"UPDATE orders SET status = 'retrying', updated_at = now() WHERE id = 3 RETURNING id, status"),
	},
	"required":             []string{"target", "sql"},
	"additionalProperties": false,
	"examples":             []any{schema{"target": "shop", "sql": "SELECT id, status FROM orders WHERE id = 3"}},
}

var requestStatusInputSchema = schema{
	"type": "object",
	"properties": schema{
		"request_id": example(str("the request_id run_sql returned"), "req_xszqwrtpkk5k4iil4cdwqkef"),
		"wait_seconds": example(schema{"type": "integer", "minimum": 0, "maximum": int(MaxWait / time.Second),
			"description": "how long to wait, 0 to 60 seconds, for a waiting request to be decided; 0 (the default) answers at once"}, 30),
	},
	"required":             []string{"request_id"},
	"additionalProperties": false,
	"examples":             []any{schema{"request_id": "req_xszqwrtpkk5k4iil4cdwqkef", "wait_seconds": 30}},
}

var noInputSchema = schema{
	"type":                 "object",
	"properties":           schema{},
	"additionalProperties": false,
	"examples":             []any{schema{}},
}

var describeTablesInputSchema = schema{
	"type": "object",
	"properties": schema{
		"target": example(str("only this target database; all targets when absent"), "shop"),
	},
	"additionalProperties": false,
	"examples":             []any{schema{"target": "shop"}, schema{}},
}

var runSQLOutputSchema = obj([]string{"outcome", "request_id"}, schema{
	"outcome":       str("executed: it ran; referred: a human decides, and it has not run"),
	"request_id":    str("the request's id, for request_status"),
	"rows_affected": schema{"type": "integer", "description": "rows changed (writes) or returned (SELECT)"},
	"columns":       arrayOf(schema{"type": "string"}, "the result's columns, in order, as the rows' keys: a name an earlier column has takes the first free suffix _2, _3, ..."),
	"rows":          arrayOf(schema{"type": "object"}, "the result rows (SELECT, or RETURNING), each an object keyed by columns, in their order"),
	"truncated":     schema{"type": "boolean", "description": "a SELECT matched more rows than its rule's max_rows; only the first max_rows are returned"},
	"reasons":       arrayOf(schema{"type": "string"}, "why it was referred"),
	"path":          str("compiled (inside a signed rule) or surveyed"),
	"delegation_id": str("the delegation it ran under, or was judged against"),
})

var requestStatusOutputSchema = obj([]string{"id", "status"}, schema{
	"id":            str("the request id"),
	"target":        str("the target database"),
	"sql":           str("the statement as sent"),
	"outcome":       str("executed or referred"),
	"status":        str("waiting, running, executed, denied, expired, failed or rejected"),
	"reasons":       arrayOf(schema{"type": "string"}, "why it was referred, denied or failed"),
	"rows_affected": schema{"type": "integer"},
	"decided_by":    str("the human who approved or denied it"),
	"created":       str("when it was sent (RFC 3339)"),
	"updated":       str("when its status last changed (RFC 3339)"),
})

var ruleReportSchema = obj([]string{"index", "op", "table", "summary"}, schema{
	"index":    schema{"type": "integer"},
	"op":       str("select, insert, update or delete"),
	"table":    str("schema-qualified table"),
	"route":    str("compiled (runs at once) or residual (needs a conformance judgment)"),
	"summary":  str("what the rule permits, in plain language"),
	"residual": str("the clause a conformance judgment decides"),
})

var delegationsOutputSchema = obj([]string{"delegations"}, schema{
	"delegations": arrayOf(obj([]string{"id", "sentence", "tier", "target", "expires", "rules"}, schema{
		"id":                 str("the delegation id"),
		"sentence":           str("what a human asked of you, as signed"),
		"grantee":            str("you"),
		"target":             str("the target database"),
		"tier":               str("A: every rule compiles; B: some need a conformance judgment"),
		"signer":             str("the human who signed it"),
		"not_before":         str("start (RFC 3339)"),
		"expires":            str("end (RFC 3339)"),
		"active":             schema{"type": "boolean"},
		"rules":              arrayOf(ruleReportSchema, "each rule in plain language"),
		"fallback_authority": str("Tier B: what the signed bound permits if every judgment were wrong"),
	}), "the delegations in force for you"),
})

var ruleRefSchema = obj([]string{"delegation_id", "rule", "op"}, schema{
	"delegation_id": str("the delegation"),
	"rule":          schema{"type": "integer", "description": "the rule's index in the delegation"},
	"op":            str("select, insert or update"),
	"route":         str("compiled or residual"),
})

var tablesOutputSchema = obj([]string{"tables"}, schema{
	"tables": arrayOf(obj([]string{"target", "table", "columns", "rules"}, schema{
		"target": str("the target database"),
		"table":  str("schema-qualified table"),
		"note":   str("set when the table's columns could not be read from the target"),
		"columns": arrayOf(obj([]string{"name", "read", "write"}, schema{
			"name":     str("column"),
			"type":     str("PostgreSQL type"),
			"read":     schema{"type": "boolean", "description": "a select rule lets you read (mention) it"},
			"write":    schema{"type": "boolean", "description": "an update or insert rule lets you set it"},
			"read_by":  arrayOf(ruleRefSchema, "the rules that let you read it"),
			"write_by": arrayOf(ruleRefSchema, "the rules that let you set it"),
		}), "every column of the table"),
		"rules": arrayOf(obj([]string{"delegation_id", "rule", "op", "max_rows"}, schema{
			"delegation_id": str("the delegation"),
			"rule":          schema{"type": "integer"},
			"op":            str("select, insert, update or delete"),
			"route":         str("compiled (runs at once) or residual (referred while the Surveyor is off)"),
			"columns":       arrayOf(schema{"type": "string"}, "the columns it covers"),
			"fence":         str("the rows it can reach (a SQL condition); empty: every row"),
			"check":         str("what every new or changed row must satisfy"),
			"max_rows":      schema{"type": "integer", "description": "the most rows one statement may return or change"},
			"residual":      str("the clause a conformance judgment decides"),
			"summary":       str("the rule in plain language"),
			"expires":       str("when the delegation ends (RFC 3339)"),
		}), "the rules on this table"),
	}), "the tables your delegations cover"),
})
