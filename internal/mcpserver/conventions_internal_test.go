package mcpserver

import (
	"testing"

	"github.com/harbormaster-dev/harbormaster/internal/httpapi"
)

// TestClientConventions: the stdio server, a client of the HTTP API that
// does not link it, asks for the pages and sends the header the API
// defines, and caps a wait as the API does.
func TestClientConventions(t *testing.T) {
	if pageLimit != httpapi.MaxPageLimit {
		t.Errorf("the stdio server asks for pages of %d, the API answers at most %d", pageLimit, httpapi.MaxPageLimit)
	}
	if idempotencyKeyHeader != httpapi.IdempotencyKeyHeader {
		t.Errorf("the stdio server sends %q, the API reads %q", idempotencyKeyHeader, httpapi.IdempotencyKeyHeader)
	}
	if MaxWait != httpapi.MaxWait {
		t.Errorf("request_status waits up to %s, the API's long-poll %s", MaxWait, httpapi.MaxWait)
	}
}
