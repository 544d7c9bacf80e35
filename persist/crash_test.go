package persist_test

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/boltinformer/boltinformer/persist"
	"github.com/boltinformer/boltinformer/persist/inspectfile"
)

// Crash-consistency test at the storage level.
//
// TestCrashConsistency, the parent, re-executes this test binary as a child
// running TestCrashChild. The child applies an endless deterministic stream
// of batches to one collection of a cache file. The parent SIGKILLs the
// child at a random moment and opens the file itself. It checks that what
// is on disk is exactly the state after some prefix 1..r of the stream,
// with r the stored resourceVersion. So objects, index entries and RV are
// committed together.
// The next round's child continues the stream from step r+1 on the same file.

var crashRounds = flag.Int("crash.rounds", 20, "number of kill/verify rounds of TestCrashConsistency")

const (
	crashEnvFile     = "BOLTINFORMER_CRASH_CHILD_FILE" // selects child mode
	crashEnvInterval = "BOLTINFORMER_CRASH_CHILD_INTERVAL"
	crashEnvLimit    = "BOLTINFORMER_CRASH_CHILD_LIMIT"
	crashEnvSync     = "BOLTINFORMER_CRASH_CHILD_SYNC"
	// crashEnvJournal is the child's journal: "off", or the bytes it may
	// gather before a fold.
	crashEnvJournal = "BOLTINFORMER_CRASH_CHILD_JOURNAL"

	crashCollection = "configmaps"
	crashIndex      = "byLabel"
	crashLabelKey   = "crash"
	crashNamespace  = "crash"
	crashKeySpace   = 96
	crashReportStep = 4 // the child reports progress every crashReportStep steps
)

// crashLabels are the possible label values; "" means the object has no label
// and so no value in the index.
var crashLabels = []string{"", "a", "b", "c", "d", "e"}

var crashKeys = func() []string {
	keys := make([]string, crashKeySpace)
	for i := range keys {
		keys[i] = fmt.Sprintf("%s/cm-%03d", crashNamespace, i)
	}
	return keys
}()

// crashObj is the model of one stored ConfigMap.
type crashObj struct {
	label string
	data  string
	rv    int
}

// crashModel maps store key to object: the state after a prefix of the stream.
type crashModel map[string]crashObj

type crashOp struct {
	key string
	del bool
	obj crashObj
}

// crashStep generates the ops of step (1, 2, …) and applies them to m, which
// must be the state after steps 1..step-1. The ops depend only on step and on
// m, so replaying steps 1..r from an empty model reproduces the stream and the
// state after it exactly. Ops of one step may touch the same key several
// times; the last one wins, as in Collection.Apply.
func crashStep(step int, m crashModel) []crashOp {
	r := rand.New(rand.NewPCG(uint64(step), 0x5eed_c7a5_4b1d))
	if r.IntN(20) == 0 {
		return nil // resourceVersion-only step (a bookmark)
	}
	n := 1 + r.IntN(12)
	ops := make([]crashOp, 0, n)
	for i := range n {
		key := crashKeys[r.IntN(len(crashKeys))]
		old, exists := m[key]
		del := r.IntN(20)
		if (exists && del < 5) || (!exists && del < 2) {
			// Delete, sometimes of a key that is not there.
			ops = append(ops, crashOp{key: key, del: true})
			delete(m, key)
			continue
		}
		label := crashLabels[r.IntN(len(crashLabels))]
		if exists && r.IntN(2) == 0 {
			label = old.label // update that leaves the index alone
		}
		pad := 0
		if r.IntN(8) == 0 {
			pad = r.IntN(6000) // now and then a big object, for page splits and overflow pages
		}
		obj := crashObj{
			label: label,
			data:  fmt.Sprintf("s%d.%d:", step, i) + strings.Repeat(string(rune('a'+i)), pad),
			rv:    step,
		}
		ops = append(ops, crashOp{key: key, obj: obj})
		m[key] = obj
	}
	return ops
}

func crashConfigMap(key string, o crashObj) *corev1.ConfigMap {
	ns, name, _ := strings.Cut(key, "/")
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + key), ResourceVersion: strconv.Itoa(o.rv)},
		Data:       map[string]string{"v": o.data},
	}
	if o.label != "" {
		cm.Labels = map[string]string{crashLabelKey: o.label}
	}
	return cm
}

