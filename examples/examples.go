// Package examples embeds the demo target's schema and delegations, so that
// the README tour, the tests and harbormaster demo use the same files.
package examples

import "embed"

// FS holds shop.sql and the delegation YAML files.
//
//go:embed *.sql *.yaml
var FS embed.FS
