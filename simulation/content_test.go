package simulation

import (
	"fmt"
	"math/rand"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
)

// Content at the limits of what Kubernetes allows, and beyond the file's:
// names with '.' and '-' (which sort before the key separator '/'), a
// namespace whose name extends another's, 253-character names and
// 63-character namespaces and label values, annotations of arbitrary bytes,
// an index value longer than bbolt's 32 KiB key limit, and objects larger
// than the bounded cache's byte bound.

var (
	// longName is a 253-character DNS subdomain, the longest object name.
	longName = strings.Repeat("a", 63) + "." + strings.Repeat("b", 63) + "." + strings.Repeat("c", 63) + "." + strings.Repeat("d", 61)
	// longNamespace is a 63-character DNS label, the longest namespace.
	longNamespace = "n" + strings.Repeat("s-", 30) + "n0"
)

// richKeys are the keys rich steps use besides the schedule's own.
var richKeys = []string{
	"a/p.0",
	"a/p-0",
	"a-1/p0",
	"a-1/p.0.x",
	"b/" + longName,
	longNamespace + "/p0",
	longNamespace + "/" + longName,
}

// tierValues are label values: the longest allowed, and the punctuation a
// label value may hold.
var tierValues = []string{"t0", "a.b-c_d", strings.Repeat("z", 63), "x-1.y_2"}

// notes are annotation values, which may hold any bytes.
var notes = []string{"plain", "k=v,x/y;a\\b", "ünïcødé ✓", "nul\x00byte", ""}

const (
	hugeNoteBytes = 40 << 10 // above bbolt's MaxKeySize (32 KiB) as an index value
	blobBytes     = 48 << 10 // above CacheBytes (16 KiB) as a record
)

// richPod returns the object a rich create writes: variant chooses its
// labels and annotations; cfg whether they are huge.
func richPod(ns, name string, uid types.UID, gen, variant int, cfg Config) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Namespace: ns, Name: name, UID: uid,
		Labels:      map[string]string{"gen": strconv.Itoa(gen), "tier": tierValues[variant%len(tierValues)]},
		Annotations: map[string]string{"note": notes[variant%len(notes)]},
	}}
	if cfg.HugeIndex && variant%2 == 0 {
		p.Annotations["note"] = strings.Repeat("n", hugeNoteBytes) + strconv.Itoa(variant)
	}
	if cfg.BigObjects && variant%3 == 0 {
		p.Annotations["blob"] = strings.Repeat("b", blobBytes)
	}
	return p
}

// CreateWith creates the object key with a new UID, made by mk; false if
// it exists.
func (s *Server) CreateWith(key string, mk func(ns, name string, uid types.UID) *corev1.Pod) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.objs[key]; ok {
		return false
	}
	s.uids++
	ns, name := splitKey(key)
	s.writeLocked(watch.Added, mk(ns, name, types.UID(fmt.Sprintf("uid-%d", s.uids))))
	return true
}

// createRich runs a rich create on srv.
func createRich(srv *Server, key string, gen, variant int, cfg Config) {
	srv.CreateWith(key, func(ns, name string, uid types.UID) *corev1.Pod {
		return richPod(ns, name, uid, gen, variant, cfg)
	})
}

// enrich adds to a generated schedule what the oracles added to the
// simulation: the differential mode, rich content, a byte-bounded cache and
// the newer kinds of damage. It draws from a generator of its own, so a
// seed's base schedule (config and steps, in order) is what it was before,
// and its steps stay a subsequence of the enriched schedule's.
func enrich(s *Schedule) {
	rng := rand.New(rand.NewSource(s.Seed*7919 + 104729))
	c := &s.Config
	c.Differential = rng.Intn(4) != 0
	c.Content = rng.Intn(2) == 0
	c.CacheBytes = []int64{0, 0, 0, 16 << 10}[rng.Intn(4)]
	c.BigObjects = c.Content && c.CacheBytes > 0 && rng.Intn(2) == 0
	c.HugeIndex = c.Content && rng.Intn(8) == 0
	c.Damage = rng.Intn(3) == 0

	var out []Step
	up := false
	for _, st := range s.Steps {
		out = append(out, st)
		switch st.Op {
		case OpStart:
			up = true
		case OpStop, OpCrash:
			up = false
		}
		if c.Content && rng.Intn(5) == 0 {
			key := richKeys[rng.Intn(len(richKeys))]
			if rng.Intn(4) == 0 {
				key = keys[rng.Intn(len(keys))]
			}
			ops := []Op{OpCreateRich, OpCreateRich, OpCreateRich, OpUpdate, OpUpdate, OpDelete, OpRecreate}
			out = append(out, Step{Op: ops[rng.Intn(len(ops))], Key: key, N: rng.Intn(12)})
		}
		if c.Damage && !up && rng.Intn(3) == 0 {
			kinds := []Op{OpDamageBucket, OpDamageHeader, OpDamageIndex, OpDamageMeta}
			out = append(out, Step{Op: kinds[rng.Intn(len(kinds))], N: rng.Intn(12)})
		}
	}
	s.Steps = out
}