func crashIndexValues(index string, obj runtime.Object) ([]string, error) {
	if index != crashIndex {
		return nil, fmt.Errorf("unknown index %q", index)
	}
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok {
		return nil, fmt.Errorf("unexpected %T", obj)
	}
	if v := cm.Labels[crashLabelKey]; v != "" {
		return []string{v}, nil
	}
	return nil, nil
}

func crashParseRV(rv string) (int, error) {
	if rv == "" {
		return 0, nil
	}
	return strconv.Atoi(rv)
}

// TestCrashChild is the child process of TestCrashConsistency. It never
// returns: it applies the stream until it is killed.
func TestCrashChild(t *testing.T) {
	path := os.Getenv(crashEnvFile)
	if path == "" {
		t.Skip("child process of TestCrashConsistency; runs only when started by it")
	}
	fail := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "crash child: "+format+"\n", args...)
		os.Exit(3)
	}
	// Never outlive the parent: it holds our stdin open, and its death closes it.
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		fail("stdin closed: parent is gone")
	}()
	// Last-resort guard against a runaway child.
	time.AfterFunc(2*time.Minute, func() { fail("still running after 2m") })

	interval, err := time.ParseDuration(os.Getenv(crashEnvInterval))
	if err != nil {
		fail("%s: %v", crashEnvInterval, err)
	}
	limit, err := strconv.Atoi(os.Getenv(crashEnvLimit))
	if err != nil {
		fail("%s: %v", crashEnvLimit, err)
	}
	opts := persist.Options{
		Scheme:        scheme.Scheme,
		BatchInterval: interval,
		BatchLimit:    limit,
		// NoSync is fine for this test: SIGKILL ends the process, not the
		// machine, so every write(2) bbolt made is in the page cache and is
		// what the next open reads. Some rounds still run with fsync.
		NoSync:      os.Getenv(crashEnvSync) != "1",
		LockTimeout: 10 * time.Second,
	}
	if j := os.Getenv(crashEnvJournal); j == "off" {
		opts.JournalShare = -1
	} else if n, err := strconv.ParseInt(j, 10, 64); err == nil {
		opts = persist.WithJournalBytes(opts, n)
		opts = persist.WithFoldChunk(opts, 7) // folds span several commits
	} else {
		fail("%s: %v", crashEnvJournal, err)
	}
	db, err := persist.Open(path, opts)
	if err != nil {
		fail("open: %v", err)
	}
	c, err := db.Collection(crashCollection, persist.CollectionOptions{
		Indexes:     map[string]string{crashIndex: "v1"},
		IndexValues: crashIndexValues,
	})
	if err != nil {
		fail("collection: %v", err)
	}
	r, err := crashParseRV(c.ResourceVersion())
	if err != nil {
		fail("stored resourceVersion %q: %v", c.ResourceVersion(), err)
	}
	// Rebuild the model after steps 1..r: step r+1 depends on it. The parent
	// verified that the file holds exactly this state.
	m := crashModel{}
	for step := 1; step <= r; step++ {
		crashStep(step, m)
	}
	fmt.Fprintf(os.Stdout, "ready %d\n", r)
	for step := r + 1; ; step++ {
		gops := crashStep(step, m)
		ops := make([]persist.Op, len(gops))
		for i, g := range gops {
			if g.del {
				ops[i] = persist.Op{Key: g.key, Delete: true}
				continue
			}
			op := persist.Op{Key: g.key, Object: crashConfigMap(g.key, g.obj)}
			if g.obj.label != "" {
				op.Indexes = map[string][]string{crashIndex: {g.obj.label}}
			}
			ops[i] = op
		}
		if err := c.Apply(ops, strconv.Itoa(step)); err != nil {
			fail("apply step %d: %v", step, err)
		}
		if err := db.Err(); err != nil {
			fail("commit after step %d: %v", step, err)
		}
		if step%crashReportStep == 0 {
			fmt.Fprintf(os.Stdout, "applied %d\n", step)
		}
	}
}

// crashChild is one started child process.
type crashChild struct {
	cmd     *exec.Cmd
	stdinW  *os.File // held open while the child should live
	stderr  bytes.Buffer
	ready   chan int      // the stored RV the child started from
	done    chan struct{} // closed when the child's stdout reaches EOF
	applied int           // highest step the child reported; read after done
	waited  bool
}

