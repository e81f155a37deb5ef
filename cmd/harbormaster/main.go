// Command harbormaster is the gateway between AI agents and PostgreSQL.
// See the README and docs/ for what it does; internal/cli holds the commands.
package main

import (
	"os"

	"github.com/harbormaster-dev/harbormaster/internal/cli"
)

func main() {
	os.Exit(cli.Do(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
