package codeid

import (
	"strings"
	"testing"
)

// byLabel is not inlined: inlined at two call sites, its closures would be
// named after each (TestFuncName.byLabel.func1, .func2).
//
//go:noinline
func byLabel(label string) func() string { return func() string { return label } }

func named() {}

func TestFuncName(t *testing.T) {
	var nilFunc func()
	for _, tc := range []struct {
		what string
		fn   any
		want string
	}{
		{"nil", nil, ""},
		{"nil func", nilFunc, ""},
		{"not a function", 42, ""},
		{"named", named, "github.com/boltinformer/boltinformer/internal/codeid.named"},
	} {
		if got := FuncName(tc.fn); got != tc.want {
			t.Errorf("%s: FuncName = %q, want %q", tc.what, got, tc.want)
		}
	}
	// Closures of one call site share a name: why versions are declared.
	a, b := FuncName(byLabel("app")), FuncName(byLabel("team"))
	if a != b || !strings.HasPrefix(a, "github.com/boltinformer/boltinformer/internal/codeid.byLabel.func") {
		t.Errorf("closures of one call site: %q and %q, want one byLabel.funcN name", a, b)
	}
	if got := Versioned("v2", named); got != "v2|github.com/boltinformer/boltinformer/internal/codeid.named" {
		t.Errorf("Versioned = %q", got)
	}
	if got := Versioned("", nil); got != "|" {
		t.Errorf("Versioned of no function = %q, want %q", got, "|")
	}
}
