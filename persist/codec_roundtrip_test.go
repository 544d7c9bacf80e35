package persist_test

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand"
	"reflect"
	"runtime/debug"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/vmihailenco/msgpack/v5"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/apitesting/fuzzer"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metafuzzer "k8s.io/apimachinery/pkg/apis/meta/fuzzer"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	runtimeserializer "k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/dump"
	"sigs.k8s.io/randfill"

	"github.com/boltinformer/boltinformer/internal/format"
	"github.com/boltinformer/boltinformer/internal/testing/fixture"
	"github.com/boltinformer/boltinformer/persist"
	"github.com/boltinformer/boltinformer/persist/inspectfile"
)

var (
	roundTripN = flag.Int("roundtrip.n", 20,
		"fuzzed objects per kind in TestCodecRoundTripAllKinds (at least 20 are always used)")
	roundTripSeed = flag.Int64("roundtrip.seed", 0,
		"seed of the round-trip fuzzers; 0 picks one from the clock (it is logged, to reproduce a failure)")
)

// fuzzSeed returns the base seed of this run.
func fuzzSeed(t *testing.T) int64 {
	t.Helper()
	seed := *roundTripSeed
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	t.Logf("fuzz seed %d (rerun with -roundtrip.seed=%d)", seed, seed)
	return seed
}

// seedFor derives a per-name seed, so that one subtest can be reproduced alone
// (-run) and parallel subtests do not share a random source.
func seedFor(base int64, name string) int64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	return base ^ int64(h.Sum64())
}

// objectDiff is cmp.Diff(want, got): "-" lines are want, "+" lines got.
// Unexported fields are compared too, since a round trip must reproduce the
// Go value as reflect.DeepEqual sees it.
func objectDiff(want, got any) string {
	if d := cmp.Diff(want, got, cmp.Exporter(func(reflect.Type) bool { return true })); d != "" {
		return d
	}
	return "(cmp.Diff finds no difference: the values differ only where an Equal method says they are equal)"
}

// mustNotPanic runs f and turns a panic into a test error naming what.
func mustNotPanic(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("%s panicked: %v\n%s", what, r, debug.Stack())
		}
	}()
	f()
}

// roundTripKinds returns the kinds TestCodecRoundTripAllKinds covers: every
// GroupVersionKind of client-go's scheme except the "__internal" versions.
//
// Included on purpose:
//   - List kinds (PodList, ...): a cache does not store them, but they are
//     ordinary protobuf messages in the scheme and cost little, so the codec
//     is held to them too.
//   - The meta kinds every group version registers (WatchEvent, ListOptions,
//     GetOptions, DeleteOptions, CreateOptions, UpdateOptions, PatchOptions).
//     apitesting/roundtrip skips most of them (globalNonRoundTrippableTypes:
//     WatchEvent carries no kind on the wire and decodes only when the caller
//     names its type; the options kinds are decoded through the meta group,
//     not the group version they are registered in). Neither applies here:
//     the record names the Go type and keeps TypeMeta, so they must
//     round-trip, and they do.
//
// Excluded: the "__internal" version of WatchEvent in every group
// (metav1.InternalEvent). Internal versions exist only in memory inside the
// apiserver's conversion machinery; an informer never holds one, and
// InternalEvent wraps a live runtime.Object that no serialization can name.
func roundTripKinds() []schema.GroupVersionKind {
	var kinds []schema.GroupVersionKind
	for gvk := range scheme.Scheme.AllKnownTypes() {
		if gvk.Version == runtime.APIVersionInternal {
			continue
		}
		kinds = append(kinds, gvk)
	}
	sort.Slice(kinds, func(i, j int) bool { return kinds[i].String() < kinds[j].String() })
	return kinds
}

// newFuzzers returns two fuzzers. The first is the one the apimachinery
// round-trip tests use. k8s.io/api's TestRoundTripExternalTypes uses
// metafuzzer.Funcs alone, with half the pointers nil and zero or one
// element per slice and map. The second is denser and reaches deeper
// fields. It leaves a fifth of the pointers nil and puts exactly one element
// in each slice and map. Two elements make some kinds explode to minutes.
//
// No protobuf-specific exception was needed. Every external type in the
// scheme round-trips through its generated protobuf methods with the
// generic meta fuzz funcs. The funcs already encode the limits every k8s
// serialization shares. Time has no sub-second precision, and MicroTime no
// sub-microsecond precision. Quantities are canonical. Nested objects have
// blank TypeMeta. RawExtension holds valid JSON, and FieldsV1 is left nil.
// Upstream uses the same funcs for its protobuf round trip.
func newFuzzers(seed int64, codecs runtimeserializer.CodecFactory) (sparse, dense *randfill.Filler) {
	funcs := fuzzer.MergeFuzzerFuncs(metafuzzer.Funcs)
	sparse = fuzzer.FuzzerFor(funcs, rand.NewSource(seed), codecs)
	dense = fuzzer.FuzzerFor(funcs, rand.NewSource(seed+1), codecs).NilChance(.2).NumElements(1, 1)
	return sparse, dense
}

