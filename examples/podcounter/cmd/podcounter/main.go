// Command podcounter runs the podcounter example controller against the
// cluster of a kubeconfig, on boltinformer's informer factory (a cache
// file) or, with -cache "", on client-go's.
//
//	go run ./examples/podcounter/cmd/podcounter -kubeconfig ~/.kube/config -cache /tmp/podcounter.db
//
// Stop it with Ctrl-C and start it again: with a cache file it resumes from
// the file, without listing Pods and ConfigMaps again.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/boltinformer/boltinformer/examples/podcounter"
	"github.com/boltinformer/boltinformer/factory"
	"github.com/boltinformer/boltinformer/persist"
)

func main() {
	home, _ := os.UserHomeDir()
	kubeconfig := flag.String("kubeconfig", filepath.Join(home, ".kube", "config"), "path to the kubeconfig")
	cachePath := flag.String("cache", "podcounter.db", `boltinformer cache file; "" uses client-go's in-memory informers`)
	resync := flag.Duration("resync", 10*time.Minute, "informer resync period")
	workers := flag.Int("workers", 2, "namespaces processed at once")
	report := flag.Duration("report", 30*time.Second, "how often to print the counts")
	flag.Parse()
	if err := run(*kubeconfig, *cachePath, *resync, *workers, *report); err != nil {
		log.Fatal(err)
	}
}

func run(kubeconfig, cachePath string, resync time.Duration, workers int, report time.Duration) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	var f informers.SharedInformerFactory
	if cachePath == "" {
		f = informers.NewSharedInformerFactory(client, resync)
	} else {
		db, err := persist.Open(cachePath, persist.Options{Scheme: scheme.Scheme})
		if err != nil {
			return err
		}
		defer db.Close() // after f.Shutdown below has flushed every informer
		// The one changed line; with client-go it reads:
		//	f = informers.NewSharedInformerFactory(client, resync)
		f = factory.NewSharedInformerFactory(client, resync, db)
	}

	c, err := podcounter.New(client, f)
	if err != nil {
		return err
	}
	f.Start(ctx.Done())
	defer f.Shutdown() // waits for the informers, which stop with ctx

	go func() {
		ticker := time.NewTicker(report)
		defer ticker.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
				fmt.Println(c.Counts())
			}
		}
	}()
	return c.Run(ctx, workers)
}
