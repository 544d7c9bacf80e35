package cache

import (
	"reflect"
	"runtime"
)

// The code a cache file's contents depend on (an index function, a
// transform) is named in the file, so that a start running other code than
// the writer's sees it.
//
// A Go function has no identity across builds but its name, and the name
// says nothing of what the function does: closures made at one call site
// share it (pkg.byLabel.func1 cannot tell byLabel("app") from
// byLabel("team")), and a function may change behaviour under the same
// name. So a name is paired with a version its author declares, and what
// a name cannot tell is checked otherwise where it matters (stored index
// entries are verified during a warm start).

// funcName is fn's Go name: "" for nil or what is not a function, "?" if
// the runtime does not know it. Closures are named after where they are
// written (pkg.newFunc.func1), or where that code was inlined.
func funcName(fn any) string {
	v := reflect.ValueOf(fn)
	if !v.IsValid() || v.Kind() != reflect.Func || v.IsNil() {
		return ""
	}
	if f := runtime.FuncForPC(v.Pointer()); f != nil {
		return f.Name()
	}
	return "?"
}

// versioned identifies fn by the version its author declared and its Go
// name ("declared|name"), so that swapping in a differently named function
// is seen even when nobody bumped the version.
func versioned(declared string, fn any) string { return declared + "|" + funcName(fn) }