// TestCodecRoundTripAllKinds fuzzes objects of every kind in client-go's
// scheme. It checks that Decode(Encode(obj)) is semantically equal to obj,
// TypeMeta included. TypeMeta may be empty, as typed informers deliver it.
// It may be set to the object's kind, or to something else entirely. The
// codec must keep it "exactly as it was".
func TestCodecRoundTripAllKinds(t *testing.T) {
	n := *roundTripN
	if n < 20 {
		n = 20
	}
	base := fuzzSeed(t)
	codecs := runtimeserializer.NewCodecFactory(scheme.Scheme)
	codec := persist.NewCodec(scheme.Scheme)
	kinds := roundTripKinds()
	t.Logf("round-tripping %d kinds, %d objects each", len(kinds), n)

	for _, gvk := range kinds {
		name := gvk.Group + "." + gvk.Version + "." + gvk.Kind
		if gvk.Group == "" {
			name = "core." + gvk.Version + "." + gvk.Kind
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			sparse, dense := newFuzzers(seedFor(base, gvk.String()), codecs)
			for i := 0; i < n; i++ {
				obj, err := scheme.Scheme.New(gvk)
				if err != nil {
					t.Fatalf("scheme.New: %v", err)
				}
				if i < n/2 {
					sparse.Fill(obj)
				} else {
					dense.Fill(obj)
				}
				// The fuzz funcs blank every TypeMeta; choose ours.
				if tm, ok := obj.GetObjectKind().(*metav1.TypeMeta); ok {
					switch i % 4 {
					case 0, 1: // empty, as typed informers deliver objects
						*tm = metav1.TypeMeta{}
					case 2: // the object's own kind
						tm.APIVersion, tm.Kind = gvk.GroupVersion().String(), gvk.Kind
					case 3: // arbitrary, even inconsistent, values are kept as they are
						tm.APIVersion, tm.Kind = "example.com/v9", fmt.Sprintf("Not%s-%d", gvk.Kind, i)
					}
				}
				checkTypedRoundTrip(t, codec, obj, i)
				if t.Failed() {
					return // one diff per kind is enough to read
				}
			}
		})
	}
}

// checkTypedRoundTrip encodes and decodes obj and compares the result.
func checkTypedRoundTrip(t *testing.T, codec *persist.Codec, obj runtime.Object, i int) {
	t.Helper()
	mustNotPanic(t, fmt.Sprintf("object %d", i), func() {
		want := obj.DeepCopyObject()
		rec, err := codec.Encode(obj)
		if err != nil {
			t.Errorf("object %d: Encode: %v\n%s", i, err, dump.Pretty(obj))
			return
		}
		if !apiequality.Semantic.DeepEqual(want, obj) {
			t.Errorf("object %d: Encode altered its input:\n%s", i, objectDiff(want, obj))
			return
		}
		got, err := codec.Decode(rec)
		if err != nil {
			t.Errorf("object %d: Decode: %v\n%s", i, err, dump.Pretty(obj))
			return
		}
		if reflect.TypeOf(got) != reflect.TypeOf(want) {
			t.Errorf("object %d: decoded a %T, want %T", i, got, want)
			return
		}
		if !apiequality.Semantic.DeepEqual(want, got) {
			t.Errorf("object %d: round trip differs:\n%s", i, objectDiff(want, got))
			return
		}
		// TypeMeta exactly, not only semantically.
		if wk, gk := want.GetObjectKind().GroupVersionKind(), got.GetObjectKind().GroupVersionKind(); wk != gk {
			t.Errorf("object %d: TypeMeta %v, want %v", i, gk, wk)
		}
		if wtm, ok := want.GetObjectKind().(*metav1.TypeMeta); ok {
			if gtm := got.GetObjectKind().(*metav1.TypeMeta); *gtm != *wtm {
				t.Errorf("object %d: TypeMeta %#v, want %#v", i, *gtm, *wtm)
			}
		}
		// The header's resourceVersion is the object's.
		if acc, ok := want.(metav1.ObjectMetaAccessor); ok {
			rv, err := format.ReadResourceVersion(rec)
			if err != nil || rv != acc.GetObjectMeta().GetResourceVersion() {
				t.Errorf("object %d: ReadResourceVersion = %q, %v; want %q", i, rv, err, acc.GetObjectMeta().GetResourceVersion())
			}
		}
		// Encoding is deterministic (protobuf map fields are marshalled in key
		// order): encoding the object again gives the same record, ...
		if again, err := codec.Encode(obj); err != nil || !bytes.Equal(rec, again) {
			t.Errorf("object %d: encoding twice gave different records (%d vs %d bytes, %v)", i, len(rec), len(again), err)
		}
		// ... and the decoded object re-encodes to a fixed point. Not
		// necessarily to rec: protobuf does not tell a nil []byte map value
		// (ConfigMap.BinaryData{"k": nil}) from an empty one, which decodes as
		// []byte{} and then marshals two bytes longer. Semantically equal.
		if rec2, err := codec.Encode(got); err != nil {
			t.Errorf("object %d: re-Encode: %v", i, err)
		} else if got2, err := codec.Decode(rec2); err != nil {
			t.Errorf("object %d: re-Decode: %v", i, err)
		} else if rec3, err := codec.Encode(got2); err != nil || !bytes.Equal(rec2, rec3) {
			t.Errorf("object %d: re-encoding is not a fixed point (%d vs %d bytes, %v)", i, len(rec2), len(rec3), err)
		}
		// The decoded object does not alias the record (bbolt memory is
		// reused once the transaction ends).
		for j := range rec {
			rec[j] = 0xA5
		}
		if !apiequality.Semantic.DeepEqual(want, got) {
			t.Errorf("object %d: decoded object aliases the record:\n%s", i, objectDiff(want, got))
		}
	})
}

