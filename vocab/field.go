// FieldError and FieldPath: the one problem type of every validation in
// the module and the Go-terms path of the field it names.

package vocab

import (
	"strconv"
	"strings"
)

// FieldError is one problem with one field of a value the module validates:
// the path of the field and what is wrong with it. It is the one problem
// type of every validation in the module: release manifests, the admission
// policy, the scheduler's configuration and the node's configuration file.
//
// Field is the path in the terms of the value validated: a manifest's JSON
// names ("revisions[1].ceiling.wall_time"), the Go field names of a
// configuration struct, built with FieldPath
// (`Tenants["acme"].Limits.MaxPriority`), or the key path of a
// configuration file ("tenants.acme.limits.max_priority"). An empty Field
// is the value as a whole.
type FieldError struct {
	Field   string
	Problem string
}

// String renders "<field>: <problem>", or the problem alone when Field is
// empty.
func (f FieldError) String() string {
	if f.Field == "" {
		return f.Problem
	}
	return f.Field + ": " + f.Problem
}

// JoinFieldErrors is what an error listing problems says: the subject, then
// each problem, separated by "; ".
func JoinFieldErrors(subject string, problems []FieldError) string {
	parts := make([]string, len(problems))
	for i, p := range problems {
		parts[i] = p.String()
	}
	return subject + ": " + strings.Join(parts, "; ")
}

// FieldPath is the path of a field inside a Go value, in Go terms: field
// names joined by ".", list elements as "[3]" and map elements as
// `["key"]` (the key quoted as a Go string, so any key is unambiguous).
// Packages that validate a configuration struct name their fields with it;
// a caller that reads the configuration from a file maps the path onto its
// own key names with Steps, never by reading the problem's text.
type FieldPath string

// Field returns the path of the field name inside p.
func (p FieldPath) Field(name string) FieldPath {
	if p == "" {
		return FieldPath(name)
	}
	return p + "." + FieldPath(name)
}

// Index returns the path of the list element i of p.
func (p FieldPath) Index(i int) FieldPath { return p + "[" + FieldPath(strconv.Itoa(i)) + "]" }

// Key returns the path of the map element key of p.
func (p FieldPath) Key(key string) FieldPath { return p + "[" + FieldPath(strconv.Quote(key)) + "]" }

// Error returns the problem of the field at p.
func (p FieldPath) Error(problem string) FieldError {
	return FieldError{Field: string(p), Problem: problem}
}

// FieldStep is one step of a FieldPath: a field, a list element or a map
// element.
type FieldStep struct {
	// Name is the field's name; for a map element, its key.
	Name string
	// Key says that the step is a map element.
	Key bool
	// Index is a list element's index; -1 for fields and map elements.
	Index int
}

// Steps splits p into its steps. ok is false when p is not a path that
// Field, Index and Key build.
func (p FieldPath) Steps() (steps []FieldStep, ok bool) {
	s := string(p)
	first := true
	for s != "" {
		switch {
		case s[0] == '[' && len(s) > 1 && s[1] == '"':
			q, err := strconv.QuotedPrefix(s[1:])
			if err != nil || !strings.HasPrefix(s[1+len(q):], "]") {
				return nil, false
			}
			key, _ := strconv.Unquote(q) // QuotedPrefix returned a valid literal
			steps = append(steps, FieldStep{Name: key, Key: true, Index: -1})
			s = s[1+len(q)+1:]
		case s[0] == '[':
			end := strings.IndexByte(s, ']')
			i, err := strconv.Atoi(s[1:max(end, 1)])
			if end < 0 || err != nil || i < 0 {
				return nil, false
			}
			steps = append(steps, FieldStep{Index: i})
			s = s[end+1:]
		default:
			if !first {
				if s[0] != '.' {
					return nil, false
				}
				s = s[1:]
			}
			end := strings.IndexAny(s, ".[]\"")
			if end < 0 {
				end = len(s)
			}
			if end == 0 {
				return nil, false
			}
			steps = append(steps, FieldStep{Name: s[:end], Index: -1})
			s = s[end:]
		}
		first = false
	}
	return steps, true
}
