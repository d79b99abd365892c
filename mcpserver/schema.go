package mcpserver

import (
	"fmt"
	"slices"

	"github.com/google/jsonschema-go/jsonschema"
)

// inputSchema is the JSON Schema of In as the SDK infers it, with plain types: a member the
// SDK types as ["null", "array"] (a Go slice or map, which may be nil) is {"type": "array"}
// here. Many MCP clients and LLM function-calling converters take only one type a member (the
// MCP Inspector CLI could not call a tool with a list input), and an input member left out is
// what nil means anyway.
func inputSchema[In any]() *jsonschema.Schema {
	s, err := jsonschema.For[In](nil)
	if err != nil {
		panic(fmt.Sprintf("mcpserver: the input schema of %T: %v", *new(In), err))
	}
	plain(s)
	return s
}

// plain replaces every nullable type ["null", T] in s and below by T.
func plain(s *jsonschema.Schema) {
	if s == nil {
		return
	}
	if len(s.Types) > 0 {
		types := slices.DeleteFunc(slices.Clone(s.Types), func(t string) bool { return t == "null" })
		if len(types) == 1 {
			s.Type, s.Types = types[0], nil
		}
	}
	for _, p := range s.Properties {
		plain(p)
	}
	plain(s.Items)
	plain(s.AdditionalProperties)
	for _, sub := range slices.Concat(s.PrefixItems, s.ItemsArray, s.AnyOf, s.OneOf, s.AllOf) {
		plain(sub)
	}
}
