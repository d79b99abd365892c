package api

import (
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/iacp-node/iacp-node/apiclient"
	"github.com/iacp-node/iacp-node/protocol"
)

// The Go client's documents (apiclient) mirror the server's where the server's hold the
// node's own types: each pair has the same JSON members, of the same JSON kinds, all the way
// down, so that the client reads every member the server writes.
func TestClientDocs_MirrorTheServers(t *testing.T) {
	pairs := []struct{ server, client any }{
		{StatusDoc{}, apiclient.StatusDoc{}},
		{AgentsDoc{}, apiclient.AgentsDoc{}},
		{RecordDoc{}, apiclient.RecordDoc{}},
		{MatchDoc{}, apiclient.MatchDoc{}},
		{DiscoverDoc{}, apiclient.DiscoverDoc{}},
		{InboxItem{}, apiclient.InboxItem{}},
		{InboxDoc{}, apiclient.InboxDoc{}},
		{ErrorDoc{}, apiclient.ErrorDoc{}},
		{protocol.EventPayload{}, apiclient.EventPayload{}},
	}
	for _, p := range pairs {
		s, c := shape(reflect.TypeOf(p.server), 0), shape(reflect.TypeOf(p.client), 0)
		if s != c {
			t.Errorf("%T and %T differ:\nserver %s\nclient %s", p.server, p.client, s, c)
		}
	}
}

var (
	timeType    = reflect.TypeFor[time.Time]()
	rawType     = reflect.TypeFor[json.RawMessage]()
	messageType = reflect.TypeFor[protocol.Message]()
	clientMsg   = reflect.TypeFor[apiclient.Message]()
)

// shape is t's JSON shape: objects with their members' names and shapes, in order of name.
func shape(t reflect.Type, depth int) string {
	if depth > 8 {
		return "…"
	}
	switch {
	case t == timeType:
		return "time"
	case t == rawType:
		return "json"
	case t == messageType || t == clientMsg:
		return "message" // an IACP document: its members are the wire format's
	}
	switch t.Kind() {
	case reflect.Pointer:
		return shape(t.Elem(), depth)
	case reflect.Slice, reflect.Array:
		return "[" + shape(t.Elem(), depth+1) + "]"
	case reflect.Map:
		return "{" + shape(t.Key(), depth+1) + ":" + shape(t.Elem(), depth+1) + "}"
	case reflect.Struct:
		fields := map[string]string{}
		members(t, depth, fields)
		var b strings.Builder
		b.WriteString("{")
		for _, name := range slices.Sorted(maps.Keys(fields)) {
			b.WriteString(name + ":" + fields[name] + ",")
		}
		return b.String() + "}"
	case reflect.Interface:
		return "any"
	case reflect.Bool:
		return "bool"
	case reflect.String:
		return "string"
	default:
		return "number"
	}
}

// members adds t's JSON members (embedded structs' members inline) to out.
func members(t reflect.Type, depth int, out map[string]string) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		name, _, _ := strings.Cut(tag, ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if f.Anonymous && name == "" {
			members(f.Type, depth, out)
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = shape(f.Type, depth+1)
	}
}
