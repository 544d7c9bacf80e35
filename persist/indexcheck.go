package persist

import (
	"fmt"
	"maps"

	"github.com/vmihailenco/msgpack/v5"
	bolt "go.etcd.io/bbolt"

	"github.com/boltinformer/boltinformer/internal/format"
)

// StoredIndexValues returns, for each key, the values every index of the
// collection holds for it. An index without values for a key is absent from
// the key's map. Like every read, it takes the newest state first, so the
// layers come before the file.
// It reads only the indexes, never an object. Owners use it to verify
// stored index entries against their index functions.
func (c *Collection) StoredIndexValues(keys []string) (map[string]map[string][]string, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make(map[string]map[string][]string, len(keys))
	var fromFile []string
	for _, key := range keys {
		if ch := c.layerChangeLocked(key); ch != nil {
			if !ch.deleted {
				out[key] = maps.Clone(ch.indexes)
			}
			continue
		}
		fromFile = append(fromFile, key)
	}
	if len(fromFile) == 0 {
		return out, nil
	}
	err := c.view(func(tx *bolt.Tx) error {
		b := c.bucket(tx)
		if b == nil {
			return ErrNoCollection
		}
		idx := b.Bucket(format.IndexesBucket)
		for name := range c.indexes {
			ib := idx.Bucket([]byte(name))
			if ib == nil {
				return fmt.Errorf("%w: index bucket %q missing", ErrCorruptRecord, name)
			}
			byKey := ib.Bucket(format.ByKeyBucket)
			for _, key := range fromFile {
				raw := byKey.Get([]byte(key))
				if raw == nil {
					continue
				}
				var values []string
				if err := msgpack.Unmarshal(raw, &values); err != nil {
					return fmt.Errorf("%w: index %q of %q: %v", ErrCorruptRecord, name, key, err)
				}
				if out[key] == nil {
					out[key] = map[string][]string{}
				}
				out[key][name] = values
			}
		}
		return nil
	})
	return out, err
}