// TestCodecTypeMeta checks TypeMeta handling on one kind explicitly: empty
// stays empty, set stays set, and the decoded object's GVK is what was stored.
func TestCodecTypeMeta(t *testing.T) {
	codec := persist.NewCodec(scheme.Scheme)
	for _, tm := range []metav1.TypeMeta{
		{},
		{APIVersion: "v1", Kind: "Pod"},
		{APIVersion: "v1"},
		{Kind: "Pod"},
		{APIVersion: "apps/v1", Kind: "Deployment"}, // wrong, but kept
	} {
		pod := fixture.Pod(1)
		pod.TypeMeta = tm
		rec, err := codec.Encode(pod)
		if err != nil {
			t.Fatalf("%#v: Encode: %v", tm, err)
		}
		h, _, err := format.ReadHeader(rec)
		if err != nil {
			t.Fatalf("%#v: ReadHeader: %v", tm, err)
		}
		if h.APIVersion != tm.APIVersion || h.Kind != tm.Kind || h.Type != "/v1, Kind=Pod" || h.Encoding != format.EncodingProtobuf {
			t.Errorf("%#v: header %+v", tm, h)
		}
		obj, err := codec.Decode(rec)
		if err != nil {
			t.Fatalf("%#v: Decode: %v", tm, err)
		}
		got := obj.(*corev1.Pod)
		if got.TypeMeta != tm {
			t.Errorf("TypeMeta %#v round-tripped to %#v", tm, got.TypeMeta)
		}
		pod.TypeMeta = got.TypeMeta
		if !apiequality.Semantic.DeepEqual(pod, got) {
			t.Errorf("%#v: pod differs:\n%s", tm, objectDiff(pod, got))
		}
	}
}

// ---------------------------------------------------------------------------
// Unstructured

// unstructuredGen produces random JSON-compatible values of the kinds the
// apiserver's decoder produces for unstructured content: map[string]any,
// []any, string, int64, float64, bool and nil.
//
// Values it deliberately does not produce, and why:
//   - NaN and ±Inf: NaN never equals itself, so DeepEqual cannot compare it;
//     TestCodecUnstructuredFloatsStayFloats checks both bit for bit.
//   - typed nils ([]any(nil), map[string]any(nil)) below the top level and
//     non-JSON Go types (int, int32, []string, ...): decoded JSON never
//     contains them, and Unstructured's own DeepCopy rejects the latter.
//   - invalid UTF-8 in strings: JSON strings are UTF-8; encoding/json
//     replaces invalid bytes with U+FFFD.
type unstructuredGen struct {
	r *rand.Rand
}

var interestingInts = []int64{
	0, 1, -1, 42, -42, 255, 256, 65535, 65536, math.MaxInt32, math.MinInt32,
	math.MaxInt32 + 1, math.MinInt32 - 1, math.MaxUint32, 1 << 53, 1<<53 + 1,
	-(1 << 53), -(1<<53 + 1), math.MaxInt64, math.MinInt64, math.MaxInt64 - 1,
	math.MinInt64 + 1,
}

var interestingFloats = []float64{
	0.5, -0.5, 0.1, -0.1, 1.5, 3.141592653589793, -2.718281828459045,
	1e-7, -1e-7, 1e-300, math.SmallestNonzeroFloat64, -math.SmallestNonzeroFloat64,
	math.MaxFloat64, -math.MaxFloat64, // integral, but beyond int64: stay float64
	1e21, -1e21, 9.3e18, // integral, beyond int64 or printed with an exponent
	123456789.125, 0.30000000000000004, 1.0000000000000002,
}

