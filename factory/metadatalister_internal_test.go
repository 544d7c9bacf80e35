package factory

import (
	"testing"

	"k8s.io/apimachinery/pkg/fields"
)

// A fetch's field selector asks for exactly the object's name, whatever the
// name holds, beside the informer's own field selector. RBAC objects' names
// may hold "," and "=", which a selector must escape.
func FuzzWithNameSelectsExactlyTheName(f *testing.F) {
	for _, seed := range []struct{ field, name string }{
		{"", "web"},
		{"spec.nodeName=n1", "web"},
		{"", "system:controller:a,b=c"},
		{"status.phase!=Failed", `x\y,z=!=`},
		{"", "a=b"},
	} {
		f.Add(seed.field, seed.name)
	}
	f.Fuzz(func(t *testing.T, field, name string) {
		base, err := fields.ParseSelector(field)
		if err != nil || name == "" {
			t.Skip()
		}
		got, err := fields.ParseSelector(withName(base.String(), name))
		if err != nil {
			t.Fatalf("withName(%q, %q) = %q: %v", base, name, withName(base.String(), name), err)
		}
		if v, ok := got.RequiresExactMatch("metadata.name"); !ok || v != name {
			t.Fatalf("withName(%q, %q) = %q requires metadata.name=%q (%v), want %q", base, name, got, v, ok, name)
		}
		for _, r := range base.Requirements() {
			if !got.Matches(fields.Set{r.Field: r.Value, "metadata.name": name}) && r.Operator != "!=" {
				t.Fatalf("withName(%q, %q) = %q lost the requirement %v", base, name, got, r)
			}
		}
	})
}
