package simulation

import (
	"fmt"
	"math/rand"
	"strings"
)

// Config is what one run fixes for its whole schedule: the informer's
// options and the server's behaviour.
type Config struct {
	Recovery       bool    // InformerOptions.Recovery with the server's recovery.Lister
	Workers        int     // recovery.Options.Workers
	FullListAt     float64 // recovery.Options.Tuning.FullListFraction (above 1: fetch one by one)
	WarmListBelow  int     // 0: the default (every simulated collection is below it); -1: off
	SyncedAtOpen   bool
	CacheObjects   int   // 0: unbounded
	PageSize       int64 // 0: client-go's choice
	BatchLimit     int   // persist.Options.BatchLimit: commits every few changes
	Checkpoint     bool  // a checkpoint handler besides the plain one
	CheckpointLate bool  // registered after Run, as controller-runtime does
	Window         int   // the watch cache's length
	ExpireInStream bool  // 410 as an ERROR event rather than a status

	// The weak apiserver (apiservers_test.go, wirelister_test.go) and the informer's
	// clock, drawn from a generator of their own so that every seed keeps
	// the steps it had before they existed.
	Instances   int  // apiservers behind the address, each with its watch cache
	Lag         bool // their watch caches lag etcd
	CachePages  bool // reads a watch cache serves honour Limit
	PageCap     int  // the most items a page holds whatever its Limit; 0: no cap
	Wire        bool // watches and recovery lists as protobuf bytes
	Cut         bool // some of those bodies end early
	RealBackoff bool // client-go's backoff (800 ms to 30 s) on a virtual clock

	// Set by enrich (content_test.go); zero in a base schedule.
	Differential bool  // client-go's informer beside ours (differential_test.go)
	Content      bool  // rich creates: names that need escaping, long names and labels
	HugeIndex    bool  // rich content with an index value longer than 32 KiB
	CacheBytes   int64 // Persistence.CacheBytes; 0: no byte bound
	BigObjects   bool  // rich content larger than CacheBytes
	Damage       bool  // the damage kinds of damagekinds_test.go

	// Set by interleave (interleave_test.go); zero in a base schedule.
	AckInHandler bool // the checkpoint's handler acknowledges in place (stale_test.go)
	FieldCuts    bool // cut bodies end at a field's boundary half the time
	Handover     bool // restarts inside the process, keeping the file open (stale_test.go)
	SlowCache    bool // with Lag, the last apiserver lags more; a second one if there was one (apiservers_test.go)
}

func (c Config) String() string {
	return fmt.Sprintf("%+v", struct {
		Recovery                                   bool
		Workers                                    int
		FullListAt                                 float64
		WarmListBelow                              int
		SyncedAtOpen                               bool
		CacheObjects                               int
		PageSize                                   int64
		BatchLimit                                 int
		Checkpoint, CheckpointLate, ExpireInStream bool
		Window                                     int
		Instances                                  int
		Lag, CachePages                            bool
		PageCap                                    int
		Wire, Cut, RealBackoff                     bool
		Differential, Content, HugeIndex           bool
		CacheBytes                                 int64
		BigObjects, Damage                         bool
		AckInHandler, FieldCuts, Handover, Slow    bool
	}{c.Recovery, c.Workers, c.FullListAt, c.WarmListBelow, c.SyncedAtOpen, c.CacheObjects, c.PageSize, c.BatchLimit, c.Checkpoint, c.CheckpointLate, c.ExpireInStream, c.Window,
		c.Instances, c.Lag, c.CachePages, c.PageCap, c.Wire, c.Cut, c.RealBackoff,
		c.Differential, c.Content, c.HugeIndex, c.CacheBytes, c.BigObjects, c.Damage,
		c.AckInHandler, c.FieldCuts, c.Handover, c.SlowCache})
}

// Op is a kind of step.
type Op string

