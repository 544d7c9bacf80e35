package wire

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
)

// eachField calls fn with every field of msg in order: its number, wire
// type and value. The value is a length-delimited field's payload, or a
// scalar's encoded bytes, a slice of msg in both cases.
func eachField(msg []byte, fn func(num protowire.Number, typ protowire.Type, v []byte) error) error {
	for len(msg) > 0 {
		num, typ, n := protowire.ConsumeTag(msg)
		if n < 0 {
			return parseError("tag", n)
		}
		if num > protowire.MaxValidNumber {
			return badNumber(num)
		}
		msg = msg[n:]
		var v []byte
		switch typ {
		case protowire.BytesType:
			v, n = protowire.ConsumeBytes(msg)
		case protowire.VarintType, protowire.Fixed32Type, protowire.Fixed64Type:
			if n = protowire.ConsumeFieldValue(num, typ, msg); n >= 0 {
				v = msg[:n]
			}
		default:
			return unsupported(typ)
		}
		if n < 0 {
			return parseError(fmt.Sprintf("field %d", num), n)
		}
		msg = msg[n:]
		if err := fn(num, typ, v); err != nil {
			return err
		}
	}
	return nil
}

// badNumber reports a field number above protowire.MaxValidNumber, which
// no generated message declares; protowire.ConsumeTag rejects only zero.
func badNumber(num protowire.Number) error {
	return fmt.Errorf("%w: illegal field number %d", ErrMalformed, num)
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