func startCrashChild(t *testing.T, path string, interval time.Duration, limit int, sync bool, journal string) *crashChild {
	t.Helper()
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	ch := &crashChild{stdinW: inW, ready: make(chan int, 1), done: make(chan struct{})}
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
	syncEnv := "0"
	if sync {
		syncEnv = "1"
	}
	cmd.Env = append(os.Environ(),
		crashEnvFile+"="+path,
		crashEnvInterval+"="+interval.String(),
		crashEnvLimit+"="+strconv.Itoa(limit),
		crashEnvSync+"="+syncEnv,
		crashEnvJournal+"="+journal,
	)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, &ch.stderr
	ch.cmd = cmd
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	inR.Close()
	outW.Close()
	t.Cleanup(func() {
		// Whatever happened, no child survives the test.
		if !ch.waited {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			ch.waited = true
		}
		inW.Close()
	})
	go func() {
		defer close(ch.done)
		defer outR.Close()
		sc := bufio.NewScanner(outR)
		for sc.Scan() {
			line := sc.Text()
			if s, ok := strings.CutPrefix(line, "ready "); ok {
				if r, err := strconv.Atoi(s); err == nil {
					ch.ready <- r
				}
			} else if s, ok := strings.CutPrefix(line, "applied "); ok {
				if n, err := strconv.Atoi(s); err == nil {
					ch.applied = n
				}
			}
		}
	}()
	return ch
}

// killAndWait SIGKILLs the child and reaps it. It fails the test if the child
// had already ended on its own, or reported a data race.
func (ch *crashChild) killAndWait(t *testing.T) {
	t.Helper()
	_ = ch.cmd.Process.Signal(syscall.SIGKILL)
	<-ch.done
	_ = ch.cmd.Wait()
	ch.waited = true
	ch.stdinW.Close()
	ws, _ := ch.cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child ended on its own (%v) instead of being killed; stderr:\n%s", ch.cmd.ProcessState, ch.stderr.String())
	}
	if strings.Contains(ch.stderr.String(), "DATA RACE") {
		t.Fatalf("child reported a data race:\n%s", ch.stderr.String())
	}
}

func (ch *crashChild) failExited(t *testing.T, what string) {
	t.Helper()
	_ = ch.cmd.Wait()
	ch.waited = true
	t.Fatalf("child exited %s (%v); stderr:\n%s", what, ch.cmd.ProcessState, ch.stderr.String())
}

