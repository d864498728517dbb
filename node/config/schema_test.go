package config

import (
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// schemaProblems returns what is wrong with s: a key naming no field of its
// table's type, a table type (reachable from Config) without keys, a hook
// the type does not implement, a set without a parser.
func schemaProblems(s map[reflect.Type][]key) []string {
	var probs []string
	seen := map[reflect.Type]bool{}
	var visit func(t reflect.Type)
	visit = func(t reflect.Type) {
		if seen[t] {
			return
		}
		seen[t] = true
		keys, ok := s[t]
		if !ok {
			probs = append(probs, t.String()+": no keys")
		}
		for _, k := range keys {
			f, ok := t.FieldByName(k.field)
			switch {
			case !ok:
				probs = append(probs, t.String()+": no field "+k.field)
				continue
			case k.opts&byHook != 0 && !reflect.PointerTo(t).Implements(reflect.TypeFor[keyDecoder]()):
				probs = append(probs, t.String()+": no decodeKey for "+k.name)
			case k.opts&asSet != 0 && parsers[f.Type] == nil:
				probs = append(probs, t.String()+": no parser for the set "+k.name)
			}
			ft := f.Type
			if ft.Kind() == reflect.Slice || ft.Kind() == reflect.Map {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				visit(ft)
			}
		}
	}
	visit(reflect.TypeFor[Config]())
	for _, t := range slices.SortedFunc(maps.Keys(s), func(a, b reflect.Type) int { return strings.Compare(a.String(), b.String()) }) {
		if !seen[t] {
			probs = append(probs, t.String()+": keys of a table no key leads to")
		}
	}
	return probs
}

func TestSchema_wellFormed(t *testing.T) {
	if probs := schemaProblems(schema); len(probs) > 0 {
		t.Errorf("schema: %q", probs)
	}
	// The negative control: a misspelled field and a missing table are found.
	broken := maps.Clone(schema)
	broken[reflect.TypeFor[Scheduler]()] = []key{{"MaxWiat", "max_wait", 0}}
	delete(broken, reflect.TypeFor[IngressPool]())
	want := []string{"config.Scheduler: no field MaxWiat", "config.IngressPool: no keys"}
	if probs := schemaProblems(broken); !slices.Equal(slices.Sorted(slices.Values(probs)), slices.Sorted(slices.Values(want))) {
		t.Errorf("broken schema: %q, want %q", probs, want)
	}
}