var interestingStrings = []string{
	"", " ", "a", "true", "null", "0", "-1", "1.5", "{}", "[]", `"quoted"`, `back\slash`,
	"<script>&amp;</script>", "line\nbreak\ttab\r", "\x00\x01\x1f", "\u2028\u2029",
	"日本語", "emoji 🙂", "ümlaut", strings.Repeat("x", 1000),
}

func (g *unstructuredGen) str() string {
	if g.r.Intn(3) == 0 {
		return interestingStrings[g.r.Intn(len(interestingStrings))]
	}
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._/:é√"
	n := g.r.Intn(16)
	var b strings.Builder
	for i := 0; i < n; i++ {
		b.WriteRune([]rune(alphabet)[g.r.Intn(len([]rune(alphabet)))])
	}
	return b.String()
}

func (g *unstructuredGen) int64() int64 {
	switch g.r.Intn(3) {
	case 0:
		return interestingInts[g.r.Intn(len(interestingInts))]
	case 1:
		return g.r.Int63n(1000) - 500
	default:
		v := g.r.Int63()
		if g.r.Intn(2) == 0 {
			v = -v
		}
		return v
	}
}

func (g *unstructuredGen) float64() float64 {
	for {
		var f float64
		switch g.r.Intn(3) {
		case 0:
			f = interestingFloats[g.r.Intn(len(interestingFloats))]
		case 1:
			f = g.r.NormFloat64() * math.Pow(10, float64(g.r.Intn(30)-15))
		default:
			f = math.Float64frombits(g.r.Uint64())
		}
		if math.IsNaN(f) || math.IsInf(f, 0) {
			continue
		}
		return f
	}
}

func (g *unstructuredGen) value(depth int) any {
	k := g.r.Intn(10)
	if depth <= 0 && k >= 8 {
		k = g.r.Intn(8)
	}
	switch k {
	case 0, 1:
		return g.str()
	case 2, 3:
		return g.int64()
	case 4, 5:
		return g.float64()
	case 6:
		return g.r.Intn(2) == 0
	case 7:
		return nil
	case 8:
		return g.object(depth - 1)
	default:
		n := g.r.Intn(5)
		s := make([]any, n) // never a nil slice: JSON "[]" decodes to an empty one
		for i := range s {
			s[i] = g.value(depth - 1)
		}
		return s
	}
}

func (g *unstructuredGen) object(depth int) map[string]any {
	n := g.r.Intn(6)
	m := make(map[string]any, n)
	for i := 0; i < n; i++ {
		m[g.str()] = g.value(depth)
	}
	return m
}

// top returns a random unstructured object; most have apiVersion, kind and
// metadata like real objects, some are arbitrary maps (the cache must store
// whatever it is given).
func (g *unstructuredGen) top() *unstructured.Unstructured {
	obj := g.object(4)
	if g.r.Intn(5) != 0 {
		obj["apiVersion"] = "example.com/v1"
		obj["kind"] = "Widget"
		md := g.object(2)
		md["name"] = g.str()
		md["resourceVersion"] = fmt.Sprint(g.r.Int63())
		md["generation"] = g.int64()
		obj["metadata"] = md
	}
	return &unstructured.Unstructured{Object: obj}
}

func checkUnstructuredRoundTrip(t *testing.T, codec *persist.Codec, u *unstructured.Unstructured, what string) {
	t.Helper()
	mustNotPanic(t, what, func() {
		want := runtime.DeepCopyJSON(u.Object)
		if u.Object == nil {
			want = nil
		}
		rec, err := codec.Encode(u)
		if err != nil {
			t.Errorf("%s: Encode: %v", what, err)
			return
		}
		if !reflect.DeepEqual(want, u.Object) {
			t.Errorf("%s: Encode altered its input:\n%s", what, objectDiff(want, u.Object))
			return
		}
		h, _, err := format.ReadHeader(rec)
		if err != nil || h.Encoding != format.EncodingUnstructured || h.ResourceVersion != u.GetResourceVersion() ||
			h.APIVersion != u.GetAPIVersion() || h.Kind != u.GetKind() || h.Type != "" {
			t.Errorf("%s: ReadHeader = %+v, %v", what, h, err)
		}
		obj, err := codec.Decode(rec)
		if err != nil {
			t.Errorf("%s: Decode: %v", what, err)
			return
		}
		got, ok := obj.(*unstructured.Unstructured)
		if !ok {
			t.Errorf("%s: decoded a %T", what, obj)
			return
		}
		if !reflect.DeepEqual(want, got.Object) {
			t.Errorf("%s: round trip differs:\n%s", what, objectDiff(want, got.Object))
			return
		}
		for j := range rec {
			rec[j] = 0
		}
		if !reflect.DeepEqual(want, got.Object) {
			t.Errorf("%s: decoded object aliases the record", what)
		}
	})
}

