package node

import (
	"context"
	"log/slog"
)

// errorsAsText is the node's default log handler around go-log's slog bridge: it writes an
// error attribute as its text. The bridge encodes an attribute of kind Any by reflection, and
// most errors (errors.Join's, fmt.Errorf's) have no exported field, so a line would read
// "err": {} and say nothing of what failed.
type errorsAsText struct{ slog.Handler }

// Handle writes r with every error attribute replaced by its text.
func (h errorsAsText) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(errorText(a))
		return true
	})
	return h.Handler.Handle(ctx, out)
}

// WithAttrs returns the handler with attrs added, error attributes as their text.
func (h errorsAsText) WithAttrs(attrs []slog.Attr) slog.Handler {
	texts := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		texts[i] = errorText(a)
	}
	return errorsAsText{h.Handler.WithAttrs(texts)}
}

// WithGroup returns the handler with its attributes in group name.
func (h errorsAsText) WithGroup(name string) slog.Handler {
	return errorsAsText{h.Handler.WithGroup(name)}
}

// errorText returns a as a string attribute when its value is an error, else a.
func errorText(a slog.Attr) slog.Attr {
	if a.Value.Kind() != slog.KindAny {
		return a
	}
	if err, ok := a.Value.Any().(error); ok && err != nil {
		return slog.String(a.Key, err.Error())
	}
	return a
}
