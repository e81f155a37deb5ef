// Command printinfo prints buildinfo.Read as JSON: a small binary of this
// module for TestBuiltBinary (a test binary records no module
// dependencies; linking all of harbormaster takes longer).
package main

import (
	"encoding/json"
	"os"

	"github.com/harbormaster-dev/harbormaster/internal/buildinfo"
)

func main() {
	_ = json.NewEncoder(os.Stdout).Encode(buildinfo.Read())
}