// TestCodecUnstructuredRoundTrip checks that random unstructured content comes
// back reflect.DeepEqual: int64 stays int64, float64 stays float64.
func TestCodecUnstructuredRoundTrip(t *testing.T) {
	base := fuzzSeed(t)
	g := &unstructuredGen{r: rand.New(rand.NewSource(seedFor(base, "unstructured")))}
	codec := persist.NewCodec(scheme.Scheme)
	n := 10 * *roundTripN
	if n < 200 {
		n = 200
	}
	for i := 0; i < n; i++ {
		checkUnstructuredRoundTrip(t, codec, g.top(), fmt.Sprintf("random object %d", i))
		if t.Failed() {
			return
		}
	}

	// Edge cases by hand.
	for name, obj := range map[string]map[string]any{
		"nil content":   nil,
		"empty content": {},
		"no kind":       {"spec": map[string]any{"a": int64(1)}},
		"every int":     {"ints": anySlice(interestingInts)},
		"every float":   {"floats": anySlice(interestingFloats)},
		"every string":  {"strings": anySlice(interestingStrings)},
		"empty nested":  {"m": map[string]any{}, "s": []any{}, "n": nil, "ss": []any{[]any{}, map[string]any{}}},
		"deep": func() map[string]any {
			m := map[string]any{"leaf": int64(-7)}
			for i := 0; i < 100; i++ { // a chain, 200 levels deep
				m = map[string]any{"x": []any{m}, "i": int64(i)}
			}
			return m
		}(),
	} {
		checkUnstructuredRoundTrip(t, codec, &unstructured.Unstructured{Object: obj}, name)
	}
	checkUnstructuredRoundTrip(t, codec, fixture.CustomResource(3), "realistic CRD")
}

func anySlice[T any](s []T) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

// TestCodecUnstructuredFloatsStayFloats checks that a float64 holding an
// integral value (2.0, 1e6, -0.0) comes back as that float64, not as int64.
// JSON cannot tell them apart, which is why the unstructured payload is
// msgpack. Such
// floats occur in objects decoded from CBOR and in objects built by
// runtime.DefaultUnstructuredConverter from structs with float64 fields. NaN
// and infinities, which JSON cannot carry at all, are kept too.
func TestCodecUnstructuredFloatsStayFloats(t *testing.T) {
	codec := persist.NewCodec(scheme.Scheme)
	for _, f := range []float64{2, -3, 0, math.Copysign(0, -1), 1e6, 1 << 53, 9e18, math.Inf(1), math.Inf(-1), math.NaN()} {
		u := &unstructured.Unstructured{Object: map[string]any{"v": f, "i": int64(2)}}
		rec, err := codec.Encode(u)
		if err != nil {
			t.Fatalf("%v: Encode: %v", f, err)
		}
		obj, err := codec.Decode(rec)
		if err != nil {
			t.Fatalf("%v: Decode: %v", f, err)
		}
		content := obj.(*unstructured.Unstructured).Object
		g, ok := content["v"].(float64)
		if !ok {
			t.Errorf("float64(%v) round-tripped to %T(%v)", f, content["v"], content["v"])
			continue
		}
		if math.Float64bits(g) != math.Float64bits(f) {
			t.Errorf("float64(%v) round-tripped to float64(%v)", f, g)
		}
		if i, ok := content["i"].(int64); !ok || i != 2 {
			t.Errorf("int64(2) round-tripped to %T(%v)", content["i"], content["i"])
		}
	}
}

// ---------------------------------------------------------------------------
// Errors

// notInScheme is a runtime.Object the scheme does not know.
type notInScheme struct {
	metav1.TypeMeta
	metav1.ObjectMeta
}

func (o *notInScheme) DeepCopyObject() runtime.Object {
	c := *o
	o.ObjectMeta.DeepCopyInto(&c.ObjectMeta)
	return &c
}

