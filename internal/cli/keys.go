package cli

import (
	"github.com/harbormaster-dev/harbormaster/internal/signing"
)

func generateKey(name string) (priv, pub []byte, err error) {
	return signing.GenerateEd25519(name)
}

// allowedLine formats an allowed-signers line for a human who may sign
// delegations, approvals, denials and revocations for targets matching
// pattern.
func allowedLine(name, pattern string, pub []byte) (string, error) {
	return signing.AllowedSignersLine([]string{name + "@" + pattern},
		[]string{signing.NamespaceDelegation, signing.NamespaceApproval, signing.NamespaceDenial, signing.NamespaceRevocation,
			signing.NamespaceSession, signing.NamespaceSwitch, signing.NamespaceReview, signing.NamespaceEnable}, pub)
}
