package httpapi

import (
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/harbormaster-dev/harbormaster/internal/gateway"
	"github.com/harbormaster-dev/harbormaster/internal/scope"
)

// RegisterTables adds GET /v1/tables[?target=NAME] to the API: the caller's
// tables in scope (scope.TablesView). New registers it; a second call does
// nothing.
func RegisterTables(s *Server) {
	if slices.Contains(s.routes, tablesRoute) {
		return
	}
	s.HandleFunc(tablesRoute, s.agent(func(w http.ResponseWriter, r *http.Request, principal string) {
		pg, ok := readPage(w, r)
		if !ok {
			return
		}
		v, err := scope.DescribeTables(s.gw, principal, r.URL.Query().Get("target"), time.Now())
		switch {
		case errors.Is(err, gateway.ErrUnknownTarget):
			writeError(w, http.StatusNotFound, "unknown_target", err.Error())
		case err != nil:
			s.log.ErrorContext(r.Context(), "describe tables", "err", err)
			writeError(w, http.StatusInternalServerError, "internal", "the tables could not be described")
		default:
			v.Tables, v.NextCursor = paginate(v.Tables, func(t scope.TableView) string { return t.Target + "\x00" + t.Table }, pg)
			writeJSON(w, http.StatusOK, v)
		}
	}))
}

const tablesRoute = "GET /v1/tables"