// The steps. Server changes apply whether or not the informer runs; the
// informer's steps are no-ops where they do not apply (a Start of a running
// informer, damage to an open file), so that any subsequence of a schedule
// is a schedule (shrinking removes steps).
const (
	OpCreate      Op = "create"       // create Key (new UID) if absent
	OpUpdate      Op = "update"       // update Key if present
	OpDelete      Op = "delete"       // delete Key if present
	OpRecreate    Op = "recreate"     // delete Key and create it again with a new UID
	OpOtherWrites Op = "other-writes" // N writes to other resources: the revision moves on
	OpBookmark    Op = "bookmark"     // bookmarks to every watch
	OpEndWatches  Op = "end-watches"  // every watch times out
	OpRestart     Op = "restart"      // apiserver restart: watch cache afresh, every older revision expires
	OpCompact     Op = "compact"      // etcd compaction: continue tokens and exact reads before now expire
	OpInject      Op = "inject"       // the next N requests of Kind fail with Code
	OpStart       Op = "start"        // open the file, start the informer, wait for synced
	OpStop        Op = "stop"         // stop the informer and close the file cleanly
	OpCrash       Op = "crash"        // kill: the file keeps only what was committed
	OpFlush       Op = "flush"        // a group commit now
	OpAck         Op = "ack"          // the checkpoint's handler acknowledges some of what it got (P)
	OpStaleAck    Op = "stale-ack"    // ... acknowledges an older state of Key
	OpClear       Op = "clear"        // Checkpoint.Clear
	OpLateHandler Op = "late-handler" // a handler joins the running informer
	OpDamageJ     Op = "damage-journal"
	OpDamageR     Op = "damage-record" // the payload of the N-th stored record
	OpArm         Op = "arm"           // before the N-th request of Kind from now (or commit): Do (faults_test.go)
	OpRestartOne  Op = "restart-one"   // apiserver N restarts alone
	OpQuiet       Op = "quiet"         // no bookmarks for the next N steps

	OpCreateRich   Op = "create-rich"   // create Key with rich content of variant N (content_test.go)
	OpDamageBucket Op = "damage-bucket" // a sub-bucket of the collection missing (damagekinds_test.go)
	OpDamageHeader Op = "damage-header" // the header of the N-th stored record
	OpDamageIndex  Op = "damage-index"  // an index entry
	OpDamageMeta   Op = "damage-meta"   // a value of the collection's meta bucket

	OpHandover Op = "handover"    // a new informer replaces the running one on the open file; N odd: the old checkpoint is closed first (stale_test.go)
	OpStale    Op = "stale-calls" // calls on what the user kept of the replaced informer (stale_test.go)
)

// Step is one step of a schedule.
type Step struct {
	Op   Op
	Key  string
	N    int
	Kind string
	Code int
	P    float64
	// Do is what an armed trigger does (faults_test.go: ActCompact, ...).
	Do string
	// NoWait: the next step follows at once, without waiting for the
	// informer to settle (midop_test.go).
	NoWait bool
}

func (s Step) String() string {
	var b strings.Builder
	b.WriteString(string(s.Op))
	if s.Op == OpArm {
		fmt.Fprintf(&b, " %s#%d %s", s.Kind, s.N, s.Do)
		switch s.Do {
		case ActError, ActRestartOne:
			fmt.Fprintf(&b, " %d", s.Code)
		}
	}
	if s.Key != "" {
		b.WriteString(" " + s.Key)
	}
	switch s.Op {
	case OpOtherWrites, OpRestart, OpDamageR, OpRestartOne, OpQuiet, OpCreateRich, OpDamageBucket, OpDamageHeader, OpDamageIndex, OpDamageMeta, OpHandover:
		fmt.Fprintf(&b, " n=%d", s.N)
	case OpInject:
		fmt.Fprintf(&b, " %s %d x%d", s.Kind, s.Code, s.N)
	case OpAck:
		fmt.Fprintf(&b, " p=%.1f", s.P)
	}
	if s.NoWait {
		b.WriteString(" (no wait)")
	}
	return b.String()
}

// Schedule is one run: a seed's configuration and steps.
type Schedule struct {
	Seed   int64
	Config Config
	Steps  []Step
}

var keys = []string{"a/p0", "a/p1", "a/p2", "a/p3", "a/p4", "b/p0", "b/p1", "b/p2", "b/p3", "b/p4"}

// weighted is a choice of v with weight w (pickWeighted).
type weighted[T any] struct {
	v T
	w int
}

// pickWeighted draws one of ws, each with the chance of its weight.
func pickWeighted[T any](r *rand.Rand, ws []weighted[T]) T {
	total := 0
	for _, w := range ws {
		total += w.w
	}
	x := r.Intn(total)
	for _, w := range ws {
		if x < w.w {
			return w.v
		}
		x -= w.w
	}
	panic("unreachable")
}

