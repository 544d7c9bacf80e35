package e2e

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"github.com/boltinformer/boltinformer/internal/testing/apiservertest"
	"github.com/boltinformer/boltinformer/persist"
	"github.com/boltinformer/boltinformer/reflector"
)

// Environment of the child informer (TestInformerChild).
const (
	childEnv      = "BOLTINFORMER_E2E_CHILD" // "1" in the child
	childHostEnv  = "BOLTINFORMER_E2E_CHILD_HOST"
	childTokenEnv = "BOLTINFORMER_E2E_CHILD_TOKEN"
	childCAEnv    = "BOLTINFORMER_E2E_CHILD_CA"
	childDBEnv    = "BOLTINFORMER_E2E_CHILD_DB"
	childNSEnv    = "BOLTINFORMER_E2E_CHILD_NAMESPACE"
)

// childLinePrefix starts every line the child prints for the parent.
const childLinePrefix = "E2E-CHILD "

const (
	stormTest       = "storm"
	stormCollection = "configmaps-storm"
	stormInitial    = 300
	stormWorkers    = 3
	// stormShortCommit is the group commit interval of every other child.
	stormShortCommit = 20 * time.Millisecond
	// childBatchIntervalEnv sets a TestInformerChild's group commit
	// interval (persist.Options.BatchInterval); unset: persist's default.
	childBatchIntervalEnv = "BOLTINFORMER_E2E_CHILD_BATCH_INTERVAL"
)

