package persist

import "github.com/boltinformer/boltinformer/internal/format"

// Index buckets and entries are laid out as internal/format describes; these
// are its names as this package uses them.
var (
	bucketByValue = format.ByValueBucket
	bucketByKey   = format.ByKeyBucket
)

func valuePrefix(value string) []byte { return format.ValuePrefix(value) }

func indexEntry(value, key string) []byte { return format.IndexEntry(value, key) }

func splitIndexEntry(entry []byte) (value, key string, prefixLen int, err error) {
	return format.SplitIndexEntry(entry)
}
