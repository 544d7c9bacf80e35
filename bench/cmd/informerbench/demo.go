package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"
)

// runDemo is `make demo`: a local apiserver with a few thousand Pods, a
// client-go cold start, a boltinformer cold start and a warm restart, each
// in its own process, side by side; and a hot snapshot of the cache file
// for inspect. Everything it starts is torn down before it returns.
func runDemo(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	pods := fs.Int("pods", 3000, "Pods to create.")
	snapshot := fs.String("snapshot", "", "Write a hot snapshot of the cache file here (for inspect).")
	workers := fs.Int("workers", 48, "Concurrent requests when creating Pods.")
	if err := fs.Parse(args); err != nil {
		return err
	}
	work, err := mkWorkDir()
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	cl, err := connect(ctx, "", work, out)
	if err != nil {
		return err
	}
	defer func() {
		fmt.Fprintln(out, "\nstopping kube-apiserver and etcd, removing their data…")
		cl.close()
	}()
	cs, err := cl.clientset()
	if err != nil {
		return err
	}
	if err := populate(ctx, cl, *pods, *workers, out); err != nil {
		return err
	}

	spec := func(variant, informer, contentType string) childSpec {
		return childSpec{
			Variant: variant, Informer: informer, ContentType: contentType,
			Kubeconfig: cl.kubeconfig, Selector: podSelector, Expect: *pods,
			File: filepath.Join(work, "cache.db"),
		}
	}
	clientGo := spec(vClientGoJSON, informerClientGo, "application/json")
	cold := spec(vBoltCold, informerBolt, protobufContentType)
	cold.Fresh = true
	warm := spec(vBoltWarm, informerBolt, protobufContentType)
	warm.Snapshot = *snapshot
	steps := []struct {
		title string
		spec  *childSpec
		res   *childResult
	}{
		{title: "client-go informer (JSON, watch-list), cold start", spec: &clientGo},
		{title: "boltinformer, cold start (empty file)", spec: &cold},
		{title: "boltinformer, warm restart", spec: &warm},
	}
	churn := min(max(*pods/100, 10), *pods)
	for i := range steps {
		st := &steps[i]
		if st.spec == &warm {
			if _, warm.CatchUpRV, err = patchPods(ctx, cs, *pods, churn, *workers, newTag("demo")); err != nil {
				return err
			}
			fmt.Fprintf(out, "changed %d Pods while boltinformer was stopped\n", churn)
		}
		fmt.Fprintf(out, "%d/%d %s (own process)…\n", i+1, len(steps), st.title)
		if st.res, err = spawn(ctx, *st.spec, filepath.Join(work, st.spec.Variant+".log"), nil); err != nil {
			return err
		}
	}

	fmt.Fprintf(out, "\n%d Pods on a local kube-apiserver:\n\n", *pods)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\ttime to synced\tLIST requests\twatch-list streams\tobjects from disk\tRSS after sync\t")
	for _, st := range steps {
		r := st.res
		fromDisk := "-"
		if r.StartCause == "resumed" {
			fromDisk = fmt.Sprint(r.InitialAdds)
		}
		fmt.Fprintf(tw, "%s\t%v\t%d\t%d\t%s\t%.0f MiB\t\n", st.title, seconds(r.SyncSeconds),
			r.Lists, r.WatchLists, fromDisk, mib(r.RSSBytes))
	}
	tw.Flush()
	cg, w := steps[0].res, steps[2].res
	fmt.Fprintf(out, "\nThe warm restart was synced %.1f× sooner than client-go's cold start, with %d LIST requests:\n"+
		"its handlers got the %d Pods stored in the file, and the watch resumed from the stored\n"+
		"resourceVersion; the %d Pods changed meanwhile arrived as updates %v after start (%d objects rewritten).\n",
		cg.SyncSeconds/w.SyncSeconds, w.Lists, w.InitialAdds, churn, seconds(w.CaughtUpSeconds), w.Rewritten)
	if *snapshot != "" {
		fmt.Fprintf(out, "A hot snapshot of its cache file, taken while it ran, is at %s.\n", *snapshot)
	}
	if w.Lists != 0 || w.StartCause != "resumed" {
		return fmt.Errorf("the warm restart listed (%d LIST requests, start %q), which it should not", w.Lists, w.StartCause)
	}
	return nil
}

func seconds(s float64) time.Duration {
	return time.Duration(s * float64(time.Second)).Round(time.Millisecond)
}