// TestKillDuringWriteStorm runs an informer in a child process, SIGKILLs it
// at random points while a write storm creates, updates and deletes
// ConfigMaps, and restarts it on the same cache file each time; every other
// child commits every 20 ms (kills land in commits), the others on the
// default one-second interval. Finally an
// in-process informer resumes from the file. It must converge to exactly
// the server's state: no lost deletion, no missing object. It must do so
// without relisting, since a relist would repair exactly the damage this
// test looks for.
func TestKillDuringWriteStorm(t *testing.T) {
	const ns = "storm"
	srv := apiservertest.Start(t, apiservertest.Options{})
	admin := newClientset(t, srv.Config(), nil)
	createNamespaces(t, admin, ns)
	initial := populateConfigMaps(t, admin, stormTest, []string{ns}, stormInitial)

	path := cachePath(t)
	childLog := newChildLog(t)
	cfg := srv.Config()
	env := childEnvironment(cfg, path, childNSEnv+"="+ns)

	st := newStorm(admin, ns, initial)
	// The storm stops between requests, never cancelling one in flight.
	// A cancelled write has no known outcome: the server may commit it
	// after the client gave up, and after the final state was listed.
	stopStorm := make(chan struct{})
	var stormWG sync.WaitGroup
	for w := range stormWorkers {
		stormWG.Go(func() { st.worker(t.Context(), stopStorm, uint64(w)) })
	}
	stormStopped := false
	halt := func() {
		if !stormStopped {
			stormStopped = true
			close(stopStorm)
			stormWG.Wait()
		}
	}
	defer halt()

	kills := *flagKills
	var killedAfterSync int
	var lines []string
	for i := range kills {
		// Every other child commits every 20 ms, so that kills often land
		// in a commit; the others on persist's default interval (a
		// second), as users run it.
		shortCommits := i%2 == 0
		environ := env
		if shortCommits {
			environ = append(slices.Clone(env), childBatchIntervalEnv+"="+stormShortCommit.String())
		}
		c := startChild(t, "TestInformerChild", environ, childLog)
		// Every third kill may land anywhere in start-up (opening the file,
		// listing, the first commit); the others land while the synced
		// child is applying the storm's events.
		afterSync := i%3 != 0
		if afterSync {
			select {
			case <-c.out.synced:
			case <-c.waited:
				t.Fatalf("child %d exited before syncing: %v\n%s", i, c.err, tail(childLog.Name()))
			case <-time.After(time.Minute):
				t.Fatalf("child %d did not sync within a minute\n%s", i, tail(childLog.Name()))
			}
		}
		delay := 100*time.Millisecond + rand.N(700*time.Millisecond)
		if afterSync && !shortCommits {
			// Past the first commit (its timer started with the list, before
			// the sync), so that the file moves on between kills.
			delay += persist.DefaultBatchInterval
		}
		select {
		case <-time.After(delay):
		case <-c.waited:
			t.Fatalf("child %d exited on its own: %v\n%s", i, c.err, tail(childLog.Name()))
		}
		c.kill()
		select {
		case <-c.out.synced:
			killedAfterSync++
		default:
		}
		lines = append(lines, c.out.lines()...)
	}
	halt()
	if err := st.error(); err != nil {
		t.Fatalf("write storm: %v", err)
	}
	creates, updates, deletes, deleted := st.stats()
	t.Logf("write storm: %d creates, %d updates, %d deletes; %d kills (%d after the child synced)",
		creates, updates, deletes, kills, killedAfterSync)
	t.Logf("children reported: %s", summarizeChildLines(lines))

	server := serverConfigMaps(t, admin, ns, e2eLabel+"="+stormTest)
	for key := range deleted {
		if _, ok := server[key]; ok {
			t.Fatalf("server still holds %s, which the storm deleted", key)
		}
	}

	// The final informer, in process.
	db := openDB(t, path)
	obs := &observer{}
	counter := &requestCounter{resource: "configmaps"}
	inf := newInformer(t, informerSpec{cs: newClientset(t, cfg, counter), db: db, collection: stormCollection,
		resource: "configmaps", namespace: ns, selector: e2eLabel + "=" + stormTest, observer: obs})
	coll := inf.Indexer().Collection()
	storedRV := coll.ResourceVersion()
	if storedRV == "" {
		t.Fatal("the cache file holds no resourceVersion after the kills: no child ever committed")
	}
	stored, err := coll.ResourceVersions()
	if err != nil {
		t.Fatal(err)
	}
	// The file is a prefix of the event stream: no object is newer than the
	// stored resourceVersion.
	for key, rv := range stored {
		if rvNumber(t, rv) > rvNumber(t, storedRV) {
			t.Errorf("stored %s has rv %s, newer than the collection's %s", key, rv, storedRV)
		}
	}
	var staleDeleted int
	for key := range stored {
		if _, ok := deleted[key]; ok {
			staleDeleted++
		}
	}
	t.Logf("cache file after the last kill: %d objects at rv %s (%d of them since deleted on the server, to be removed by the resumed watch)",
		len(stored), storedRV, staleDeleted)

	rec := &recorder{}
	if _, err := inf.AddEventHandler(rec); err != nil {
		t.Fatal(err)
	}
	r := run(t, inf)
	waitSynced(t, inf)
	waitServerState(t, time.Minute, "final informer converging to the server's state", server,
		func() state { return serverConfigMaps(t, admin, ns, e2eLabel+"="+stormTest) }, inf, obs)
	got := storeState(t, inf.GetStore())
	r.stop()

	requireSameState(t, "final informer store", server, got)
	for key := range deleted {
		if _, ok := got[key]; ok {
			t.Errorf("lost deletion: %s is in the store but was deleted on the server", key)
		}
	}
	for key := range server {
		if _, ok := got[key]; !ok {
			t.Errorf("missing object: %s", key)
		}
	}
	if causes := obs.startCauses(); fmt.Sprint(causes) != fmt.Sprint([]reflector.StartCause{reflector.CauseResumed}) {
		t.Errorf("final informer start causes = %v, want only %q: a relist would hide lost deletions", causes, reflector.CauseResumed)
	}
	if n := counter.lists.Load(); n != 0 {
		t.Errorf("final informer made %d LIST requests, want 0", n)
	}
	t.Logf("final informer resumed from rv %s and converged with %d handler calls; %d objects on the server",
		storedRV, rec.len(), len(server))
}

// TestInformerChild is the child half of TestKillDuringWriteStorm: it opens
// the cache file, runs a ConfigMap informer on one namespace and reports on
// stdout, until it is killed.
func TestInformerChild(t *testing.T) {
	cfg := childConfig(t, "TestKillDuringWriteStorm")
	opts := persist.Options{Scheme: scheme.Scheme}
	if v := os.Getenv(childBatchIntervalEnv); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("%s: %v", childBatchIntervalEnv, err)
		}
		opts.BatchInterval = d
	}
	db, err := persist.Open(os.Getenv(childDBEnv), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	inf := newInformer(t, informerSpec{cs: newClientset(t, cfg, nil), db: db, collection: stormCollection,
		resource: "configmaps", namespace: os.Getenv(childNSEnv), selector: e2eLabel + "=" + stormTest,
		observer: childObserver{}})
	run(t, inf)
	waitClosed(t, inf.HasSyncedChecker().Done(), time.Minute, "child informer sync")
	fmt.Printf("%ssynced objects=%d rv=%s\n", childLinePrefix, len(inf.GetStore().ListKeys()),
		inf.Indexer().Collection().ResourceVersion())
	<-t.Context().Done() // Killed long before the test times out.
}

