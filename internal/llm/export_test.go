package llm

import (
	"context"
	"net"
	"net/http"
)

// NewWithDial is New with a dialer, so tests can see where connections go.
func NewWithDial(cfg ProviderConfig, getenv func(string) string, dial func(ctx context.Context, network, addr string) (net.Conn, error)) (Juror, error) {
	j, err := newJuror(cfg, getenv, dial)
	if err != nil {
		return nil, err
	}
	return j, nil
}

// TransportOf returns a juror's HTTP transport.
func TransportOf(j Juror) *http.Transport { return j.(*juror).transport }
