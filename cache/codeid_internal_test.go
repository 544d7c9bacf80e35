package cache

import (
	"strings"
	"testing"
)

// funcNameByLabel is not inlined: inlined at two call sites, its closures
// would be named after each (TestFuncName.funcNameByLabel.func1, .func2).
//
//go:noinline
func funcNameByLabel(label string) func() string { return func() string { return label } }

func funcNameNamed() {}

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
		{"named", funcNameNamed, "github.com/boltinformer/boltinformer/cache.funcNameNamed"},
	} {
		if got := funcName(tc.fn); got != tc.want {
			t.Errorf("%s: funcName = %q, want %q", tc.what, got, tc.want)
		}
	}
	// Closures of one call site share a name: why versions are declared.
	a, b := funcName(funcNameByLabel("app")), funcName(funcNameByLabel("team"))
	if a != b || !strings.HasPrefix(a, "github.com/boltinformer/boltinformer/cache.funcNameByLabel.func") {
		t.Errorf("closures of one call site: %q and %q, want one funcNameByLabel.funcN name", a, b)
	}
	if got := versioned("v2", funcNameNamed); got != "v2|github.com/boltinformer/boltinformer/cache.funcNameNamed" {
		t.Errorf("versioned = %q", got)
	}
	if got := versioned("", nil); got != "|" {
		t.Errorf("versioned of no function = %q, want %q", got, "|")
	}
}
