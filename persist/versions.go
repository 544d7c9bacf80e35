package persist

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// Version is what a collection keeps of a stored object's identity: enough
// to tell, against a list of the objects' metadata, which stored objects
// are unchanged, changed, gone, or replaced by another object of the same
// name.
type Version struct {
	UID             types.UID
	ResourceVersion string
}

// Versions returns the Version of every stored object, by key.
func (c *Collection) Versions() (map[string]Version, error) {
	out := map[string]Version{}
	err := c.ForEach(func(key string, obj runtime.Object) error {
		m, err := meta.Accessor(obj)
		if err != nil {
			return fmt.Errorf("collection %q key %q: %w", c.name, key, err)
		}
		out[key] = Version{UID: m.GetUID(), ResourceVersion: m.GetResourceVersion()}
		return nil
	})
	return out, err
}