// childObserver prints the reflector's start causes for the parent.
type childObserver struct{}

func (childObserver) Resumed(rv string) { fmt.Printf("%sresumed rv=%s\n", childLinePrefix, rv) }
func (childObserver) Listed(cause reflector.StartCause, rv string, items, _ int) {
	fmt.Printf("%slisted cause=%s rv=%s items=%d\n", childLinePrefix, cause, rv, items)
}
func (childObserver) WatchStarted(string) {}
func (childObserver) WatchEnded(error)    {}

// child is a running TestInformerChild process.
type child struct {
	cmd    *exec.Cmd
	out    *childOutput
	waited chan struct{} // closed once the process is reaped; err is set then
	err    error
	once   sync.Once
}

// childEnvironment is the environment of a child process that reaches the
// apiserver of cfg and opens the cache file at path; extra adds variables.
func childEnvironment(cfg *rest.Config, path string, extra ...string) []string {
	return append(append(os.Environ(),
		childEnv+"=1",
		childHostEnv+"="+cfg.Host,
		childTokenEnv+"="+cfg.BearerToken,
		childCAEnv+"="+string(cfg.TLSClientConfig.CAData),
		childDBEnv+"="+path,
	), extra...)
}

// childConfig skips t unless it runs as a child process of the test named
// parent, and returns the config of the apiserver the parent gave it (see
// childEnvironment).
func childConfig(t *testing.T, parent string) *rest.Config {
	t.Helper()
	if os.Getenv(childEnv) != "1" {
		t.Skip("helper process of " + parent)
	}
	return &rest.Config{
		Host:            os.Getenv(childHostEnv),
		BearerToken:     os.Getenv(childTokenEnv),
		TLSClientConfig: rest.TLSClientConfig{CAData: []byte(os.Getenv(childCAEnv))},
		QPS:             1000,
		Burst:           2000,
	}
}

// newChildLog creates the file children write their stderr to; it is closed
// in t's cleanup.
func newChildLog(t *testing.T) *os.File {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), "children.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	return f
}

// startChild re-executes the test binary as the test named test (a child
// half such as TestInformerChild). The child is killed in t's cleanup if
// still running, and by the kernel if the test binary dies (Pdeathsig, on
// Linux).
func startChild(t *testing.T, test string, env []string, stderr *os.File) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.count=1", "-test.timeout=5m")
	cmd.Env = env
	c := &child{cmd: cmd, out: newChildOutput(), waited: make(chan struct{})}
	cmd.Stdout = c.out
	cmd.Stderr = stderr
	cmd.SysProcAttr = childSysProcAttr()
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting child: %v", err)
	}
	go func() {
		c.err = cmd.Wait()
		close(c.waited)
	}()
	t.Cleanup(c.kill)
	return c
}

// kill SIGKILLs the child and waits until it is reaped.
func (c *child) kill() {
	c.once.Do(func() { _ = c.cmd.Process.Kill() })
	<-c.waited
}

// childOutput collects the child's report lines and signals synced.
type childOutput struct {
	mu       sync.Mutex
	partial  []byte
	reported []string
	synced   chan struct{}
}

func newChildOutput() *childOutput { return &childOutput{synced: make(chan struct{})} }

func (o *childOutput) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.partial = append(o.partial, p...)
	for {
		i := bytes.IndexByte(o.partial, '\n')
		if i < 0 {
			break
		}
		line := string(o.partial[:i])
		o.partial = o.partial[i+1:]
		if rest, ok := strings.CutPrefix(line, childLinePrefix); ok {
			o.reported = append(o.reported, rest)
			if strings.HasPrefix(rest, "synced") {
				close(o.synced)
			}
		}
	}
	return len(p), nil
}