func TestCrashConsistency(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns child processes")
	}
	rounds := max(*crashRounds, 20)
	path := filepath.Join(t.TempDir(), "crash.db")
	seed := uint64(time.Now().UnixNano())
	t.Logf("timing seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed>>7))

	model := crashModel{}
	prevR := 0
	distinct := map[int]bool{}
	lostTail := 0             // rounds whose kill dropped applied-but-uncommitted steps
	journals := map[int]int{} // journal generations left by a kill -> rounds
	midFold := 0              // rounds killed with a generation being folded
	midCopy := 0              // of those, rounds whose fold had written copies of the trees
	start := time.Now()

	for round := 0; round < rounds; round++ {
		interval := time.Duration(1+rng.IntN(5)) * time.Millisecond
		limit := persist.DefaultBatchLimit
		if rng.IntN(3) == 0 {
			limit = 1 + rng.IntN(64) // commits started by the limit, mid-interval
		}
		sync := rng.IntN(5) == 0
		delay := time.Duration(20+rng.IntN(281)) * time.Millisecond
		// Most rounds fold the journal every few dozen changes, so that
		// kills land in folds. Some write straight into the trees. Some
		// keep the default journal, which these few objects never fill.
		journal := []string{"off", "2048", "8192", "8192", "1048576"}[rng.IntN(5)]

		ch := startCrashChild(t, path, interval, limit, sync, journal)
		select {
		case r := <-ch.ready:
			if r != prevR {
				ch.killAndWait(t)
				t.Fatalf("round %d: child started from stored RV %d, the parent verified %d", round, r, prevR)
			}
		case <-ch.done:
			ch.failExited(t, "before it was ready")
		case <-time.After(30 * time.Second):
			ch.killAndWait(t)
			t.Fatalf("round %d: child not ready after 30s; stderr:\n%s", round, ch.stderr.String())
		}
		select {
		case <-time.After(delay):
		case <-ch.done:
			ch.failExited(t, "while applying")
		}
		ch.killAndWait(t)

		r, gens, folding, copies := verifyCrashFile(t, path, round, prevR, model)
		journals[gens]++
		if folding {
			midFold++
		}
		if copies > 0 {
			midCopy++
		}
		if ch.applied > r {
			lostTail++
		}
		t.Logf("round %d: interval=%v limit=%d sync=%v journal=%s killed after %v: stored RV %d (was %d), child reported step %d; journal generations %d, folding %v, records copied %d",
			round, interval, limit, sync, journal, delay, r, prevR, ch.applied, gens, folding, copies)
		distinct[r] = true
		prevR = r
	}

	t.Logf("%d rounds in %v: %d distinct stored RVs, final RV %d, %d kills lost an uncommitted tail",
		rounds, time.Since(start).Round(time.Millisecond), len(distinct), prevR, lostTail)
	if len(distinct) < rounds/2 {
		t.Errorf("only %d distinct stored RVs over %d rounds: the stream barely advanced", len(distinct), rounds)
	}
	t.Logf("journal generations left by the kills: %v; %d kills came in the middle of a fold, %d once it had copied records", journals, midFold, midCopy)
	if journals[1]+journals[2] == 0 || midFold == 0 || midCopy == 0 {
		t.Errorf("no kill left a journal, or none came in the middle of a fold after it copied records: the journal's recovery was not exercised")
	}
	if lostTail == 0 {
		t.Errorf("no kill interrupted the stream with applied but uncommitted steps: the crash was never mid-stream")
	}
}

