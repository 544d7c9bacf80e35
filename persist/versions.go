package persist

import (
	"fmt"

	bolt "go.etcd.io/bbolt"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"

	"github.com/boltinformer/boltinformer/internal/format"
)

// Version is what a collection keeps of a stored object's identity. It is
// enough to tell, against a list of the objects' metadata, which stored
// objects are unchanged, changed or gone. It also tells which were replaced
// by another object of the same name.
type Version struct {
	UID             types.UID
	ResourceVersion string
}

// Versions returns the Version of every stored object, by key, without
// decoding or reading their records. It reads the layers, which keep each
// change's identity. It also reads the versions bucket
// (format.VersionsBucket), which every write of the object tree keeps
// beside the tree. Only a file written by schema 2, open read-only, lacks
// the bucket. Its records are decoded instead. A record that cannot be
// decoded has the resourceVersion of its header and no UID.
func (c *Collection) Versions() (map[string]Version, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := map[string]Version{}
	err := c.view(func(tx *bolt.Tx) error {
		b := c.bucket(tx)
		if b == nil {
			return ErrNoCollection
		}
		err := c.forEachUnwrittenLocked(func(key string, ch *change) error {
			if ch.uid == "" && ch.rv == "" {
				// Journaled by schema 2, so the record has it.
				rec, err := c.changeRecordTx(b, key, ch)
				if err != nil {
					return err
				}
				out[key] = versionOfRecord(c.db.codec, rec)
				return nil
			}
			out[key] = Version{UID: types.UID(ch.uid), ResourceVersion: ch.rv}
			return nil
		})
		if err != nil {
			return err
		}
		if vb := versionsTree(b); vb.Exists() {
			return vb.ForEach(func(k, raw []byte) error {
				key := string(k)
				if c.inLayersLocked(key) {
					return nil
				}
				uid, rv, err := format.DecodeVersion(raw)
				if err != nil {
					return fmt.Errorf("collection %q key %q: %w", c.name, key, err)
				}
				out[key] = Version{UID: types.UID(uid), ResourceVersion: rv}
				return nil
			})
		}
		return objectsTree(b).ForEach(func(k, rec []byte) error {
			key := string(k)
			if c.inLayersLocked(key) {
				return nil
			}
			out[key] = versionOfRecord(c.db.codec, rec)
			return nil
		})
	})
	return out, err
}

// versionOfRecord decodes a record for its identity. A record whose
// payload cannot be decoded still has its resourceVersion in its header,
// unless that is damaged too. It has no UID, which a recovery reads as
// unknown. Every stored key has a Version. So Versions and Len agree with
// Keys, and a recovery can delete any key.
func versionOfRecord(codec *Codec, rec []byte) Version {
	if obj, err := codec.Decode(rec); err == nil {
		if m, err := meta.Accessor(obj); err == nil {
			return Version{UID: m.GetUID(), ResourceVersion: m.GetResourceVersion()}
		}
	}
	rv, _ := format.ReadResourceVersion(rec)
	return Version{ResourceVersion: rv}
}

// putVersion writes key's identity into the versions bucket. That is the
// change's identity, or its record's for a change journaled by schema 2.
func (c *Collection) putVersion(versions *bolt.Bucket, key string, ch *change, rec []byte) error {
	uid, rv := ch.uid, ch.rv
	if uid == "" && rv == "" {
		v := versionOfRecord(c.db.codec, rec)
		uid, rv = string(v.UID), v.ResourceVersion
	}
	return versions.Put([]byte(key), format.AppendVersion(nil, uid, rv))
}

// buildVersionsTx creates the versions bucket of a collection that lacks
// it (written by schema 2) from its records, decoding each once. The
// journal is folded into the trees first, so the trees say everything.
func (c *Collection) buildVersionsTx(b *bolt.Bucket) error {
	treeBytes, err := c.foldJournalForBuild(b)
	if err != nil {
		return err
	}
	c.dropJournalLayers(treeBytes)
	vb, err := b.CreateBucket(format.VersionsBucket)
	if err != nil {
		return err
	}
	vb.FillPercent = 1.0 // key order: appends only
	return b.Bucket(format.ObjectsBucket).ForEach(func(k, rec []byte) error {
		v := versionOfRecord(c.db.codec, rec)
		return vb.Put(k, format.AppendVersion(nil, string(v.UID), v.ResourceVersion))
	})
}
