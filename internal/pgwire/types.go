package pgwire

// The types a bound parameter may be declared with, by OID, and the
// pg_catalog name its constant is cast to. Any other declared OID (a
// reg* type, a domain, a type of the target's own) is refused at Parse:
// a parameter becomes a typed constant, and only casts the static check
// allows may appear in the checked text.
type paramType struct {
	name  string // pg_catalog type name
	array bool
	elem  uint32 // element OID of an array type
}

// Type OIDs (pg_type.dat).
const (
	oidUnknown     = 0
	oidBool        = 16
	oidBytea       = 17
	oidInt8        = 20
	oidInt2        = 21
	oidInt4        = 23
	oidText        = 25
	oidJSON        = 114
	oidFloat4      = 700
	oidFloat8      = 701
	oidUnknownLit  = 705
	oidBpchar      = 1042
	oidVarchar     = 1043
	oidDate        = 1082
	oidTime        = 1083
	oidTimestamp   = 1114
	oidTimestamptz = 1184
	oidInterval    = 1186
	oidTimetz      = 1266
	oidNumeric     = 1700
	oidUUID        = 2950
	oidJSONB       = 3802
	oidInet        = 869
	oidCidr        = 650
	oidMacaddr     = 829
)

var paramTypes = map[uint32]paramType{
	oidBool: {name: "bool"}, oidBytea: {name: "bytea"}, oidInt8: {name: "int8"}, oidInt2: {name: "int2"},
	oidInt4: {name: "int4"}, oidText: {name: "text"}, oidJSON: {name: "json"}, oidFloat4: {name: "float4"},
	oidFloat8: {name: "float8"}, oidBpchar: {name: "bpchar"}, oidVarchar: {name: "varchar"}, oidDate: {name: "date"},
	oidTime: {name: "time"}, oidTimestamp: {name: "timestamp"}, oidTimestamptz: {name: "timestamptz"},
	oidInterval: {name: "interval"}, oidTimetz: {name: "timetz"}, oidNumeric: {name: "numeric"},
	oidUUID: {name: "uuid"}, oidJSONB: {name: "jsonb"}, oidInet: {name: "inet"}, oidCidr: {name: "cidr"},
	oidMacaddr: {name: "macaddr"},

	1000: {name: "bool", array: true, elem: oidBool}, 1001: {name: "bytea", array: true, elem: oidBytea},
	1005: {name: "int2", array: true, elem: oidInt2}, 1007: {name: "int4", array: true, elem: oidInt4},
	1016: {name: "int8", array: true, elem: oidInt8}, 1009: {name: "text", array: true, elem: oidText},
	199: {name: "json", array: true, elem: oidJSON}, 1021: {name: "float4", array: true, elem: oidFloat4},
	1022: {name: "float8", array: true, elem: oidFloat8}, 1014: {name: "bpchar", array: true, elem: oidBpchar},
	1015: {name: "varchar", array: true, elem: oidVarchar}, 1182: {name: "date", array: true, elem: oidDate},
	1183: {name: "time", array: true, elem: oidTime}, 1115: {name: "timestamp", array: true, elem: oidTimestamp},
	1185: {name: "timestamptz", array: true, elem: oidTimestamptz}, 1187: {name: "interval", array: true, elem: oidInterval},
	1231: {name: "numeric", array: true, elem: oidNumeric}, 2951: {name: "uuid", array: true, elem: oidUUID},
	3807: {name: "jsonb", array: true, elem: oidJSONB},
}

// oidByName is the reverse of paramTypes for scalar names and their
// common spellings, for a parameter whose type a cast in the text names.
var oidByName = func() map[string]uint32 {
	oidByName := map[string]uint32{}
	for oid, t := range paramTypes {
		if !t.array {
			oidByName[t.name] = oid
		}
	}
	for alias, name := range map[string]string{"boolean": "bool", "smallint": "int2", "integer": "int4", "int": "int4",
		"bigint": "int8", "real": "float4", "double precision": "float8", "decimal": "numeric", "character varying": "varchar",
		"character": "bpchar", "char": "bpchar"} {
		oidByName[alias] = oidByName[name]
	}
	return oidByName
}()

// arrayOID returns the array type of an element OID, or 0.
func arrayOID(elem uint32) uint32 {
	for oid, t := range paramTypes {
		if t.array && t.elem == elem {
			return oid
		}
	}
	return 0
}
