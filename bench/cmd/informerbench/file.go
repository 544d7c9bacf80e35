package main

import (
	"context"
	"os"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/boltinformer/boltinformer/persist/inspectfile"
)

// measureFile compares the cache file with the protobuf encoding of the
// objects it holds (generated Size: the object alone, no envelope).
func measureFile(bolt *boltRun, spec childSpec, idx cache.Indexer, res *childResult) error {
	if err := bolt.db.Flush(context.Background()); err != nil {
		return err
	}
	fi, err := os.Stat(spec.File)
	if err != nil {
		return err
	}
	res.FileBytes = fi.Size()
	infos, err := bolt.db.Collections()
	if err != nil {
		return err
	}
	for _, info := range infos {
		res.RecordBytes += info.Bytes
	}
	for _, obj := range idx.List() {
		res.ProtoBytes += int64(obj.(*corev1.Pod).Size())
	}
	// Page-level statistics need a read-only handle, which bbolt does not
	// give while this process holds the file for writing: measure a
	// snapshot, a page-for-page copy of the committed file.
	snap := spec.File + ".measure"
	if err := bolt.db.SnapshotFile(context.Background(), snap); err != nil {
		return err
	}
	defer os.Remove(snap)
	f, err := inspectfile.Open(snap, inspectfile.Options{})
	if err != nil {
		return err
	}
	defer f.Close()
	fs, err := f.Stats()
	if err != nil {
		return err
	}
	res.DataBytes, res.FreeBytes = fs.DataSize, int64(fs.FreePages+fs.PendingPages)*int64(fs.PageSize)
	return f.View(bolt.informer.Indexer().Collection().Name(), func(rc *inspectfile.Collection) error {
		stats, err := rc.Stats()
		for _, st := range stats {
			alloc := int64(st.LeafAlloc + st.BranchAlloc)
			switch {
			case st.Bucket == "objects":
				res.ObjectsAlloc, res.ObjectsInuse = alloc, int64(st.LeafInuse+st.BranchInuse)
			case strings.HasPrefix(st.Bucket, "indexes/"):
				res.IndexesAlloc += alloc
			}
		}
		return err
	})
}
