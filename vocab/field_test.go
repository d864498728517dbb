// Tests of FieldPath and FieldError.

package vocab

import (
	"reflect"
	"testing"
)

func TestFieldPath_steps(t *testing.T) {
	f := func(name string) FieldStep { return FieldStep{Name: name, Index: -1} }
	k := func(key string) FieldStep { return FieldStep{Name: key, Key: true, Index: -1} }
	i := func(i int) FieldStep { return FieldStep{Index: i} }
	tests := []struct {
		name string
		path FieldPath
		want []FieldStep
	}{
		{"empty", "", nil},
		{"field", FieldPath("").Field("MaxWait"), []FieldStep{f("MaxWait")}},
		{"nested", FieldPath("Overload").Field("CPUThreshold"), []FieldStep{f("Overload"), f("CPUThreshold")}},
		{"index", FieldPath("QueueClasses").Index(12).Field("Name"), []FieldStep{f("QueueClasses"), i(12), f("Name")}},
		{"key with dots and brackets", FieldPath("Tenants").Key(`a.b["]`).Field("Limits").Field("MaxPriority"),
			[]FieldStep{f("Tenants"), k(`a.b["]`), f("Limits"), f("MaxPriority")}},
		{"index of the root", FieldPath("").Index(2), []FieldStep{i(2)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			have, ok := tc.path.Steps()
			if !ok || !reflect.DeepEqual(have, tc.want) {
				t.Fatalf("%q: want %+v, have %+v (ok %v)", tc.path, tc.want, have, ok)
			}
		})
	}
	for _, bad := range []FieldPath{".a", "a..b", "a[", "a[x]", "a[-1]", `a["x]`, `a["x"`, "a]b", "a[1]b"} {
		if steps, ok := bad.Steps(); ok {
			t.Errorf("%q: want not ok, have %+v", bad, steps)
		}
	}
}

func TestFieldError_String(t *testing.T) {
	if have := FieldPath("A").Index(1).Error("broken").String(); have != "A[1]: broken" {
		t.Errorf("have %q", have)
	}
	if have := (FieldError{Problem: "whole"}).String(); have != "whole" {
		t.Errorf("without a field: have %q", have)
	}
}
