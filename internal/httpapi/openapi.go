package httpapi

import (
	_ "embed"
	"net/http"
)

// OpenAPI is the OpenAPI 3.1 description of /v1, served at
// GET /v1/openapi.json. TestOpenAPIMatchesHandlers keeps it true to the
// routes, the Go types of the bodies and the error codes; TestOpenAPILint
// lints it with Redocly's linter.
//
//go:embed openapi.json
var OpenAPI []byte

func (s *Server) getOpenAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "public, max-age=300")
	_, _ = w.Write(OpenAPI)
}
