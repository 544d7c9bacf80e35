package persist

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/boltinformer/boltinformer/internal/format"
)

// TestJournalHoldsGenerated draws journal records and the journals that
// commits and damage leave beside them. Every journal an older build's
// appends leave must be accepted. Every journal that lost or changed part
// of what the record names must be refused. The seed is logged, so a
// failure can be replayed.
func TestJournalHoldsGenerated(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 0))
	for n := 0; n < 20000; n++ {
		record := drawJournalRecord(r)
		appended := appendAsOlderBuild(r, record)
		if !journalHolds(appended, record) {
			t.Fatalf("an older build's appends %v to the record %v were taken for damage", appended, record)
		}
		if damaged, how, ok := damageJournal(r, appended, record); ok && journalHolds(damaged, record) {
			t.Fatalf("the journal %v, from %v by %s, was taken as holding the record %v", damaged, appended, how, record)
		}
	}
}

// drawJournalRecord returns at most two generations, numbered upwards,
// each with its last sequence number, as commits record them.
func drawJournalRecord(r *rand.Rand) []format.JournalGeneration {
	var out []format.JournalGeneration
	gen := 1 + r.Uint64N(5)
	for range r.IntN(3) {
		out = append(out, format.JournalGeneration{Gen: gen, Last: r.Uint64N(4)})
		gen += 1 + r.Uint64N(2)
	}
	return out
}

// appendAsOlderBuild returns the journal after commits of a build that
// appends but keeps no record. Each commit appends to the newest
// generation, or seals it and starts the next. No journal has more than
// two generations.
func appendAsOlderBuild(r *rand.Rand, record []format.JournalGeneration) []format.JournalGeneration {
	out := slices.Clone(record)
	for range r.IntN(4) {
		if len(out) == 0 || (len(out) < 2 && r.IntN(3) == 0) {
			gen := uint64(1)
			if len(out) > 0 {
				gen = out[len(out)-1].Gen + 1
			}
			out = append(out, format.JournalGeneration{Gen: gen})
		}
		out[len(out)-1].Last += 1 + r.Uint64N(3)
	}
	return out
}

// damageJournal loses or changes part of what the record names in
// journal, and says how. It reports false when the record names nothing
// to lose.
func damageJournal(r *rand.Rand, journal, record []format.JournalGeneration) ([]format.JournalGeneration, string, bool) {
	if len(record) == 0 {
		return nil, "", false
	}
	out := slices.Clone(journal)
	i := r.IntN(len(record))
	switch r.IntN(4) {
	case 0:
		return slices.Delete(out, i, i+1), "deleting a generation", true
	case 1:
		if record[i].Last == 0 {
			return nil, "", false
		}
		out[i].Last = r.Uint64N(record[i].Last)
		return out, "losing entries", true
	case 2:
		out[i].Gen += 1 + r.Uint64N(3)
		return out, "renumbering a generation", true
	default:
		if i == len(record)-1 {
			return nil, "", false
		}
		out[i].Last += 1 + r.Uint64N(3)
		return out, "appending to a sealed generation", true
	}
}
