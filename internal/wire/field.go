package wire

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
)

// consumeField reads the field at the start of msg: its number, wire type
// and value, and the bytes it takes in msg. The value is a length-delimited
// field's payload, or a scalar's encoded bytes, a slice of msg in both
// cases.
//
// It runs for every field of every item, so it saves calls. A varint of one
// byte (most tags and lengths) is read inline, since protowire.ConsumeVarint
// is too large to inline. ConsumeTag and ConsumeBytes would each add a call.
func consumeField(msg []byte) (num protowire.Number, typ protowire.Type, v []byte, n int, err error) {
	tag, tn := uint64(0), 1
	if len(msg) > 0 && msg[0] < 0x80 {
		tag = uint64(msg[0])
	} else if tag, tn = protowire.ConsumeVarint(msg); tn < 0 {
		return 0, 0, nil, 0, tagError(0, tn)
	}
	num, typ = protowire.DecodeTag(tag)
	if num < protowire.MinValidNumber || num > protowire.MaxValidNumber {
		return 0, 0, nil, 0, tagError(num, 0)
	}
	rest := msg[tn:]
	if typ != protowire.BytesType {
		v, n, err = consumeScalar(num, typ, rest)
		return num, typ, v, tn + n, err
	}
	size, sn := uint64(0), 1
	if len(rest) > 0 && rest[0] < 0x80 {
		size = uint64(rest[0])
	} else if size, sn = protowire.ConsumeVarint(rest); sn < 0 {
		return 0, 0, nil, 0, valueError(num, sn)
	}
	if size > uint64(len(rest)-sn) {
		return 0, 0, nil, 0, fmt.Errorf("%w: field %d: bad length", ErrMalformed, num)
	}
	return num, typ, rest[sn : sn+int(size)], tn + sn + int(size), nil
}

// consumeScalar reads a varint or fixed-size value of field num at the
// start of b: its encoded bytes and their length.
func consumeScalar(num protowire.Number, typ protowire.Type, b []byte) ([]byte, int, error) {
	switch typ {
	case protowire.VarintType, protowire.Fixed32Type, protowire.Fixed64Type:
		n := protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return nil, 0, valueError(num, n)
		}
		return b[:n], n, nil
	}
	return nil, 0, unsupported(typ)
}

// eachField calls fn with every field of msg in order (see consumeField).
func eachField(msg []byte, fn func(num protowire.Number, typ protowire.Type, v []byte) error) error {
	for len(msg) > 0 {
		num, typ, v, n, err := consumeField(msg)
		if err != nil {
			return err
		}
		msg = msg[n:]
		if err := fn(num, typ, v); err != nil {
			return err
		}
	}
	return nil
}

// tagError reports a tag protowire rejects (n < 0), or field number num,
// which is zero or above protowire.MaxValidNumber: no message declares it.
func tagError(num protowire.Number, n int) error {
	if n < 0 {
		return parseError("tag", n)
	}
	return fmt.Errorf("%w: illegal field number %d", ErrMalformed, num)
}

// valueError reports field num's value, which protowire rejects (n < 0).
func valueError(num protowire.Number, n int) error {
	return parseError(fmt.Sprintf("field %d", num), n)
}

// unsupported reports a wire type Kubernetes never writes. Groups (3, 4)
// are deprecated, and 6 and 7 do not exist.
func unsupported(typ protowire.Type) error {
	return fmt.Errorf("%w: unsupported wire type %d", ErrMalformed, typ)
}

// stringField stores a string field's value in p.
func stringField(typ protowire.Type, v []byte, p *string) error {
	if typ != protowire.BytesType {
		return errWireType
	}
	*p = string(v)
	return nil
}

// bytesField stores a string field's value in p, without copying it.
func bytesField(typ protowire.Type, v []byte, p *[]byte) error {
	if typ != protowire.BytesType {
		return errWireType
	}
	*p = v
	return nil
}
