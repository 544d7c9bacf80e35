package main

import (
	"context"
	"os"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
)

// measureFile compares the cache file with its records and with the
// protobuf encoding of the objects it holds (generated Size: the object
// alone, no envelope).
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
	return nil
}