// Generate returns seed's schedule of about n steps, with the weak server's
// steps (weakschedule_test.go), enriched (content_test.go) and interleaved with
// operations cut halfway (interleave_test.go).
func Generate(seed int64, n int) Schedule {
	s := generate(seed, n, newWeakGen(seed))
	enrich(&s)
	interleave(&s)
	return s
}

// GenerateBase returns seed's schedule as generated before the weak server
// and the oracles' enrichment: the regression seeds' schedules.
func GenerateBase(seed int64, n int) Schedule {
	return generate(seed, n, nil)
}

// generate returns seed's schedule; weak, if not nil, adds the weak
// server's configuration and steps.
func generate(seed int64, n int, weak *weakGen) Schedule {
	rng := rand.New(rand.NewSource(seed))
	cfg := Config{
		Recovery:       rng.Intn(4) != 0,
		Workers:        1 + rng.Intn(4),
		FullListAt:     []float64{0.25, 2}[rng.Intn(2)],
		WarmListBelow:  []int{0, 0, -1}[rng.Intn(3)],
		SyncedAtOpen:   rng.Intn(6) == 0,
		CacheObjects:   []int{0, 0, 2, 4}[rng.Intn(4)],
		PageSize:       []int64{0, 2, 3, 5}[rng.Intn(4)],
		BatchLimit:     2 + rng.Intn(12),
		Checkpoint:     rng.Intn(3) != 0,
		CheckpointLate: rng.Intn(4) == 0,
		Window:         2 + rng.Intn(20),
		ExpireInStream: rng.Intn(2) == 0,
	}
	weak.config(&cfg)
	existing := map[string]bool{}
	up := false
	var steps []Step
	key := func() string { return keys[rng.Intn(len(keys))] }
	for range 2 + rng.Intn(5) {
		k := key()
		steps = append(steps, Step{Op: OpCreate, Key: k})
		existing[k] = true
	}
	upOps := []weighted[Op]{
		{OpCreate, 16}, {OpUpdate, 18}, {OpDelete, 9}, {OpRecreate, 5}, {OpOtherWrites, 3},
		{OpBookmark, 2}, {OpEndWatches, 3}, {OpRestart, 5}, {OpCompact, 3}, {OpInject, 6},
		{OpFlush, 4}, {OpAck, 8}, {OpStaleAck, 2}, {OpClear, 1}, {OpLateHandler, 2},
		{OpStop, 4}, {OpCrash, 4},
	}
	downOps := []weighted[Op]{
		{OpCreate, 8}, {OpUpdate, 10}, {OpDelete, 6}, {OpRecreate, 3}, {OpOtherWrites, 3},
		{OpRestart, 5}, {OpCompact, 2}, {OpInject, 3}, {OpDamageJ, 4}, {OpDamageR, 2},
		{OpStart, 22},
	}
	generated := len(steps) + 1 // the creates and the start; inserted steps do not count
	steps = append(steps, weak.beforeStart(cfg)...)
	steps = append(steps, Step{Op: OpStart})
	up = true
	for ; generated < n; generated++ {
		steps = append(steps, weak.before(cfg, up)...)
		ops := downOps
		if up {
			ops = upOps
		}
		s := Step{Op: pickWeighted(rng, ops)}
		switch s.Op {
		case OpCreate:
			s.Key = key()
			if existing[s.Key] { // prefer a key that does not exist
				s.Key = key()
			}
			existing[s.Key] = true
		case OpUpdate, OpRecreate:
			s.Key = key()
		case OpDelete:
			s.Key = key()
			delete(existing, s.Key)
		case OpOtherWrites:
			s.N = 1 + rng.Intn(5)
		case OpRestart:
			s.N = 1 + rng.Intn(20)
		case OpInject:
			s.Kind = []string{KindList, KindWatch, KindMeta, KindFetch, KindAny}[rng.Intn(5)]
			s.Code = []int{403, 404, 429, 500}[rng.Intn(4)]
			s.N = 1 + rng.Intn(3)
		case OpAck:
			s.P = []float64{0.3, 0.7, 1}[rng.Intn(3)]
		case OpStaleAck:
			s.Key = key()
		case OpDamageR:
			s.N = rng.Intn(10)
		case OpStart:
			up = true
		case OpStop, OpCrash:
			up = false
		}
		weak.mark(&s, up)
		steps = append(steps, s)
	}
	return Schedule{Seed: seed, Config: cfg, Steps: steps}
}