// rawRecord builds a record by hand in the documented envelope layout:
// [version, resourceVersion, encoding, type, apiVersion, kind, payload].
func rawRecord(t testing.TB, fields ...any) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	if err := enc.EncodeArrayLen(len(fields)); err != nil {
		t.Fatal(err)
	}
	for _, f := range fields {
		if err := enc.Encode(f); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

func TestCodecErrors(t *testing.T) {
	codec := persist.NewCodec(scheme.Scheme)

	t.Run("unencodable", func(t *testing.T) {
		for name, tc := range map[string]struct {
			codec *persist.Codec
			obj   runtime.Object
		}{
			"nil object":           {codec, nil},
			"type not in scheme":   {codec, &notInScheme{ObjectMeta: metav1.ObjectMeta{Name: "x"}}},
			"typed without scheme": {persist.NewCodec(nil), fixture.Pod(0)},
			"chan in unstructured": {codec, &unstructured.Unstructured{Object: map[string]any{"v": make(chan int)}}},
		} {
			mustNotPanic(t, name, func() {
				rec, err := tc.codec.Encode(tc.obj)
				if !errors.Is(err, persist.ErrUnencodable) {
					t.Errorf("%s: Encode = %d bytes, %v; want ErrUnencodable", name, len(rec), err)
				}
			})
		}
	})

	pod := fixture.Pod(7)
	podRec, err := codec.Encode(pod)
	if err != nil {
		t.Fatal(err)
	}
	crdRec, err := codec.Encode(fixture.CustomResource(7))
	if err != nil {
		t.Fatal(err)
	}

	t.Run("truncated", func(t *testing.T) {
		for name, rec := range map[string][]byte{"pod": podRec, "crd": crdRec} {
			for n := 0; n < len(rec); n++ {
				mustNotPanic(t, fmt.Sprintf("%s[:%d]", name, n), func() {
					// A full-capacity slice, so a decoder reading past the end
					// would trip over the boundary rather than find the bytes.
					tr := bytes.Clone(rec[:n])
					obj, err := codec.Decode(tr)
					if !errors.Is(err, persist.ErrCorruptRecord) {
						t.Errorf("Decode(%s[:%d]) = %T, %v; want ErrCorruptRecord", name, n, obj, err)
					}
					if _, _, err := format.ReadHeader(tr); !errors.Is(err, persist.ErrCorruptRecord) {
						t.Errorf("ReadHeader(%s[:%d]) = %v; want ErrCorruptRecord", name, n, err)
					}
					// ReadResourceVersion reads two fields only; a prefix that
					// holds them is enough.
					if _, err := format.ReadResourceVersion(tr); err != nil && !errors.Is(err, persist.ErrCorruptRecord) {
						t.Errorf("ReadResourceVersion(%s[:%d]) = %v; want nil or ErrCorruptRecord", name, n, err)
					}
				})
			}
			// Trailing bytes are corruption too.
			if _, err := codec.Decode(append(bytes.Clone(rec), 0)); !errors.Is(err, persist.ErrCorruptRecord) {
				t.Errorf("Decode(%s + 1 byte) = %v; want ErrCorruptRecord", name, err)
			}
		}
	})

	t.Run("garbage", func(t *testing.T) {
		r := rand.New(rand.NewSource(1))
		inputs := [][]byte{nil, {}, []byte("not a record"), []byte(`{"kind":"Pod"}`), {0xc0}, {0x90}, {0x97}, {0xdd, 0xff, 0xff, 0xff, 0xff}}
		for i := 0; i < 2000; i++ {
			b := make([]byte, r.Intn(64))
			r.Read(b)
			if i%2 == 0 && len(b) > 0 {
				b[0] = 0x97 // fixarray of 7: gets past the first check
			}
			inputs = append(inputs, b)
		}
		for i, b := range inputs {
			mustNotPanic(t, fmt.Sprintf("garbage %d (%x)", i, b), func() {
				if obj, err := codec.Decode(b); !errors.Is(err, persist.ErrCorruptRecord) {
					t.Errorf("Decode(%x) = %T, %v; want ErrCorruptRecord", b, obj, err)
				}
			})
		}
	})

	t.Run("bad envelope", func(t *testing.T) {
		payload, _ := pod.Marshal()
		for name, rec := range map[string][]byte{
			"wrong version":      rawRecord(t, uint8(9), "1", uint8(1), "/v1, Kind=Pod", "", "", payload),
			"6 fields":           rawRecord(t, uint8(1), "1", uint8(1), "/v1, Kind=Pod", "", ""),
			"8 fields":           rawRecord(t, uint8(1), "1", uint8(1), "/v1, Kind=Pod", "", "", payload, "x"),
			"unknown encoding":   rawRecord(t, uint8(1), "1", uint8(99), "/v1, Kind=Pod", "", "", payload),
			"malformed type":     rawRecord(t, uint8(1), "1", uint8(1), "Pod", "", "", payload),
			"garbage protobuf":   rawRecord(t, uint8(1), "1", uint8(1), "/v1, Kind=Pod", "", "", []byte{0x0a, 0xff, 0xff, 0xff}),
			"protobuf as json":   rawRecord(t, uint8(1), "1", uint8(2), "/v1, Kind=Pod", "", "", payload),
			"protobuf as unstr.": rawRecord(t, uint8(1), "1", uint8(3), "", "", "", payload),
			"rv not a string":    rawRecord(t, uint8(1), int64(5), uint8(1), "/v1, Kind=Pod", "", "", payload),
			"payload not bytes":  rawRecord(t, uint8(1), "1", uint8(1), "/v1, Kind=Pod", "", "", int64(3)),
		} {
			mustNotPanic(t, name, func() {
				if obj, err := codec.Decode(rec); !errors.Is(err, persist.ErrCorruptRecord) {
					t.Errorf("%s: Decode = %T, %v; want ErrCorruptRecord", name, obj, err)
				}
			})
		}
		// A well-formed record of a type the decoding scheme lacks.
		for name, c := range map[string]*persist.Codec{
			"no scheme":    persist.NewCodec(nil),
			"empty scheme": persist.NewCodec(runtime.NewScheme()),
		} {
			if obj, err := c.Decode(podRec); !errors.Is(err, persist.ErrUnknownType) {
				t.Errorf("%s: Decode(pod) = %T, %v; want ErrUnknownType", name, obj, err)
			}
		}
		unknown := rawRecord(t, uint8(1), "1", uint8(1), "example.com/v1, Kind=Widget", "", "", payload)
		if obj, err := codec.Decode(unknown); !errors.Is(err, persist.ErrUnknownType) {
			t.Errorf("Decode(unknown type) = %T, %v; want ErrUnknownType", obj, err)
		}
	})

	// Flipping any single byte must not panic; the result is an error of the
	// documented kinds or (for bytes in strings and payload) some object.
	t.Run("bit flips", func(t *testing.T) {
		for name, rec := range map[string][]byte{"pod": podRec, "crd": crdRec} {
			for i := range rec {
				x := []byte{0xff, 0x80, 0x01}[i%3] // one flip per byte keeps -race fast
				mustNotPanic(t, fmt.Sprintf("%s byte %d ^ %#x", name, i, x), func() {
					b := bytes.Clone(rec)
					b[i] ^= x
					if _, err := codec.Decode(b); err != nil && !errors.Is(err, persist.ErrCorruptRecord) && !errors.Is(err, persist.ErrUnknownType) {
						t.Errorf("Decode(%s with byte %d ^ %#x) = %v; want ErrCorruptRecord or ErrUnknownType", name, i, x, err)
					}
				})
				if t.Failed() {
					return
				}
			}
		}
	})
}

// FuzzCodecDecode feeds arbitrary bytes to Decode; it must return an object
// or an error of the documented kinds, and never panic. Without -fuzz it runs
// the seed corpus only.
func FuzzCodecDecode(f *testing.F) {
	codec := persist.NewCodec(scheme.Scheme)
	for _, obj := range []runtime.Object{fixture.Pod(1), fixture.CustomResource(1), &corev1.ConfigMap{}} {
		rec, err := codec.Encode(obj)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(rec)
		f.Add(rec[:len(rec)/2])
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		obj, err := codec.Decode(b)
		if err == nil {
			if obj == nil {
				t.Fatal("Decode returned neither object nor error")
			}
			return
		}
		if !errors.Is(err, persist.ErrCorruptRecord) && !errors.Is(err, persist.ErrUnknownType) {
			t.Fatalf("Decode: %v; want ErrCorruptRecord or ErrUnknownType", err)
		}
	})
}

