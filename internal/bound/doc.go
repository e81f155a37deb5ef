// Package bound is the delegation: the YAML a human writes (yaml.go), its
// plain-language rendering (language.go), and its compilation against a
// target's catalog into the deterministic scope a grantor signs
// (compile.go): tables, listed columns, a row fence, a check, a row cap
// and an expiry per rule, in canonical bytes whose hash names it. The
// compile report carries problems (which block signing) and lints (advice
// the signature accepts), among them the constraints and triggers that
// read columns the grantee cannot (constraints.go), and the read fences
// that can raise on a value outside them (raise.go). gates.go holds the
// outcome of CoVer's gates on each fence and check (DESIGN.md section 8).
package bound
