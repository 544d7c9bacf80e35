// Copyright The Kubernetes Authors.
// Copyright The boltinformer Authors.
//
// Licensed under the Apache License, Version 2.0 (the "License");
// you may not use this file except in compliance with the License.
// You may obtain a copy of the License at
//
//     http://www.apache.org/licenses/LICENSE-2.0
//
// Unless required by applicable law or agreed to in writing, software
// distributed under the License is distributed on an "AS IS" BASIS,
// WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
// See the License for the specific language governing permissions and
// limitations under the License.
//
// Ported from k8s.io/client-go v0.37.2, modified:
//   - tools/cache/event_handler_name.go
// The ports are listed in hack/upstream-versions.txt.

package processor

import (
	"fmt"
	"reflect"
	"runtime"
	"strings"

	"k8s.io/client-go/tools/cache"
)

// nameForHandler names a handler for sync-tracker names and traces, as
// client-go's unexported nameForHandler (tools/cache/event_handler_name.go).
func nameForHandler(handler cache.ResourceEventHandler) (name string) {
	defer func() {
		if name == "" {
			name = fmt.Sprintf("%T", handler)
		}
	}()
	if handler == nil {
		return ""
	}
	switch h := handler.(type) {
	case *cache.ResourceEventHandlerFuncs:
		return nameForFunctions(h.AddFunc, h.UpdateFunc, h.DeleteFunc)
	case cache.ResourceEventHandlerFuncs:
		return nameForFunctions(h.AddFunc, h.UpdateFunc, h.DeleteFunc)
	}
	value := reflect.ValueOf(handler)
	if value.Type().Kind() == reflect.Interface {
		value = value.Elem()
	}
	if value.Type().Kind() == reflect.Pointer && !value.IsNil() {
		value = value.Elem()
	}
	name = value.Type().PkgPath()
	if name != "" {
		name += "."
	}
	return name + value.Type().Name()
}

// nameForFunctions returns the common qualifier of fs when they share one
// (e.g. the package or type that defines them all), else their names joined.
func nameForFunctions(fs ...any) string {
	var qualifier string
	single := true
	var names []string
	for _, f := range fs {
		if f == nil {
			continue
		}
		if v := reflect.ValueOf(f); v.Kind() == reflect.Func && v.IsNil() {
			continue
		}
		fn := runtime.FuncForPC(reflect.ValueOf(f).Pointer())
		if fn == nil || fn.Name() == "" {
			continue
		}
		name := fn.Name()
		names = append(names, name)
		q := name
		if i := strings.LastIndexByte(q, '.'); i > 0 {
			q = q[:i]
		}
		switch qualifier {
		case "":
			qualifier = q
		case q:
		default:
			single = false
		}
	}
	if single {
		return qualifier
	}
	return strings.Join(names, "+")
}