// TestCodecEncodesObjectsLargerThanAnySeen encodes, with one codec, objects
// that grow past the room the codec keeps for marshalling. That room is
// 64 KiB and twice the largest object it has seen. Each record must be what
// the protobuf marshalling gives, and must decode to the object, whatever
// the codec saw before.
func TestCodecEncodesObjectsLargerThanAnySeen(t *testing.T) {
	c := persist.NewCodec(scheme.Scheme)
	for _, size := range []int{100, 50 << 10, 300 << 10, 100, 1 << 20, 3 << 20} {
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("cm-%d", size), ResourceVersion: "7"},
			Data:       map[string]string{"blob": strings.Repeat("x", size)},
		}
		want, err := cm.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		rec, err := c.Encode(cm)
		if err != nil {
			t.Fatalf("%d bytes: %v", size, err)
		}
		h, payload, err := format.ReadHeader(rec)
		if err != nil {
			t.Fatal(err)
		}
		if h.Encoding != format.EncodingProtobuf || !bytes.Equal(payload, want) {
			t.Fatalf("%d bytes: record holds %d bytes of encoding %d, want the %d bytes of the ConfigMap's protobuf", size, len(payload), h.Encoding, len(want))
		}
		got, err := c.Decode(rec)
		if err != nil {
			t.Fatal(err)
		}
		if !apiequality.Semantic.DeepEqual(got, cm) {
			t.Fatalf("%d bytes: decoded object differs", size)
		}
	}
}