func (o *childOutput) lines() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.reported...)
}

// summarizeChildLines counts the children's reports by kind (and list
// cause).
func summarizeChildLines(lines []string) string {
	counts := map[string]int{}
	var order []string
	for _, l := range lines {
		fields := strings.Fields(l)
		kind := fields[0]
		if kind == "listed" && len(fields) > 1 {
			kind += " " + fields[1] // the cause
		}
		if _, ok := counts[kind]; !ok {
			order = append(order, kind)
		}
		counts[kind]++
	}
	var parts []string
	for _, k := range order {
		parts = append(parts, fmt.Sprintf("%q×%d", k, counts[k]))
	}
	return strings.Join(parts, ", ")
}

// tail returns the last lines of a log file, for failure messages.
func tail(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	const max = 8 << 10
	if len(data) > max {
		data = data[len(data)-max:]
	}
	return string(data)
}

// storm creates, patches and deletes ConfigMaps of one namespace from
// several goroutines, tracking which names exist and which were deleted.
// Names are never reused.
type storm struct {
	cs kubernetes.Interface
	ns string

	// mu guards the fields below.
	mu   sync.Mutex
	live []string // keys that exist and no worker is changing
	// deleted holds the keys whose deletion the server confirmed.
	deleted                   map[string]struct{}
	next                      int
	creates, updates, deletes int
	err                       error
}

func newStorm(cs kubernetes.Interface, ns string, initial state) *storm {
	return &storm{cs: cs, ns: ns, live: sortedKeys(initial), deleted: map[string]struct{}{}}
}

type stormOp int

const (
	opCreate stormOp = iota
	opUpdate
	opDelete
)

// pick chooses the next operation and, for updates and deletes, takes a
// live key out of the pool while the worker changes it.
func (s *storm) pick(rng *rand.Rand) (stormOp, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := rng.Float64()
	if len(s.live) < 100 || r < 0.4 {
		key := fmt.Sprintf("%s/s-%06d", s.ns, s.next)
		s.next++
		return opCreate, key
	}
	i := rng.IntN(len(s.live))
	key := s.live[i]
	s.live[i] = s.live[len(s.live)-1]
	s.live = s.live[:len(s.live)-1]
	if r < 0.75 {
		return opUpdate, key
	}
	return opDelete, key
}

// worker changes ConfigMaps until stop is closed. It checks stop only
// between requests, so every change it made has a known outcome.
func (s *storm) worker(ctx context.Context, stop <-chan struct{}, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 42))
	cms := s.cs.CoreV1().ConfigMaps(s.ns)
	for n := 0; ; n++ {
		select {
		case <-stop:
			return
		default:
		}
		op, key := s.pick(rng)
		_, name := splitKey(key)
		// A request that hangs fails the storm, rather than its stop.
		reqCtx, cancel := context.WithTimeout(ctx, time.Minute)
		var err error
		switch op {
		case opCreate:
			_, err = cms.Create(reqCtx, configMap(s.ns, name, stormTest, n), metav1.CreateOptions{})
		case opUpdate:
			patch := fmt.Sprintf(`{"data":{"n":"%d"}}`, n)
			_, err = cms.Patch(reqCtx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		case opDelete:
			err = cms.Delete(reqCtx, name, metav1.DeleteOptions{})
		}
		cancel()
		s.mu.Lock()
		switch {
		case err != nil:
			if s.err == nil {
				s.err = fmt.Errorf("%v %s: %w", op, key, err)
			}
		case op == opCreate:
			s.creates++
			s.live = append(s.live, key)
		case op == opUpdate:
			s.updates++
			s.live = append(s.live, key)
		case op == opDelete:
			s.deletes++
			s.deleted[key] = struct{}{}
		}
		failed := s.err != nil
		s.mu.Unlock()
		if failed {
			return
		}
	}
}

func (s *storm) error() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

func (s *storm) stats() (creates, updates, deletes int, deleted map[string]struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]struct{}, len(s.deleted))
	for k := range s.deleted {
		out[k] = struct{}{}
	}
	return s.creates, s.updates, s.deletes, out
}

func (op stormOp) String() string {
	return [...]string{"create", "update", "delete"}[op]
}
