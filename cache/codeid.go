package cache

import (
	"reflect"
	"runtime"
)

// The code a cache file's contents depend on is named in the file. Index
// functions and transforms are such code. A start running other code than
// the writer's thus sees the change.
//
// A Go function has no identity across builds but its name. The name says
// nothing of what the function does. Closures made at one call site share
// it, so pkg.byLabel.func1 cannot tell byLabel("app") from byLabel("team").
// A function may also change behaviour under the same name. So a name is
// paired with a version its author declares. What a name cannot tell is
// checked otherwise where it matters. Stored index entries, for example, are
// verified during a warm start.

// funcName returns fn's Go name. It returns "" for nil or for what is not a
// function, and "?" if the runtime does not know the name. Closures are
// named after where they are written (pkg.newFunc.func1), or where that code
// was inlined.
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
// name, as "declared|name". Swapping in a differently named function is thus
// seen even when nobody bumped the version.
func versioned(declared string, fn any) string { return declared + "|" + funcName(fn) }