// TestCodecPartialObjectMetadataWithAnyScheme covers metadata-only
// informers, which store metav1.PartialObjectMetadata. client-go's
// scheme.Scheme, which most programs pass to Open, does not register it.
// Every codec must still encode and decode it under one type name. That
// holds with client-go's scheme, without a scheme, and with a scheme that
// registers it (controller-runtime's adapter). So a record written by one
// decodes with the others. Fuzzed metadata and every TypeMeta round-trip
// exactly.
func TestCodecPartialObjectMetadataWithAnyScheme(t *testing.T) {
	withMeta := runtime.NewScheme()
	if err := metav1.AddMetaToScheme(withMeta); err != nil {
		t.Fatal(err)
	}
	codecs := map[string]*persist.Codec{
		"client-go scheme": persist.NewCodec(scheme.Scheme),
		"nil scheme":       persist.NewCodec(nil),
		"scheme with meta": persist.NewCodec(withMeta),
	}
	const wantType = "meta.k8s.io/v1, Kind=PartialObjectMetadata"
	_, dense := newFuzzers(seedFor(fuzzSeed(t), t.Name()), runtimeserializer.NewCodecFactory(scheme.Scheme))
	for i := range 50 {
		want := &metav1.PartialObjectMetadata{}
		dense.Fill(&want.ObjectMeta)
		want.TypeMeta = []metav1.TypeMeta{
			{}, // what client-go's metadata client delivers
			{APIVersion: "meta.k8s.io/v1", Kind: "PartialObjectMetadata"},
			{APIVersion: "v1", Kind: "ConfigMap"},
		}[i%3]
		for encName, enc := range codecs {
			rec, err := enc.Encode(want)
			if err != nil {
				t.Fatalf("%s: Encode: %v", encName, err)
			}
			if h, _, err := format.ReadHeader(rec); err != nil || h.Type != wantType || h.Encoding != format.EncodingProtobuf {
				t.Fatalf("%s: header %+v, %v; want type %q, protobuf", encName, h, err, wantType)
			}
			for decName, dec := range codecs {
				obj, err := dec.Decode(rec)
				if err != nil {
					t.Fatalf("encoded with %s, decoded with %s: %v", encName, decName, err)
				}
				if !apiequality.Semantic.DeepEqual(want, obj) {
					t.Fatalf("encoded with %s, decoded with %s:\n%s", encName, decName, objectDiff(want, obj))
				}
			}
		}
	}
	// Its list too; other types still need a scheme.
	if _, err := codecs["nil scheme"].Encode(&metav1.PartialObjectMetadataList{}); err != nil {
		t.Errorf("nil scheme: PartialObjectMetadataList: %v", err)
	}
	if _, err := codecs["nil scheme"].Encode(fixture.Pod(0)); !errors.Is(err, persist.ErrUnencodable) {
		t.Errorf("nil scheme: Pod: %v, want ErrUnencodable", err)
	}
}

// An Op's Payload is the object's protobuf message as the server encoded
// it, and its record stores it. When the payload is the object's message,
// the record is the one the codec would make of the object. An object the
// codec does not store as protobuf ignores it.
func TestApplyStoresThePayload(t *testing.T) {
	path := t.TempDir() + "/cache.db"
	db := openDB(t, path, persist.Options{})
	c, err := db.Collection("pods", persist.CollectionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod := fixture.Pod(3)
	payload, err := pod.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Apply([]persist.Op{{Key: "ns/p", Object: pod, Payload: payload}}, "1"); err != nil {
		t.Fatal(err)
	}
	// A payload that is not pod's (which Op.Payload forbids) shows it is
	// the payload that is stored, not a marshal of the object.
	other := fixture.Pod(4)
	otherPayload, err := other.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Apply([]persist.Op{{Key: "ns/q", Object: pod.DeepCopy(), Payload: otherPayload}}, "2"); err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "u", "namespace": "ns"}}}
	if err := c.Apply([]persist.Op{{Key: "ns/u", Object: u, Payload: []byte("not protobuf")}}, "3"); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	records, err := inspectfile.ReadRecords(path, "pods")
	if err != nil {
		t.Fatal(err)
	}
	codec := persist.NewCodec(scheme.Scheme)
	want, err := codec.Encode(pod)
	if err != nil {
		t.Fatal(err)
	}
	if got := records["ns/p"]; !bytes.Equal(got, want) {
		t.Errorf("the record made from the payload differs from the codec's record of the object")
	}
	obj, err := codec.Decode(records["ns/q"])
	if err != nil {
		t.Fatal(err)
	}
	if got := obj.(*corev1.Pod); got.Name != other.Name {
		t.Errorf("stored %s, want the payload's %s", got.Name, other.Name)
	}
	obj, err = codec.Decode(records["ns/u"])
	if err != nil {
		t.Fatalf("an unstructured object stored with a payload: %v", err)
	}
	if obj.(*unstructured.Unstructured).GetName() != "u" {
		t.Errorf("unstructured object stored as %v", obj)
	}
}
