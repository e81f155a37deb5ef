package mcpserver

import (
	"context"
	"log/slog"
)

// sdkLogger is the logger handed to the MCP SDK. The SDK logs several
// INFO lines per request (server connecting, session connected,
// initialized, ended), which in a stateless server are one per HTTP
// request and bury the lines that matter: they go to DEBUG. An attribute
// the SDK names like one of slog's own keys ("level" in "client log level
// set") is renamed, so no line carries two "level" keys.
func sdkLogger(l *slog.Logger) *slog.Logger { return slog.New(sdkHandler{h: l.Handler()}) }

type sdkHandler struct{ h slog.Handler }

func demote(l slog.Level) slog.Level {
	if l == slog.LevelInfo {
		return slog.LevelDebug
	}
	return l
}

func (s sdkHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return s.h.Enabled(ctx, demote(l))
}

func (s sdkHandler) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, demote(r.Level), r.Message, r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(renameBuiltin(a))
		return true
	})
	return s.h.Handle(ctx, out)
}

func (s sdkHandler) WithAttrs(as []slog.Attr) slog.Handler {
	renamed := make([]slog.Attr, len(as))
	for i, a := range as {
		renamed[i] = renameBuiltin(a)
	}
	return sdkHandler{h: s.h.WithAttrs(renamed)}
}

func (s sdkHandler) WithGroup(name string) slog.Handler { return sdkHandler{h: s.h.WithGroup(name)} }

func renameBuiltin(a slog.Attr) slog.Attr {
	switch a.Key {
	case slog.TimeKey, slog.LevelKey, slog.MessageKey, slog.SourceKey:
		a.Key = "mcp_" + a.Key
	}
	return a
}
