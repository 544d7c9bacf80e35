package persist

import (
	"bytes"
	"fmt"
	"sync"

	"github.com/vmihailenco/msgpack/v5"
)

// The content of an unstructured object is JSON-shaped: maps with string
// keys, slices, strings, bools, nil, int64 and float64. msgpack keeps int64
// and float64 apart where JSON cannot (2.0 would come back as int64(2)).
//
// Encoding writes int64 values as msgpack int64. It never compacts them to
// unsigned formats, which is the encoder's default. So loose decoding
// returns int64. Maps are written with sorted keys, so equal content gives
// equal records.
//
// Loose interface decoding returns int64, uint64, float64 and
// map[string]interface{}. This package never writes uint64. Other encoders
// may, so uint64 is folded back to int64 when it fits.

var contentEncoders = sync.Pool{New: func() any {
	buf := new(bytes.Buffer)
	enc := msgpack.NewEncoder(buf)
	enc.SetSortMapKeys(true)
	return &contentEncoder{buf: buf, enc: enc}
}}

type contentEncoder struct {
	buf *bytes.Buffer
	enc *msgpack.Encoder
}

func encodeContent(content map[string]interface{}) ([]byte, error) {
	ce := contentEncoders.Get().(*contentEncoder)
	defer contentEncoders.Put(ce)
	ce.buf.Reset()
	if err := ce.enc.Encode(content); err != nil {
		return nil, err
	}
	return bytes.Clone(ce.buf.Bytes()), nil
}

var contentDecoders = sync.Pool{New: func() any {
	dec := msgpack.NewDecoder(nil)
	return &contentDecoder{dec: dec}
}}

type contentDecoder struct {
	r   bytes.Reader
	dec *msgpack.Decoder
}

func decodeContent(payload []byte) (map[string]interface{}, error) {
	cd := contentDecoders.Get().(*contentDecoder)
	defer contentDecoders.Put(cd)
	cd.r.Reset(payload)
	cd.dec.Reset(&cd.r)
	cd.dec.UseLooseInterfaceDecoding(true)
	content := map[string]interface{}{}
	if err := cd.dec.Decode(&content); err != nil {
		return nil, err
	}
	if cd.r.Len() != 0 {
		return nil, fmt.Errorf("%d trailing bytes", cd.r.Len())
	}
	if err := normalizeContent(content); err != nil {
		return nil, err
	}
	return content, nil
}

// normalizeContent makes decoded content JSON-shaped in place. A uint64
// that fits becomes int64. Any other type is an error, because
// runtime.DeepCopyJSON would panic on it later.
func normalizeContent(v interface{}) error {
	switch t := v.(type) {
	case map[string]interface{}:
		for k, e := range t {
			n, err := normalizeValue(e)
			if err != nil {
				return fmt.Errorf("%q: %w", k, err)
			}
			t[k] = n
		}
	case []interface{}:
		for i, e := range t {
			n, err := normalizeValue(e)
			if err != nil {
				return fmt.Errorf("[%d]: %w", i, err)
			}
			t[i] = n
		}
	}
	return nil
}

func normalizeValue(v interface{}) (interface{}, error) {
	switch t := v.(type) {
	case nil, string, bool, int64, float64:
		return v, nil
	case uint64:
		if t > 1<<63-1 {
			return nil, fmt.Errorf("integer %d overflows int64", t)
		}
		return int64(t), nil
	case map[string]interface{}, []interface{}:
		return v, normalizeContent(v)
	}
	return nil, fmt.Errorf("unexpected %T in unstructured content", v)
}