// verifyCrashFile opens the file read-only, so nothing is rebuilt or
// written. It checks that the file holds exactly the model state after
// steps 1..r, where r is its stored RV. It advances model from prevR to r.
// It returns r with the journal's generations, whether one was being
// folded, and how many records the fold had copied (-1 for no copies).
func verifyCrashFile(t *testing.T, path string, round, prevR int, model crashModel) (r, generations int, folding bool, copies int) {
	t.Helper()
	fatal := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("round %d: "+format, append([]any{round}, args...)...)
	}
	file, err := inspectfile.Open(path, inspectfile.Options{Scheme: scheme.Scheme, LockTimeout: 10 * time.Second})
	if err != nil {
		fatal("open after kill: %v", err)
	}
	defer func() {
		if err := file.Close(); err != nil {
			t.Errorf("round %d: close: %v", round, err)
		}
	}()
	db := file.DB()
	var checkErrs []error
	if err := file.Check(func(err error) { checkErrs = append(checkErrs, err) }); err != nil {
		fatal("bbolt check: %v", err)
	}
	if err := errors.Join(checkErrs...); err != nil {
		fatal("bbolt check: %v", err)
	}

	c, err := db.Collection(crashCollection, persist.CollectionOptions{})
	if errors.Is(err, persist.ErrNoCollection) && prevR == 0 {
		// Killed before the collection was ever created.
		return 0, 0, false, -1
	}
	if err != nil {
		fatal("collection: %v", err)
	}
	if got := c.Indexes(); !reflect.DeepEqual(got, map[string]string{crashIndex: "v1"}) {
		fatal("indexes %v", got)
	}
	rvs := c.ResourceVersion()
	committed, err := c.CommittedResourceVersion()
	if err != nil || committed != rvs {
		fatal("CommittedResourceVersion %q (%v) != ResourceVersion %q", committed, err, rvs)
	}
	r, err = crashParseRV(rvs)
	if err != nil {
		fatal("stored resourceVersion %q: %v", rvs, err)
	}
	if r < prevR {
		fatal("stored RV went back from %d to %d", prevR, r)
	}
	for step := prevR + 1; step <= r; step++ {
		crashStep(step, model)
	}

	// Objects.
	want := make([]string, 0, len(model))
	for k := range model {
		want = append(want, k)
	}
	sort.Strings(want)
	keys, err := c.Keys()
	if err != nil {
		fatal("Keys: %v", err)
	}
	sort.Strings(keys)
	if !reflect.DeepEqual(keys, want) && !(len(keys) == 0 && len(want) == 0) {
		fatal("RV %d: keys on disk differ from the model after steps 1..%d:\n disk:  %v\n model: %v", r, r, keys, want)
	}
	gotRVs, err := c.ResourceVersions()
	if err != nil {
		fatal("ResourceVersions: %v", err)
	}
	for k, o := range model {
		if gotRVs[k] != strconv.Itoa(o.rv) {
			fatal("RV %d: key %s has object RV %q, model %d", r, k, gotRVs[k], o.rv)
		}
	}
	versions, err := c.Versions()
	if err != nil || len(versions) != len(model) {
		fatal("RV %d: Versions has %d keys (%v), the model %d", r, len(versions), err, len(model))
	}
	for k, o := range model {
		if v := versions[k]; v.ResourceVersion != strconv.Itoa(o.rv) || v.UID != crashConfigMap(k, o).UID {
			fatal("RV %d: key %s has version %+v, model rv %d", r, k, v, o.rv)
		}
	}
	seen := 0
	err = c.ForEach(func(key string, obj runtime.Object) error {
		seen++
		o, ok := model[key]
		if !ok {
			return fmt.Errorf("key %s is not in the model", key)
		}
		if !reflect.DeepEqual(obj, crashConfigMap(key, o)) {
			return fmt.Errorf("key %s: disk %#v, model %#v", key, obj, crashConfigMap(key, o))
		}
		return nil
	})
	if err != nil {
		fatal("RV %d: objects differ from the model: %v", r, err)
	}
	if seen != len(model) {
		fatal("RV %d: %d objects on disk, model has %d", r, seen, len(model))
	}

	// Index, through the API.
	wantByValue := map[string][]string{}
	for _, k := range want {
		if l := model[k].label; l != "" {
			wantByValue[l] = append(wantByValue[l], k)
		}
	}
	wantValues := make([]string, 0, len(wantByValue))
	for v := range wantByValue {
		wantValues = append(wantValues, v)
	}
	sort.Strings(wantValues)
	values, err := c.IndexValues(crashIndex)
	if err != nil {
		fatal("IndexValues: %v", err)
	}
	if !reflect.DeepEqual(values, wantValues) {
		fatal("RV %d: IndexValues %v, model %v", r, values, wantValues)
	}
	for _, v := range crashLabels {
		got, err := c.IndexKeys(crashIndex, v)
		if err != nil {
			fatal("IndexKeys(%q): %v", v, err)
		}
		if len(got) != len(wantByValue[v]) || (len(got) > 0 && !reflect.DeepEqual(got, wantByValue[v])) {
			fatal("RV %d: IndexKeys(%q) = %v, model %v", r, v, got, wantByValue[v])
		}
	}

	// Index, its reverse half (byKey) straight from the file: commits read it
	// to remove a key's old entries, so a stale one would corrupt later rounds.
	err = file.View(crashCollection, func(c *inspectfile.Collection) error {
		n := 0
		if err := c.ForEachIndexedKey(crashIndex, func(k string, vals []string, err error) error {
			n++
			if err != nil {
				return fmt.Errorf("byKey %s: %v", k, err)
			}
			o, ok := model[k]
			if !ok || o.label == "" || !reflect.DeepEqual(vals, []string{o.label}) {
				return fmt.Errorf("byKey %s = %v, model object %+v (present %v)", k, vals, o, ok)
			}
			return nil
		}); err != nil {
			return err
		}
		labeled := 0
		for _, ks := range wantByValue {
			labeled += len(ks)
		}
		if n != labeled {
			return fmt.Errorf("byKey has %d entries, model has %d labeled objects", n, labeled)
		}
		entries := 0
		if err := c.ForEachIndexEntry(crashIndex, func(_, _ string, _ []byte, err error) error {
			entries++
			return err
		}); err != nil {
			return err
		}
		if entries != labeled {
			return fmt.Errorf("byValue has %d entries, model has %d labeled objects", entries, labeled)
		}
		return nil
	})
	if err != nil {
		fatal("RV %d: index buckets: %v", r, err)
	}
	generations, folding = persist.JournalState(c)
	if copies, err = persist.FoldCopies(c); err != nil {
		fatal("RV %d: %v", r, err)
	}
	return r, generations, folding, copies
}
