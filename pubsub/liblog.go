package pubsub

import (
	"context"
	"log/slog"
)

// libraryHandler filters go-libp2p-pubsub's own log records: at Error and above only, unless
// debug logging is on, when everything passes. Its warnings (a lone node has no peer to
// advertise a topic to, for instance) are routine while a mesh forms and would alarm users.
type libraryHandler struct{ slog.Handler }

func (h libraryHandler) Enabled(ctx context.Context, l slog.Level) bool {
	if h.Handler.Enabled(ctx, slog.LevelDebug) {
		return h.Handler.Enabled(ctx, l)
	}
	return l >= slog.LevelError && h.Handler.Enabled(ctx, l)
}

func (h libraryHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return libraryHandler{h.Handler.WithAttrs(attrs)}
}

func (h libraryHandler) WithGroup(name string) slog.Handler {
	return libraryHandler{h.Handler.WithGroup(name)}
}
